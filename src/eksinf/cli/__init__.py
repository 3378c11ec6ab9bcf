"""The command line: parse, call one stage, format. No logic of its own lives here."""

from __future__ import annotations

import sys

import typer

from ..errors import EksinfError
from . import aws, build, bundle, hub, links, review, validate
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
for module in (build, validate, review, links, bundle, hub, aws):
    module.register(app)


def run(argv: list[str] | None = None) -> int:
    """Run one command and return its exit code (tests call this in-process)."""
    try:
        app(args=argv, prog_name="eksinf")
    except SystemExit as exc:  # typer exits on success, --help and usage errors (code 2)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except EksinfError as exc:
        err_console.print(f"eksinf: {exc.message}", markup=False, highlight=False)
        if exc.hint:
            err_console.print(f"  hint: {exc.hint}", markup=False, highlight=False)
        return exc.exit_code
    except KeyboardInterrupt:
        err_console.print("eksinf: interrupted", markup=False)
        return 130
    return 0


def main() -> None:
    from ..plugin import handle_hook

    if handle_hook(sys.argv[0]):  # cub installing eksinf as a plugin: write its manifest
        sys.exit(0)
    sys.exit(run())
