"""`version` and `components` answered without the argument layer (cli/quick.py) print exactly
what the app prints, with its exit code, for every command line; any other line is the app's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from eksinf.cli import quick

# The console entry point (quick first), and the app alone (what `main` falls back to).
ENTRY = "import sys; sys.argv = ['eksinf', *sys.argv[1:]]; from eksinf.cli import main; main()"
APP = "import sys; from eksinf.cli import run; sys.exit(run(sys.argv[1:]))"


def _run(code: str, argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, bytes, bytes]:
    """A new interpreter's exit code, stdout and stderr (os.environ as the test set it)."""
    done = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        cwd=cwd,
        env={**os.environ, **env},
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def _argvs(stack: str, missing: str) -> list[list[str]]:
    s = ["--stack", stack]
    return [
        ["version"],
        ["version", "--json"],
        ["--json", "version"],
        ["--version"],
        ["--version", "--json"],
        [*s, "version"],
        ["version", "--stack", stack],
        ["version", "--bogus"],
        ["version", "extra"],
        ["version", "--json=1"],
        ["version", "--json", "--json"],
        ["components"],  # in the stack's folder
        [*s, "components"],
        [*s, "components", "--json"],
        ["--json", *s, "components"],
        ["components", *s, "--plane", "mgmt"],
        [f"--stack={stack}", "components", "--plane=workload", "--json"],
        [*s, "components", "--plane", "hub", "--json"],
        [*s, "components", "--plane", "nope"],
        [*s, "components", "--plane", "nope", "--json"],
        [*s, "components", "--plane", ""],
        [*s, "components", "--plane"],
        [*s, "components", "--plane", "--json"],
        [*s, "components", "--plane", "hub", "--plane", "mgmt"],
        [*s, "components", "--profile", "dev"],  # the original's flag: a note, then the listing
        [*s, "components", "--hub", "local"],
        [*s, "components", "extra"],
        ["--stack", missing, "components"],
        ["--stack", missing, "components", "--json"],
        ["--stack", "--json", "components"],
        ["--stack"],
    ]


# Command lines quick.py answers itself, once a listing is kept (the rest it may hand on).
ANSWERED = {
    "version",
    "version --json",
    "--json version",
    "--version",
    "--stack S version",
    "components",
    "--stack S components",
    "--stack S components --json",
    "--json --stack S components",
    "components --stack S --plane mgmt",
    "--stack=S components --plane=workload --json",
}


@pytest.mark.parametrize("columns", ["", "60"])
def test_quick_answers_are_the_apps_bytes(
    stack_dir: Path,
    tmp_path: Path,
    columns: str,
    capsysbinary: pytest.CaptureFixture[bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each command line run through the entry point and through the app alone: the same
    stdout, stderr and exit code. The first `components` finds no listing kept and is the
    app's (which keeps it); the later ones are quick.py's own, as the in-process runs show."""
    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", columns)  # "": a pipe, whole lines
    monkeypatch.chdir(stack_dir)
    argvs = {
        " ".join(argv).replace(str(stack_dir), "S"): argv
        for argv in _argvs(str(stack_dir), str(tmp_path / "missing"))
    }
    apps = {}
    for label, argv in argvs.items():
        entry = _run(ENTRY, argv, stack_dir, {})
        apps[label] = app = _run(APP, argv, stack_dir, {})
        assert entry == app, label
    for label in ANSWERED:
        capsysbinary.readouterr()
        assert quick.answer(argvs[label]) == 0, label  # answered here, not handed to the app
        out, err = capsysbinary.readouterr()
        assert (0, out, err) == apps[label], label


def test_a_broken_stack_is_reported_by_the_app(stack_dir: Path) -> None:
    (stack_dir / "components.yaml").write_text("components: [\n")
    for argv in (["components"], ["components", "--json"]):
        entry = _run(ENTRY, argv, stack_dir, {})
        assert entry == _run(APP, argv, stack_dir, {})
        assert entry[0] != 0 and entry[1 if "--json" in argv else 2]


@pytest.mark.parametrize(
    "argv",
    [
        ["version", "--bogus"],
        ["components", "--plane"],
        ["components", "--plane", "-x"],
        ["components", "--hub", "local"],
        ["components", "--json=1"],
        ["--stack"],
        ["guard"],
        ["version", "-h"],
    ],
)
def test_other_forms_are_left_to_the_app(argv: list[str]) -> None:
    assert quick.parse(argv) is None


def test_a_failure_prints_nothing_and_is_left_to_the_app(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert quick.answer(["--stack", str(tmp_path), "components", "--json"]) is None
    assert capsys.readouterr() == ("", "")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("argv", [["version"], ["version", "--json"], ["components", "--json"]])
def test_a_refused_stdout_is_reported_as_the_app_reports_it(
    argv: list[str], stack_dir: Path
) -> None:
    """stdout on a full disk: the app's one line and exit 4 (no traceback), under --json too."""
    _run(ENTRY, argv, stack_dir, {})  # the listing kept: quick.py answers the runs below

    def full(code: str) -> tuple[int, bytes]:
        with open("/dev/full", "wb") as out:
            done = subprocess.run(
                [sys.executable, "-c", code, *argv],
                stdout=out,
                stderr=subprocess.PIPE,
                cwd=stack_dir,
                check=False,
            )
        return done.returncode, done.stderr

    entry = full(ENTRY)
    assert entry == full(APP) and entry[0] == 4 and b"the disk is full" in entry[1], entry
