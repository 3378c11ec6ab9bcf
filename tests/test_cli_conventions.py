"""The command line's conventions: -h, --version, and the global options (--stack, --json, --hub)
on either side of the command; --hub honoured by every command that opens the hub."""

from __future__ import annotations

import json
import re

import pytest

from eksinf.cli.argv import global_options_anywhere
from eksinf.cli.help import recorded_page


def test_dash_h_is_help_for_the_root_and_every_command(eksinf, stack_dir):
    for args in (["-h"], ["components", "-h"], ["hub", "spaces", "-h"]):
        short, long = eksinf(*args, cwd=stack_dir), eksinf(*args[:-1], "--help", cwd=stack_dir)
        assert short.code == 0 and short.out.startswith("Usage: eksinf"), args
        assert short.out == long.out
    # the fast path answers -h from the recorded pages too, with the same page
    assert recorded_page(["lint", "-h"]) == recorded_page(["lint", "--help"]) is not None


def test_version_option_is_the_version_command(eksinf, stack_dir):
    option, command = eksinf("--version", cwd=stack_dir), eksinf("version", cwd=stack_dir)
    assert option.code == 0 and option.out == command.out and option.out.startswith("eksinf ")


def test_stack_after_the_command(eksinf, stack_dir, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    after = eksinf("lint", "--stack", str(stack_dir), cwd=elsewhere)
    assert after.code == 0, after.err
    assert "lint: clean" in after.err
    assert eksinf(f"--stack={stack_dir}", "lint", cwd=elsewhere).code == 0
    assert eksinf("lint", cwd=elsewhere).code != 0  # no stack there: the option did the work


def test_json_and_hub_before_the_command(eksinf, stack_dir):
    before = eksinf("--json", "components", cwd=stack_dir)
    assert before.code == 0, before.err
    assert json.loads(before.out) == json.loads(eksinf("components", "--json", cwd=stack_dir).out)
    bogus = eksinf("--hub", "nowhere", "hub", "spaces", cwd=stack_dir)
    assert bogus.code == 2 and "unknown hub backend 'nowhere'" in bogus.err


@pytest.mark.parametrize("command", [("target", "list"), ("target", "remove", "x")])
def test_hub_is_honoured_by_commands_that_open_the_hub_in_a_flow(eksinf, stack_dir, command):
    """An unknown backend is refused where the hub opens: proof the option reached open_hub."""
    result = eksinf(*command, "--hub", "nowhere", cwd=stack_dir)
    assert result.code == 2, (result.out, result.err)
    assert "unknown hub backend 'nowhere'" in result.err


@pytest.mark.parametrize("command", [("teardown",), ("enroll", "remove", "--name", "x")])
def test_hub_is_accepted_by_commands_whose_plan_opens_no_hub(eksinf, stack_dir, command):
    plain = eksinf(*command, cwd=stack_dir)
    chosen = eksinf(*command, "--hub", "local", cwd=stack_dir)
    assert (chosen.code, chosen.out) == (plain.code, plain.out)


@pytest.mark.parametrize(
    ("given", "parsed"),
    [
        (["lint", "--stack", "S"], ["--stack", "S", "lint"]),
        (["--json", "hub", "spaces", "--space", "x"], ["hub", "spaces", "--space", "x", "--json"]),
        (["--hub=cub", "hub", "spaces"], ["hub", "spaces", "--hub=cub"]),
        (["--version"], ["version"]),
        (["push", "--version", "1.0"], ["push", "--version", "1.0"]),  # push's own option
        (["--json", "fn", "x", "--", "--stack", "v"], ["fn", "x", "--json", "--", "--stack", "v"]),
    ],
)
def test_global_options_are_moved_where_they_parse(given, parsed):
    assert global_options_anywhere(given) == parsed


def test_fit_widths_shortens_the_widest_column_first():
    from eksinf.cli.output import fit_widths

    assert fit_widths([10, 50, 20], [4, 4, 4], None) == [10, 50, 20]  # a pipe: whole lines
    assert fit_widths([10, 50, 20], [4, 4, 4], 100) == [10, 50, 20]
    assert fit_widths([10, 50, 20], [4, 4, 4], 60) == [10, 26, 20]
    assert sum(fit_widths([30, 30, 30], [4, 4, 4], 60)) + 4 <= 60
    assert fit_widths([12, 12], [12, 12], 10) == [12, 12]  # nothing to shorten: it wraps


@pytest.mark.parametrize(("command", "header"), [("spaces", "SPACE"), ("units", "UNIT")])
def test_hub_tables_have_a_header_and_fit_the_terminal(
    eksinf, stack_dir, monkeypatch, command, header
):
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    wide = eksinf("hub", command, cwd=stack_dir).out.splitlines()  # a pipe: whole lines
    assert wide[0].split()[0] == header and max(map(len, wide)) > 100
    monkeypatch.setenv("COLUMNS", "100")
    lines = eksinf("hub", command, cwd=stack_dir).out.splitlines()
    assert lines[0].split()[0] == header and len(lines) == len(wide)
    assert max(map(len, lines)) <= 100
    assert any(line.endswith("...") or "... " in line for line in lines)


def _value_options():
    """(command path, option) for every option of every command that takes a value."""
    import typer

    from eksinf.cli.app import whole_app

    def walk(command, prefix):
        for param in getattr(command, "params", []):
            if param.param_type_name == "option" and not param.is_flag and not param.count:
                yield " ".join(prefix), param
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            yield from walk(sub, [*prefix, name])

    root = typer.main.get_command(whole_app())
    ctx = typer.Context(root)
    return [(path, param, ctx) for path, param in walk(root, ["eksinf"])]


def test_every_value_option_has_one_metavar_style():
    """Option values read `<kind>` (typer's own `<str>`, `<path>`), never a bare `DIR`; a fixed
    set of values reads `<a|b>`."""
    found = _value_options()
    assert len(found) > 50  # the walk reaches every command's options
    odd = [
        f"{path} {param.opts[0]} {param.make_metavar(ctx)}"
        for path, param, ctx in found
        if not re.fullmatch(r"<[a-z0-9:|,.\-]+>(\.\.\.)?", param.make_metavar(ctx))
    ]
    assert odd == []


@pytest.mark.parametrize(
    ("option", "choices"),
    [
        ("--plane", None),
        ("--kind", "<eks|eks-byo|hyperpod-eks>"),
        ("--target-kind", "<eks|eks-byo|hyperpod-eks>"),
        ("--hub", "<local|cub>"),
        ("--format", "<text|markdown|json>"),
        ("--prices", "<auto|live|snapshot>"),
    ],
)
def test_options_with_fixed_values_name_them_in_help(option, choices):
    from eksinf.model.stack import PLANES
    from eksinf.model.targets import TARGET_PLANES

    shown = {param.make_metavar(ctx) for _, param, ctx in _value_options() if option in param.opts}
    assert shown, option
    if option == "--plane":  # components lists the hub plane too; targets serve two
        assert shown == {"<" + "|".join(PLANES) + ">", "<" + "|".join(TARGET_PLANES) + ">"}
    else:
        assert shown == {choices}
