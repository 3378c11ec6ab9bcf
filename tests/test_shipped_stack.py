"""The stack ships inside eksinf: an empty folder is enough.

In-process: a package folder built by setup.py's own `copy_stack` stands in for the installed
package's `eksinf/stack/`. End to end: a wheel built from this checkout (`pip wheel
--no-build-isolation`, offline) installed into a fresh venv, run in an empty folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import REPO, STACK_DIRS, STACK_FILES

from eksinf.errors import USAGE
from eksinf.model import shipped


def setup_module_of_repo():
    spec = importlib.util.spec_from_file_location("eksinf_setup", REPO / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # setup() itself runs only as __main__
    return module


SETUP = setup_module_of_repo()


def test_one_list_of_stack_files():
    """The wheel, the run time and the tests' stack copies agree on what a stack is."""
    assert SETUP.STACK_FILES == shipped.STACK_FILES == STACK_FILES
    assert SETUP.STACK_DIRS == shipped.STACK_DIRS == STACK_DIRS


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed package's eksinf/stack/ (as setup.py builds it), and a private state folder."""
    folder = tmp_path / "site" / "eksinf" / "stack"
    SETUP.copy_stack(folder)
    monkeypatch.setattr(shipped, "packaged", lambda: folder)
    monkeypatch.setenv(shipped.STATE_ENV, str(tmp_path / "state"))
    return folder


def tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_an_empty_folder_uses_the_shipped_stack_and_writes_only_state(package, tmp_path, eksinf):
    empty = tmp_path / "empty"
    empty.mkdir()
    before = tree(package)
    result = eksinf("components", "--json", cwd=empty)
    assert result.code == 0, result.err
    names = [c["name"] for c in json.loads(result.out)["components"]]
    assert "aws-network" in names and "inference-workloads" in names
    up = eksinf("sandbox", "up", "--hub", "local", cwd=empty)
    assert up.code == 0, up.err
    root = tmp_path / "state" / "stack"
    assert (root / ".eksinf" / "hub.db").is_file()  # the hub lives in the state folder
    assert (root / "configs" / "provenance.json").read_bytes() == (
        REPO / "configs" / "provenance.json"
    ).read_bytes()
    assert list(empty.iterdir()) == []
    assert tree(package) == before  # the package is never written


def test_render_refuses_the_shipped_stack(package, tmp_path, eksinf):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = eksinf("render", cwd=empty)
    assert result.code == USAGE
    assert "this is the stack shipped with eksinf" in result.err
    assert "--stack DIR render" in result.err  # the hint: a copy of one's own
    lock = eksinf("charts", "lock", cwd=empty)
    assert lock.code == USAGE and "charts.lock" in lock.err


def test_stack_option_then_working_folder_win_over_the_shipped_one(package, tmp_path, eksinf):
    own = tmp_path / "own"
    shutil.copytree(package, own, ignore=shutil.ignore_patterns("SHIPPED"))
    text = (own / "components.yaml").read_text()
    (own / "components.yaml").write_text(
        text.replace("name: hyperpod-inference", "name: hyperpod-mine")
    )
    (own / "render" / "hyperpod-inference").rename(own / "render" / "hyperpod-mine")
    (own / "configs" / "hyperpod-inference").rename(own / "configs" / "hyperpod-mine")

    def names(*args: str, cwd: Path) -> list[str]:
        result = eksinf(*args, "components", "--json", cwd=cwd)
        assert result.code == 0, result.err
        return [c["name"] for c in json.loads(result.out)["components"]]

    empty = tmp_path / "empty"
    empty.mkdir()
    assert "hyperpod-inference" in names(cwd=empty)  # the shipped one
    assert "hyperpod-mine" in names(cwd=own)  # the working folder's
    assert "hyperpod-mine" in names("--stack", str(own), cwd=empty)  # --stack


