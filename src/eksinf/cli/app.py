"""The argument layer: the typer app, its commands (registered by each command module, in help
order) and `run`, which maps every outcome to an exit code."""

from __future__ import annotations

import sys

import typer

from .. import stacklock
from ..errors import USAGE, EksinfError
from . import aws, build, bundle, common, hub, links, review, targets, validate
from .common import State, err_console

app = typer.Typer(
    name="eksinf",
    help="Render, guard, link, bundle and deploy a GPU-inference stack on Amazon EKS.\n\n"
    "Exit codes: 0 ok, 1 failure or drift, 2 usage, 3 contract violation, 4 environment.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)


@app.callback()
def _root(
    ctx: typer.Context,
    stack: str = typer.Option(
        None,
        "--stack",
        metavar="DIR",
        help="Stack directory (holds components.yaml). Default: current directory.",
    ),
) -> None:
    ctx.obj = State(stack_dir=stack)


# Registration order is the help order: the pipeline, build side first, AWS last.
for module in (build, validate, review, links, bundle, hub, targets, aws):
    module.register(app)


def run(argv: list[str] | None = None) -> int:
    """Run one command and return its exit code (tests call this in-process).

    Under --json, stdout carries exactly one JSON object even when the command fails: the
    command's own, or `{"error", "hint", "exit"}` when it failed before printing one.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    common.start_run(json_mode="--json" in args)
    try:
        code = app(args=args, prog_name="eksinf", standalone_mode=False)
        return code if isinstance(code, int) else 0  # click returns the code of --help/Exit
    except typer.TyperException as exc:  # usage errors: shown as in standalone mode, exit 2
        # typer's public base class; its click subclasses carry show/format_message/exit_code
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        fmt = getattr(exc, "format_message", None)
        message = fmt() if fmt is not None else str(exc)
        code = getattr(exc, "exit_code", USAGE)
        return common.failed(message, "See `eksinf COMMAND --help`.", code)
    except typer.Abort:
        err_console.print("eksinf: aborted", markup=False)
        return common.failed("aborted", "", 1)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except EksinfError as exc:
        err_console.print(f"eksinf: {exc.message}", markup=False, highlight=False)
        if exc.hint:
            err_console.print(f"  hint: {exc.hint}", markup=False, highlight=False)
        return common.failed(exc.message, exc.hint, exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("eksinf: interrupted", markup=False)
        return common.failed("interrupted", "", 130)
    finally:
        stacklock.release_all()
