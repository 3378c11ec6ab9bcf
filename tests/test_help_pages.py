"""`eksinf --help` is answered from recorded pages without the argument layer, and what a command
imports is what it needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eksinf.cli import help as pages

# Modules a command must not load unless it needs them: the argument layer, and the heavy
# libraries of other commands (AWS, OCI over HTTP, CEL, Kubernetes schemas).
ARGUMENT_LAYER = {"typer", "pydantic", "rich", "yaml", "eksinf.cli.app"}
OTHER_COMMANDS = {"requests", "boto3", "botocore", "celpy", "kubernetes_validate", "sqlite3"}


def _loaded(args: list[str], env: dict[str, str] | None = None) -> tuple[str, set[str]]:
    """Run `eksinf ARGS` through the console entry point in a new interpreter: its stdout and
    the top-level modules (plus eksinf's own) it had loaded when it exited."""
    probe = (
        "import atexit, sys\n"
        "def report():\n"
        "    names = {m.split('.')[0] for m in sys.modules} | {m for m in sys.modules if m.startswith('eksinf.')}\n"
        "    sys.stderr.write('MODULES ' + ' '.join(sorted(names)))\n"
        "atexit.register(report)\n"
        "sys.argv = ['eksinf', *sys.argv[1:]]\n"
        "from eksinf.cli import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )
    modules = done.stderr.rsplit("MODULES ", 1)[-1].split()
    return done.stdout, set(modules)


def test_recorded_pages_are_what_the_app_prints() -> None:
    recorded = json.loads(Path(pages.PAGES_FILE).read_text(encoding="utf-8"))
    live = pages.record()
    assert sorted(recorded) == sorted(live), "run `python -m eksinf.cli.help` to re-record"
    for path, text in live.items():
        assert recorded[path] == text, f"`eksinf {path} --help` changed: re-record the pages"
    assert {"", "render", "verify", "hub", "hub diff", "enroll cluster"} <= set(live)


def test_help_loads_no_argument_layer() -> None:
    out, modules = _loaded(["--help"], {"COLUMNS": "120"})
    assert out == pages.record()[""]
    assert not modules & (ARGUMENT_LAYER | OTHER_COMMANDS), modules & ARGUMENT_LAYER


def test_subcommand_help_is_served_too() -> None:
    out, modules = _loaded(["enroll", "cluster", "--help"])
    assert out.startswith("Usage: eksinf enroll cluster")
    assert "typer" not in modules


@pytest.mark.parametrize(
    ("argv", "columns"),
    [
        (["--stack", "x", "--help"], "120"),  # an option before --help: the app parses it
        (["render", "--out", "x", "--help"], "120"),
        (["no-such-command", "--help"], "120"),  # the app reports the usage error
        (["render"], "120"),
        (["render", "--help"], "60"),  # a narrow terminal: click wraps narrower
    ],
)
def test_only_exact_pages_are_served(
    argv: list[str], columns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    assert pages.recorded_page(argv) is None


@pytest.mark.parametrize("argv", [["version"], ["version", "--json"], ["components"]])
def test_light_commands_load_no_argument_layer(argv: list[str], stack_dir: Path) -> None:
    """version and components are answered by cli/quick.py (tests/test_quick_commands.py
    checks their bytes against the app's): once the engine's version and the stack's listing
    are in the cache (the first run puts them there), neither loads the argument layer, PyYAML,
    the stack's model or the engine."""
    first, _ = _loaded(["--stack", str(stack_dir), *argv])
    out, modules = _loaded(["--stack", str(stack_dir), *argv])
    assert out == first and "eksinf.cli.quick" in modules
    assert not modules & (ARGUMENT_LAYER | OTHER_COMMANDS | {"eksinf.cli.common"})
    assert not modules & {"eksinf.model.stack", "eksinf.build.helm", "helm_python"}


def test_a_narrow_terminal_gets_the_app(tmp_path: Path) -> None:
    out, modules = _loaded(["render", "--help"], {"COLUMNS": "60"})
    assert "typer" in modules and out.startswith("Usage: eksinf render")


def test_verify_loads_only_what_it_needs(stack_dir: Path, chart_mirror: Path) -> None:
    """verify renders and compares: no AWS, registry, CEL or schema libraries, and no pydantic
    (typer is pinned to a release whose argument coercion does not build pydantic adapters)."""
    _, modules = _loaded(
        ["--stack", str(stack_dir), "verify"], {"EKSINF_CHART_MIRROR": str(chart_mirror)}
    )
    assert "eksinf.build.render" in modules  # it ran
    assert not modules & (OTHER_COMMANDS | {"rich", "pydantic"}), modules & OTHER_COMMANDS


def test_a_render_from_the_cache_loads_no_chart_code(stack_dir: Path, chart_mirror: Path) -> None:
    """A render served whole from the cache needs neither the chart, manifest and split code
    of a render that misses it, nor verify's drift gate."""
    env = {"EKSINF_CHART_MIRROR": str(chart_mirror)}
    _loaded(["--stack", str(stack_dir), "render"], env)  # fills the cache
    _, modules = _loaded(["--stack", str(stack_dir), "render"], env)
    chart_code = {
        "eksinf.build.charts",
        "eksinf.build.chartsplit",
        "eksinf.build.manifests",
        "eksinf.build.manifestsplit",
    }
    assert "eksinf.build.render" in modules  # it ran
    assert not modules & (chart_code | {"eksinf.build.verify"})


def test_a_render_without_the_cache_loads_only_what_it_uses(
    stack_dir: Path, chart_mirror: Path
) -> None:
    """A plain render answered without the argument layer opens the stack but builds no
    StackContext, so it does not load the module that defines it."""
    env = {"EKSINF_CHART_MIRROR": str(chart_mirror), "EKSINF_NO_CACHE": "1"}
    _, modules = _loaded(["--stack", str(stack_dir), "render"], env)
    assert {"eksinf.build.render", "eksinf.flows.run"} <= modules  # it ran
    assert "eksinf.flows.context" not in modules


def test_bundle_to_a_folder_loads_no_registry_client(stack_dir: Path, tmp_path: Path) -> None:
    _, modules = _loaded(["--stack", str(stack_dir), "bundle", "--out", str(tmp_path / "out")])
    assert "eksinf.publish.bundle" in modules  # it ran
    assert not modules & {"requests", "eksinf.publish.registry"}


def _full_app(args: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    """`args` parsed by the app holding every command (what `run` narrows away)."""
    from eksinf.cli.app import whole_app

    try:
        code = whole_app()(args=args, prog_name="eksinf", standalone_mode=False)
    except SystemExit as exc:
        code = exc.code
    except Exception as exc:  # a click usage error, as run() would show it
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        code = getattr(exc, "exit_code", 1)
    out = capsys.readouterr()
    return (code if isinstance(code, int) else 0), out.out, out.err


def test_the_narrowed_app_parses_and_helps_as_the_whole_one(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eksinf.cli import run
    from eksinf.cli.app import app_for, whole_app

    app = whole_app()

    monkeypatch.setenv("COLUMNS", "80")
    for path in ["render", "hub diff", "enroll cluster", "sandbox up", "version"]:
        args = [*path.split(), "--help"]
        assert app_for(args) is not app
        code, out, _ = _full_app(args, capsys)
        assert run(args) == code == 0
        assert capsys.readouterr().out == out
    usage_error = ["render", "--no-such-option"]
    _, _, err = _full_app(usage_error, capsys)
    assert run(usage_error) == 2
    assert "No such option: --no-such-option" in err
    assert "No such option: --no-such-option" in capsys.readouterr().err
    # no command, or an unknown one: the whole app answers, naming every command
    assert app_for(["--stack", "x"]) is app and app_for(["no-such-command"]) is app
    assert app_for(["--stack", "render", "verify"]).registered_commands[0].name == "verify"


def test_the_module_table_is_what_the_modules_register() -> None:
    """app.MODULES names, in help order, the top-level commands each module registers: a run
    imports only its command's module, so a command missing from the table would be unknown."""
    import importlib

    import typer

    from eksinf.cli import app as cli_app

    registered = {}
    for module in cli_app.MODULES:
        probe = typer.Typer()
        importlib.import_module(f"eksinf.cli.{module}").register(probe)
        names = [c.name for c in probe.registered_commands] + [
            g.name for g in probe.registered_groups
        ]
        registered[module] = set(names)
    assert registered == {m: set(names) for m, names in cli_app.MODULES.items()}, (
        "add the command to eksinf.cli.app.MODULES"
    )
    listed = list(typer.main.get_command(cli_app.whole_app()).commands)
    assert sorted(listed) == sorted(n for names in cli_app.MODULES.values() for n in names)


def test_a_command_imports_only_its_own_module(stack_dir: Path) -> None:
    _, modules = _loaded(["--stack", str(stack_dir), "charts", "list"])
    assert "eksinf.cli.build" in modules
    assert not modules & {"eksinf.cli.aws", "eksinf.cli.hub", "eksinf.cli.bundle"}, modules