def test_an_upgrade_replaces_the_stack_files_and_keeps_the_state(package, tmp_path, eksinf):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert eksinf("components", cwd=empty).code == 0
    root = tmp_path / "state" / "stack"
    (root / ".eksinf" / "hub.db").write_bytes(b"kept")
    (root / "versions.env").write_text("stale\n")  # the old version's file
    (package / "SHIPPED").write_text("another-build\n")
    assert eksinf("components", cwd=empty).code == 0
    assert (root / "versions.env").read_bytes() == (package / "versions.env").read_bytes()
    assert (root / ".eksinf" / "hub.db").read_bytes() == b"kept"
    assert (root / shipped.MARKER).read_text() == "another-build\n"


def test_a_copy_of_the_shipped_stack_is_the_user_s_own(package, tmp_path, eksinf):
    """The refusal's hint works: `cp -r` of the copy is a stack render may write."""
    empty = tmp_path / "empty"
    empty.mkdir()
    assert eksinf("components", cwd=empty).code == 0
    mine = tmp_path / "mine"
    shutil.copytree(tmp_path / "state" / "stack", mine)
    from eksinf.model.stack import load_stack

    assert load_stack(tmp_path / "state" / "stack").shipped
    assert not load_stack(mine).shipped


# ---- the wheel, installed ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`eksinf` from a wheel of this checkout (conftest's `wheel`), in a fresh venv. No network
    here: it is installed without its dependencies, which the venv reads from this test's own
    environment (a .pth line): the package under test is the wheel's, not the checkout's."""
    work = tmp_path_factory.mktemp("venv")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         "--target", site, str(wheel)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr
    (Path(site) / "eksinf-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (venv / "bin" / "eksinf").write_text(
        f"#!{python}\nfrom eksinf.cli import main\n\nmain()\n"
    )  # the console script pip writes, for a --target install
    (venv / "bin" / "eksinf").chmod(0o755)
    return venv


def test_the_installed_wheel_carries_bytecode_for_every_module(installed):
    """pip compiles a wheel's modules as it installs them (also with PYTHONDONTWRITEBYTECODE
    set, which stops Python from writing them on import: every run would compile eksinf)."""
    site = next((installed / "lib").glob("python*/site-packages"))
    modules = sorted((site / "eksinf").rglob("*.py"))
    assert len(modules) > 100
    missing = [
        str(m.relative_to(site))
        for m in modules
        if not Path(importlib.util.cache_from_source(str(m))).is_file()
    ]
    assert not missing


def test_the_installed_wheel_works_in_an_empty_folder(installed, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    env.pop(shipped.STATE_ENV, None)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(installed / "bin" / "eksinf"), *args],
            cwd=empty, env=env, capture_output=True, text=True,
        )  # fmt: skip

    where = subprocess.run(
        [str(installed / "bin" / "python"), "-c", "import eksinf; print(eksinf.__file__)"],
        capture_output=True, text=True, env=env,
    ).stdout  # fmt: skip
    assert where.startswith(str(installed)), where  # the wheel's eksinf, not the checkout's
    components = run("components", "--json")
    assert components.returncode == 0, components.stderr
    from eksinf.model.stack import load_stack

    assert [c["name"] for c in json.loads(components.stdout)["components"]] == [
        c.name for c in load_stack(REPO).components
    ]
    up = run("sandbox", "up")
    assert up.returncode == 0, up.stderr
    assert "release(s) published" in up.stdout
    assert list(empty.iterdir()) == []
    state = tmp_path / "state" / "eksinf" / "stack"
    assert (state / ".eksinf" / "hub.db").is_file()
    render = run("render")
    assert render.returncode == USAGE and "shipped with eksinf" in render.stderr


def test_a_folder_eksinf_did_not_make_is_never_overwritten(package, tmp_path, eksinf):
    """The copy's place already holds a stack of someone else's (no marker): refused, untouched."""
    root = tmp_path / "state" / "stack"
    (root / "configs").mkdir(parents=True)
    (root / "configs" / "mine.yaml").write_text("kind: Mine\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    result = eksinf("components", cwd=empty)
    assert result.code == 3, result.err
    assert "holds configs that eksinf did not put there" in result.err
    assert shipped.STATE_ENV in result.err  # the hint: another state folder
    assert (root / "configs" / "mine.yaml").read_text() == "kind: Mine\n"
    assert not (root / "components.yaml").exists()
