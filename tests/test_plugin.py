"""eksinf as a cub plugin, installed and run the way cub's source does it.

cub (github.com/confighub/sdk at 32fae3453f9b): `cmd/cub/plugin_install.go` picks the release
asset whose name carries the OS and architecture (matchAsset), prefers a `.tar.gz`, unpacks it
stripping one wrapper folder (strippedDir) and needs a `cub-plugin.yaml` in it; a bare binary is
run as a hook (CUB_PLUGIN_HOOK, CUB_PLUGIN_DIR) to write that manifest. `core/plugin/manifest.go`
defines the manifest fields; `cmd/cub/plugin_exec.go` execs the entrypoint with the user's
arguments and CUB_PLUGIN=1, CUB_CONTEXT, CUB_SERVER in the environment.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from conftest import REPO, STACK_DIRS, STACK_FILES

from eksinf import __version__
from eksinf.model.stack import load_stack
from eksinf.publish import plugin

# The manifest fields cub reads (core/plugin/manifest.go: Manifest and Command yaml tags).
MANIFEST_KEYS = {"name", "version", "entrypoint", "commands"}
COMMAND_KEYS = {"name", "aliases", "summary", "entrypoint", "args"}
# matchAsset's aliases (cmd/cub/plugin_install.go, platformAliases).
OS_ALIASES = {"linux": ("linux",), "darwin": ("darwin", "macos")}
ARCH_ALIASES = {"amd64": ("amd64", "x86_64", "x86-64"), "arm64": ("arm64", "aarch64")}


def test_the_hook_writes_a_manifest_cub_reads_and_nothing_else_runs(tmp_path):
    """The console script, run as cub runs a bare-binary plugin's install hook."""
    env = {**os.environ, "CUB_PLUGIN_HOOK": "install", "CUB_PLUGIN_DIR": str(tmp_path)}
    script = Path(sys.executable).parent / "eksinf"
    done = subprocess.run(
        [str(script), "render"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # the hook answered instead of rendering
    manifest = yaml.safe_load((tmp_path / plugin.MANIFEST).read_text())
    assert set(manifest) <= MANIFEST_KEYS and set(manifest["commands"][0]) <= COMMAND_KEYS
    assert manifest["version"] == __version__
    assert manifest["commands"] == [
        {"name": "eksinf", "summary": plugin.SUMMARY, "entrypoint": "eksinf"}
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == [plugin.MANIFEST]


def test_an_ordinary_run_is_not_a_hook(tmp_path, monkeypatch):
    monkeypatch.delenv(plugin.HOOK, raising=False)
    monkeypatch.setenv(plugin.HOOK_DIR, str(tmp_path))
    assert plugin.handle_hook("/usr/bin/eksinf") is False
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv(plugin.HOOK, "upgrade")
    monkeypatch.delenv(plugin.HOOK_DIR)
    with pytest.raises(SystemExit, match="CUB_PLUGIN_DIR is empty"):
        plugin.handle_hook("eksinf")


# ---- the built plugin ---------------------------------------------------------------------------

BUILD_INPUTS = ("pyproject.toml", "setup.py", ".ci/build-plugin.py", *STACK_FILES)


def build_key() -> str:
    import PyInstaller

    digest = hashlib.sha256(PyInstaller.__version__.encode())
    paths = [REPO / p for p in BUILD_INPUTS]
    for folder in ("src/eksinf", *STACK_DIRS):  # the plugin embeds the stack too
        paths += sorted(p for p in (REPO / folder).rglob("*") if p.is_file())
    for path in paths:
        if "__pycache__" not in path.parts:
            digest.update(path.relative_to(REPO).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()[:16]


@pytest.fixture(scope="module")
def asset() -> Path:
    """The plugin asset of this machine, built by .ci/build-plugin.py. Built once per source
    state and kept in the repo's .eksinf/plugin-build/ (a freeze takes minutes)."""
    cache = REPO / ".eksinf" / "plugin-build"
    out = cache / build_key()
    built = sorted(out.glob("eksinf-*.tar.gz"))
    if not built:
        for stale in cache.glob("*"):  # builds of older sources (this cache is the test's own)
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale)
        subprocess.run(
            [sys.executable, str(REPO / ".ci" / "build-plugin.py"), str(out)],
            check=True,
            capture_output=True,
        )
        built = sorted(out.glob("eksinf-*.tar.gz"))
    (path,) = built
    return path


def install_like_cub(asset: Path, plugins: Path) -> tuple[Path, list[str]]:
    """Unpack the asset as `cub plugin install` does; the entrypoint and the command names."""
    staged = plugins / ".plugin-extract"
    with tarfile.open(asset) as tar:
        tar.extractall(staged, filter="tar")
    entries = list(staged.iterdir())
    if len(entries) == 1 and entries[0].is_dir():  # strippedDir
        staged = entries[0]
    slot = plugins / "eksinf"
    staged.rename(slot)
    manifest = yaml.safe_load((slot / plugin.MANIFEST).read_text())
    (command,) = manifest["commands"]
    entrypoint = slot / command["entrypoint"]
    assert entrypoint.is_file() and os.access(entrypoint, os.X_OK)
    return entrypoint, [command["name"], *command.get("aliases", [])]


def test_the_asset_name_is_matched_for_this_platform(asset):
    system, machine = platform.system().lower(), platform.machine().lower()
    arch = "amd64" if machine in ARCH_ALIASES["amd64"] else "arm64"
    name = asset.name.lower()
    assert any(alias in name for alias in OS_ALIASES[system])
    assert any(alias in name for alias in ARCH_ALIASES[arch])
    assert name.endswith(".tar.gz")  # preferred by matchAsset; no hook runs for an archive
    assert (asset.parent / (asset.name + ".sha256")).read_text().split()[0] == hashlib.sha256(
        asset.read_bytes()
    ).hexdigest()


def test_the_installed_plugin_runs_version_components_and_sandbox_up(asset, tmp_path):
    """`cub eksinf ...` from a clean copy of the stack, with no Python or venv on PATH."""
    entrypoint, commands = install_like_cub(asset, tmp_path / "plugins")
    assert commands == ["eksinf"]
    stack = tmp_path / "stack"
    stack.mkdir()
    for name in STACK_FILES:
        shutil.copy2(REPO / name, stack / name)
    for name in STACK_DIRS:
        shutil.copytree(REPO / name, stack / name)
    # Under cub the default hub is ConfigHub through cub; no cub binary here: the embedded hub.
    (stack / ".eksinf").mkdir()
    (stack / ".eksinf" / "config.yaml").write_text("hub: local\n")
    env = {  # what plugin_exec.go's pluginEnv adds, on a bare environment
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "CUB_PLUGIN": "1",
        "CUB_CONTEXT": "default",
        "CUB_SERVER": "https://hub.confighub.test",
    }

    def cub_eksinf(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(entrypoint), *args], env=env, cwd=stack, capture_output=True, text=True
        )

    version = cub_eksinf("version")
    assert version.returncode == 0 and version.stdout.startswith(f"eksinf {__version__}")
    components = cub_eksinf("components", "--json")
    assert components.returncode == 0, components.stderr
    assert "karpenter" in components.stdout
    up = cub_eksinf("sandbox", "up")
    assert up.returncode == 0, up.stderr
    assert "release(s) published" in up.stdout
    again = cub_eksinf("sandbox", "up")
    assert again.returncode == 0 and "nothing changed" in again.stdout


def test_the_installed_plugin_carries_its_stack(asset, tmp_path):
    """`cub eksinf components` and `sandbox up` in an empty folder: the stack embedded in the
    plugin is used, copied into the user's state folder; the folder stays empty."""
    entrypoint, _ = install_like_cub(asset, tmp_path / "plugins")
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "CUB_PLUGIN": "1",
        "CUB_CONTEXT": "default",
        "CUB_SERVER": "https://hub.confighub.test",
    }

    def cub_eksinf(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(entrypoint), *args], env=env, cwd=empty, capture_output=True, text=True
        )

    components = cub_eksinf("components", "--json")
    assert components.returncode == 0, components.stderr
    shipped = json.loads(components.stdout)["components"]
    assert {c["name"] for c in shipped} == {c.name for c in load_stack(REPO).components}
    up = cub_eksinf("sandbox", "up", "--hub", "local")  # no cub binary here: the embedded hub
    assert up.returncode == 0, up.stderr
    assert "release(s) published" in up.stdout
    assert list(empty.iterdir()) == []
    state = tmp_path / "home" / ".local" / "state" / "eksinf" / "stack"
    assert (state / "components.yaml").is_file() and (state / ".eksinf" / "hub.db").is_file()
