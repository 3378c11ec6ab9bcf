"""eksinf as a cub plugin: `cub plugin install <owner>/<repo>`, then `cub eksinf ...`.

How cub finds and runs plugins (github.com/confighub/sdk: cmd/cub/plugin.go,
plugin_install.go, plugin_exec.go and core/plugin/manifest.go):

- A plugin is a folder `<cub config dir>/plugins/<slot>/` with a `cub-plugin.yaml` manifest
  naming the commands it adds (`name`, `summary`, `entrypoint`: an executable in the folder), or
  a single executable file in `plugins/`, which becomes a command named after the file.
- `cub plugin install owner/repo` takes the repository's latest GitHub release and picks the
  asset whose name carries the OS and architecture (`linux`/`darwin`, `amd64`/`arm64`),
  preferring a `.tar.gz`. An archive is unpacked (one wrapper folder is stripped) and must carry
  its own manifest. A bare executable is run once as a hook instead, with CUB_PLUGIN_HOOK=install
  (or upgrade) and CUB_PLUGIN_DIR set, and writes the manifest itself.
- `cub eksinf ARGS` then execs the entrypoint with ARGS (plus CUB_PLUGIN=1, CUB_CONTEXT,
  CUB_SERVER, CUB_TOKEN in the environment).

eksinf ships one `.tar.gz` per OS/architecture: a self-contained executable folder built by
PyInstaller, with the manifest the executable wrote when the build ran it as a hook
(.ci/build-plugin.py), so the manifest always matches the binary. `handle_hook` is that hook.
"""

from __future__ import annotations

import os

from eksinf import __version__

HOOK = "CUB_PLUGIN_HOOK"  # "install" or "upgrade" while cub runs the binary as a hook
HOOK_DIR = "CUB_PLUGIN_DIR"  # the plugin's folder, where the hook writes the manifest
MANIFEST = "cub-plugin.yaml"
RUN_ENV = "CUB_PLUGIN"  # "1" when cub runs the plugin (`cub eksinf ...`, plugin_exec.go)
COMMAND = "eksinf"  # `cub eksinf ...`
SUMMARY = "Render, link and deploy the GPU-inference stack on Amazon EKS through ConfigHub"


def manifest(entrypoint: str) -> str:
    """The cub-plugin.yaml text (fields of core/plugin/manifest.go's Manifest and Command)."""
    return (
        f"name: {COMMAND}\n"
        f"version: {__version__}\n"
        "commands:\n"
        f"  - name: {COMMAND}\n"
        f"    summary: {SUMMARY}\n"
        f"    entrypoint: {entrypoint}\n"
    )


def handle_hook(argv0: str) -> bool:
    """Write the manifest when cub runs this executable as its install/upgrade hook; False
    (do nothing) on an ordinary run. The entrypoint is this executable's own file name."""
    if not os.environ.get(HOOK):
        return False
    # imported here: every eksinf run asks this first, and most are not hooks (see cli/help.py)
    from pathlib import Path

    from eksinf.core.atomic import write_file

    folder = os.environ.get(HOOK_DIR)
    if not folder:
        raise SystemExit(f"eksinf: {HOOK} is set but {HOOK_DIR} is empty")
    write_file(Path(folder) / MANIFEST, manifest(Path(argv0).name).encode())
    return True


def under_cub() -> bool:
    """Whether this run is `cub eksinf ...`: its hub is then ConfigHub through cub by default,
    as the Go original's was (hub.default_backend)."""
    return os.environ.get(RUN_ENV) == "1"
