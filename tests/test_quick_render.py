"""`render` and `verify` answered without the argument layer (cli/quick.py) print what the app
prints and exit with its code, on success and on failure; any other form is the app's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_help_pages import ARGUMENT_LAYER, _loaded
from test_quick_commands import APP, ENTRY, _run
from test_verify import edit_values

from eksinf.cli import quick

# quick.py alone: exit 99 when it leaves the command line to the app (it prints nothing then)
QUICK = (
    "import sys; from eksinf.cli.quick import answer; "
    "code = answer(sys.argv[1:]); sys.exit(99 if code is None else code)"
)
# the seconds a run took, which render and verify print and no two runs share
SECONDS = re.compile(rb"\b\d+\.\d\ds\b")


def _both(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, bytes, bytes]:
    """`argv` run by quick.py and by the app in new interpreters: the same exit code, stdout
    and stderr (the seconds taken aside); returns them."""
    ran = []
    for code in (QUICK, APP):
        exit_code, out, err = _run(code, argv, cwd, env)
        ran.append((exit_code, out, SECONDS.sub(b"N.NNs", err)))
    assert ran[0][0] != 99, f"{argv}: quick.py left it to the app"
    assert ran[0] == ran[1], argv
    return ran[0]


@pytest.fixture
def env(tmp_path: Path, chart_mirror: Path) -> dict[str, str]:
    """This test's own cache (warmed by the first run, as both ways then find it) and mirror."""
    return {"EKSINF_CACHE_DIR": str(tmp_path / "cache"), "EKSINF_CHART_MIRROR": str(chart_mirror)}


def test_renders_and_verifies_in_sync(
    stack_dir: Path, tmp_path: Path, chart_mirror: Path, env: dict[str, str]
) -> None:
    s = ["--stack", str(stack_dir)]
    assert _run(APP, [*s, "render"], stack_dir, env)[0] == 0  # fills the cache
    code, out, err = _both(["render"], stack_dir, env)
    assert code == 0 and out == b"" and b"rendered 31 units from 10 components" in err
    code, out, _ = _both([*s, "render", "--json"], tmp_path, env)
    assert code == 0 and b'"units": [' in out
    for argv in (
        ["render", "--json", f"--out={tmp_path / 'out'}", *s],
        ["--json", "render", "--skip-guard", "--out", "elsewhere", *s],
    ):
        assert _both(argv, tmp_path, env)[0] == 0, argv
    code, out, err = _both(["verify"], stack_dir, env)
    assert code == 0 and out == b"" and b"configs/ is in sync with its sources" in err
    for argv in (
        ["verify", "--json"],
        [*s, "verify", "--full"],
        ["verify", "-c", "karpenter", "--component", "gpu-runtime", "--json"],
        ["--json", "verify", "--chart-mirror", str(chart_mirror), *s],
        ["verify", f"--chart-mirror={tmp_path / 'no-mirror'}"],  # the cache answers
    ):
        assert _both(argv, stack_dir, env)[0] == 0, argv


def test_a_drift_is_reported_alike(stack_dir: Path, env: dict[str, str]) -> None:
    edit_values(stack_dir)
    code, out, err = _both(["verify"], stack_dir, env)
    assert code == 1 and out.startswith(b"--- configs/")
    assert b"eksinf: configs/ is out of sync with its sources: 2 changed" in err
    assert b"  hint: Run `eksinf render` and commit the result." in err
    code, out, _ = _both(["verify", "--json"], stack_dir, env)
    assert code == 1 and b'"clean": false' in out
    (stack_dir / "configs/ack-controllers/iam-crds.yaml").unlink()
    code, out, _ = _both(["verify"], stack_dir, env)
    assert code == 1 and b"more diff lines (use --full)" in out
    assert _both(["verify", "--full"], stack_dir, env)[0] == 1
    code, out, err = _both(["verify", "-c", "nope"], stack_dir, env)
    assert code == 3 and out == b"" and err.startswith(b"eksinf: unknown component 'nope'")


@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
def test_a_diff_click_would_rewrite_is_written_as_click_writes_it(
    stack_dir: Path, env: dict[str, str], encoding: str
) -> None:
    """A unit holding non-ASCII text and an ANSI escape: typer's echo strips the escape off a
    pipe and re-encodes for a stream that is not UTF-8; verify's diff gets the same bytes both
    ways."""
    unit = stack_dir / "configs/karpenter" / sorted(os.listdir(stack_dir / "configs/karpenter"))[0]
    unit.write_text(unit.read_text(encoding="utf-8") + "# caf\u00e9 \x1b[31mred\x1b[0m\n")
    code, out, _ = _both(["verify"], stack_dir, {**env, "PYTHONIOENCODING": encoding})
    assert code == 1 and b"red" in out and b"\x1b" not in out


