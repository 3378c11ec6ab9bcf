"""Build eksinf's cub plugin asset for this machine: `eksinf-<os>-<arch>.tar.gz` (+ .sha256).

    python .ci/build-plugin.py OUT_DIR

PyInstaller (pinned in pyproject's `dev` extra) freezes eksinf into a self-contained folder (no
Python needed where it runs); the folder form starts faster than a one-file executable, which
unpacks itself on every run. The stack rides along as eksinf/stack/, exactly as in the wheel
(setup.py), so the plugin works in an empty folder. The built executable is then run once as
cub's install hook, so the `cub-plugin.yaml` in the archive is the one the binary itself writes (src/eksinf/publish/plugin.py).
The archive is reproducible: sorted entries, owner 0, mtime 0, gzip without a timestamp. Its
name carries the OS and architecture the way `cub plugin install` matches release assets
(cmd/cub/plugin_install.go, matchAsset). PyInstaller does not cross-compile: the publish
workflow builds one asset per runner.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
# Data eksinf reads at run time through importlib.resources or that its dependencies load lazily.
COLLECT = ("--collect-data", "eksinf", "--collect-data", "botocore", "--collect-all", "helm_python")
COLLECT += ("--collect-data", "jsonschema_specifications", "--copy-metadata", "eksinf")
COLLECT += ("--collect-data", "kubernetes_validate", "--collect-data", "celpy")  # eksinf validate
COLLECT += ("--collect-data", "parliament")  # eksinf diff: the IAM action table
# The command modules, which cli/app.py imports by name (app.MODULES), one per run.
COLLECT += ("--collect-submodules", "eksinf.cli")


def asset_name() -> str:
    machine = platform.machine().lower()
    return f"eksinf-{platform.system().lower()}-{ARCH.get(machine, machine)}.tar.gz"


def stage_stack(work: Path) -> Path:
    """The stack as the wheel carries it (setup.py's copy_stack): eksinf/stack/ with SHIPPED."""
    spec = importlib.util.spec_from_file_location("eksinf_setup", REPO / "setup.py")
    assert spec is not None and spec.loader is not None
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)  # its setup() runs only as __main__
    dest = work / "stack"
    setup.copy_stack(dest)
    return dest


def freeze(work: Path) -> Path:
    entry = work / "eksinf_main.py"
    entry.write_text("from eksinf.cli import main\n\nmain()\n")
    stack = stage_stack(work)  # the plugin embeds the stack, as the Go original's did
    subprocess.run(
        [
            sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean", "--onedir",
            "--name", "eksinf", "--log-level", "WARN", *COLLECT,
            "--add-data", f"{stack}{os.pathsep}eksinf/stack",
            "--distpath", str(work / "dist"), "--workpath", str(work / "build"),
            "--specpath", str(work), str(entry),
        ],
        check=True,
    )  # fmt: skip
    return work / "dist" / "eksinf"


def write_manifest(folder: Path) -> None:
    """Run the frozen eksinf as cub runs a plugin's install hook (cmd/cub/plugin_exec.go)."""
    env = {**os.environ, "CUB_PLUGIN_HOOK": "install", "CUB_PLUGIN_DIR": str(folder)}
    subprocess.run([str(folder / "eksinf")], env=env, cwd=folder, check=True, timeout=30)
    if not (folder / "cub-plugin.yaml").is_file():
        raise SystemExit("the frozen eksinf wrote no cub-plugin.yaml when run as cub's hook")


def archive(folder: Path, out: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in [folder, *sorted(folder.rglob("*"))]:
            info = tar.gettarinfo(str(path), arcname=str(Path("eksinf") / path.relative_to(folder)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if info.isfile():
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    out.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    out.with_name(out.name + ".sha256").write_text(f"{digest}  {out.name}\n")


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out_dir = Path(sys.argv[1]).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="eksinf-plugin-") as tmp:
        folder = freeze(Path(tmp))
        write_manifest(folder)
        archive(folder, out_dir / asset_name())
    print(out_dir / asset_name())


if __name__ == "__main__":
    main()
