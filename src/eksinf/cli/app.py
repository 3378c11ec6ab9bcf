"""The argument layer: the typer app, its commands (registered by each command module) and `run`,
which maps every outcome to an exit code."""

from __future__ import annotations

import functools
import importlib
import sys
from typing import Any

import typer

from ..errors import USAGE
from . import original
from .argv import STACK_OPTION, global_options_anywhere
from .runstate import State, aborted, failed, run_command

SETTINGS: dict[str, Any] = {
    "name": "eksinf",
    "help": "Render, guard, link, bundle and deploy a GPU-inference stack on Amazon EKS.\n\n"
    "--stack, --json and --hub go before or after the command; `eksinf --version` is "
    "`eksinf version`.\n\n"
    "Exit codes: 0 ok, 1 failure or drift, 2 usage, 3 contract violation, 4 environment.",
    "no_args_is_help": True,
    "pretty_exceptions_enable": False,
    "add_completion": False,
    "rich_markup_mode": None,
    # click passes a parent context's help option names on to every subcommand
    "context_settings": {"help_option_names": ["-h", "--help"]},
}
# The command modules in help order (the pipeline, build side first, AWS last) and the top-level
# commands each registers, so that a run imports only the module of the command it invokes
# (tests/test_help_pages.py checks this table against what the modules register).
MODULES: dict[str, tuple[str, ...]] = {
    "build": ("version", "components", "render", "guard", "verify", "charts"),
    "validate": ("validate",),
    "review": ("diff",),
    "links": ("links", "lint"),
    "bundle": ("bundle", "push", "pull", "tags"),
    "hub": ("install", "deploy", "link-profile", "fn", "release", "sandbox", "hub"),
    "targets": ("target", "mgmt"),
    "aws": ("status", "addon-schemas", "creds", "enroll", "teardown"),
    "completion": ("completion",),
}


def _root(
    ctx: typer.Context,
    stack: str = typer.Option(
        None,
        STACK_OPTION,
        metavar="<dir>",
        help="Stack directory (holds components.yaml). Default: the nearest folder holding "
        "one, from the current directory up to the top of its git checkout; else the stack "
        "shipped inside eksinf (docs/plugin.md).",
    ),
) -> None:
    ctx.obj = State(stack_dir=stack)


def _app(modules: tuple[str, ...]) -> typer.Typer:
    app = typer.Typer(**SETTINGS)
    app.callback()(_root)
    for module in modules:
        importlib.import_module(f"{__package__}.{module}").register(app)
    return app


@functools.cache
def whole_app() -> typer.Typer:
    """Every command: what `eksinf` alone, a root `--help` or an unknown command answer with."""
    return _app(tuple(MODULES))


def command_word(args: list[str]) -> str | None:
    """The top-level command `args` invoke (after the root options), if any."""
    at = 0
    while at < len(args):
        if args[at] == STACK_OPTION or original.takes_value(args[at]):
            at += 2  # the original's persistent flags may stand before the command
        elif args[at].startswith("-"):
            at += 1
        else:
            return args[at]
    return None


def app_for(args: list[str]) -> typer.Typer:
    """The app that parses `args`: the root holding only the invoked top-level command.

    Importing every command module and letting typer convert all 54 commands before it parses
    costs more than many commands' own work; a root holding one command imports one module and
    converts one command, and parses, helps and errs identically (tests/test_help_pages.py).
    No command, or an unknown one, gets the whole app, so the listing and the "No such command"
    error name every command.
    """
    name = command_word(args)
    module = next((m for m, names in MODULES.items() if name in names), None)
    if module is None:
        return whole_app()
    narrow = _app((module,))
    narrow.registered_commands = [c for c in narrow.registered_commands if c.name == name]
    narrow.registered_groups = [g for g in narrow.registered_groups if g.name == name]
    return narrow


def run(argv: list[str] | None = None) -> int:
    """Run one command and return its exit code (tests call this in-process).

    Under --json, stdout carries exactly one JSON object even when the command fails: the
    command's own, or `{"error", "hint", "exit"}` when it failed before printing one.
    """
    args = global_options_anywhere(list(sys.argv[1:] if argv is None else argv))
    return run_command("--json" in args, functools.partial(_parse_and_call, args))


def _parse_and_call(args: list[str]) -> int:
    """The command `args` name, parsed and called; the argument layer's own outcomes (a usage
    error, an abort, an exit) as exit codes, every other failure raised to run_command."""
    try:
        command = typer.main.get_command(app_for(args))
        code = command.main(
            args=original.translate(args, command), prog_name="eksinf", standalone_mode=False
        )
        return code if isinstance(code, int) else 0  # click returns the code of --help/Exit
    except typer.TyperException as exc:  # usage errors: shown as in standalone mode, exit 2
        # typer's public base class; its click subclasses carry show/format_message/exit_code
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        fmt = getattr(exc, "format_message", None)
        message = fmt() if fmt is not None else str(exc)
        code = getattr(exc, "exit_code", USAGE)
        return failed(message, "See `eksinf COMMAND --help`.", code)
    except typer.Abort:
        return aborted()
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