def test_a_broken_stack_and_a_refused_out_are_reported_alike(
    stack_dir: Path, env: dict[str, str]
) -> None:
    code, out, err = _both(["render", "--out", str(stack_dir / "render")], stack_dir, env)
    assert code == 2 and out == b"" and err.startswith(b"eksinf: refusing to replace")
    code, out, err = _both(["render", "--json", "--out", "render"], stack_dir, env)
    assert code == 2 and b'"error": "refusing to replace' in out and b"  hint: " in err
    (stack_dir / "components.yaml").write_text("components: [\n")
    for argv in (["render"], ["render", "--json"], ["verify"], ["verify", "--json"]):
        code, out, err = _both(argv, stack_dir, env)
        assert code == 3 and err.startswith(b"eksinf: ") and b"components.yaml" in err, argv
        assert (b'"error": ' in out) == ("--json" in argv), argv


def test_a_closed_stdout_pipe_ends_the_run_alike(stack_dir: Path, env: dict[str, str]) -> None:
    """verify's diff written to a pipe nobody reads: exit 1 and nothing said, as typer ends it."""
    edit_values(stack_dir)

    def closed(code: str) -> tuple[int, bytes]:
        read, write = os.pipe()
        os.close(read)
        done = subprocess.run(
            [sys.executable, "-c", code, "verify"],
            stdout=write,
            stderr=subprocess.PIPE,
            cwd=stack_dir,
            env={**os.environ, **env},
            check=False,
        )
        os.close(write)
        return done.returncode, done.stderr

    assert closed(QUICK) == closed(APP) == (1, b"")


def test_render_and_verify_load_no_argument_layer(
    stack_dir: Path, env: dict[str, str], chart_mirror: Path
) -> None:
    s = ["--stack", str(stack_dir)]
    for argv in ([*s, "render"], [*s, "verify", "--json"]):
        _, modules = _loaded(argv, env)
        assert "eksinf.build.render" in modules  # it ran
        # (PyYAML is the stack's reader here, not the argument layer's)
        assert not modules & (ARGUMENT_LAYER - {"yaml"} | {"eksinf.cli.common"}), argv


@pytest.mark.parametrize(
    "argv",
    [
        ["render", "--component", "karpenter"],  # verify's option, not render's
        ["render", "--out"],
        ["render", "--out", ""],
        ["render", "--out", "-x"],
        ["render", "--json", "--json"],
        ["render", "--json=1"],
        ["render", "extra"],
        ["render", "--"],
        ["verify", "-ckarpenter"],
        ["verify", "-c=karpenter"],
        ["verify", "--full=yes"],
        ["verify", "--hub", "local"],
        ["verify", "-h"],
    ],
)
def test_other_forms_are_left_to_the_app(argv: list[str]) -> None:
    assert quick.parse(argv) is None


def test_a_path_the_app_refuses_is_left_to_it(
    stack_dir: Path, env: dict[str, str], capsys: pytest.CaptureFixture
) -> None:
    """click refuses a file as --chart-mirror (a folder): the app says so, in click's words."""
    argv = ["--stack", str(stack_dir), "render", "--chart-mirror", str(stack_dir / "versions.env")]
    assert quick.answer(argv) is None
    assert capsys.readouterr() == ("", "")
    entry = _run(ENTRY, argv, stack_dir, env)
    assert entry == _run(APP, argv, stack_dir, env) and entry[0] == 2


def test_only_the_process_entry_stops_the_collector(stack_dir: Path, env: dict[str, str]) -> None:
    """`main` owns its process and runs a plain verify without the cyclic collector; a caller
    of `answer` in its own process keeps its collector on afterwards."""
    watch = "import atexit, gc; atexit.register(lambda: print('collector on:', gc.isenabled())); "
    entry = _run(watch + ENTRY, ["verify"], stack_dir, env)
    assert entry[0] == 0 and entry[1].strip() == b"collector on: False", entry
    in_process = _run(watch + QUICK, ["verify"], stack_dir, env)
    assert in_process[0] == 0 and in_process[1].strip() == b"collector on: True", in_process
