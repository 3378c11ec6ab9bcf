"""Helpers every command module shares: the stack option, output to stdout/stderr, JSON."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from ..flows.context import AwsChoice, Output, StackContext, open_stack, reset_run
from ..model.config import HUB_BACKENDS
from ..model.stack import Stack
from .output import json_text, progress, table_text

# stdout carries data; stderr carries progress, warnings and errors, as plain lines (no rich
# console: its import costs more than a whole cached render).


@dataclass
class State:
    stack_dir: str | None = None
    context: StackContext | None = None  # built once per command (`context`)

    def stack_root(self) -> Path | None:
        """The stack folder when there is one (for commands that work without a stack), so
        their --out can be checked against it."""
        root = Path(self.stack_dir or ".")
        return root if (root / "components.yaml").is_file() else None

    def stack(self) -> Stack:
        # its .eksinf/config.yaml settings (the mirror); one run per stack: the lock is held
        # until the run ends
        return open_stack(Path(self.stack_dir) if self.stack_dir else None, progress)


def one_of(choices: Iterable[str]) -> str:
    """An option's metavar that names its choices, in the style typer gives every value
    (`<str>`, `<path>`): `<mgmt|workload>`."""
    return "<" + "|".join(choices) + ">"


def state(ctx: typer.Context) -> State:
    return ctx.find_root().obj or State()


def stack_context(
    ctx: typer.Context,
    *,
    hub: str | None = None,
    json_out: bool = False,
    region: str | None = None,
    aws_profile: str | None = None,
) -> StackContext:
    """The command's one StackContext, from the global options and its own (built on first
    call; a later call in the same command gets the same one)."""
    run = state(ctx)
    if run.context is None:
        run.context = StackContext(
            run.stack(),
            hub,
            Output(json=json_out, colour=_colour(), say=progress),
            AwsChoice(region, aws_profile),
        )
    return run.context


def _colour() -> bool:
    import os

    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


@dataclass
class _Run:
    json_mode: bool = False
    emitted: bool = False


_run = _Run()


def start_run(json_mode: bool, emitted: bool = False) -> None:
    """A new run (`emitted`: its JSON report was printed already, by cli/quick.py)."""
    global _run
    _run = _Run(json_mode, emitted)
    reset_run()  # a mirror, stack or hub named in an earlier in-process run does not carry over


def emit_json(data: Any) -> None:
    """Print the command's one JSON object on stdout (output.json_text)."""
    text = json_text(data)
    _run.emitted = True
    typer.echo(text)


def failed(message: str, hint: str, exit_code: int, details: dict[str, Any] | None = None) -> int:
    """Under --json, a command that failed before printing its object prints the error as one
    (with the error's details, when it has any, beside its message)."""
    if _run.json_mode and not _run.emitted:
        emit_json({**(details or {}), "error": message, "hint": hint, "exit": exit_code})
    return exit_code


def _use_mirror(value: Path | None) -> Path | None:
    from ..flows.context import use_mirror

    use_mirror(value)
    return value


# Every command that reads a pinned input (chart archives, the pinned Argo CD and HyperPod
# manifests beside them in `../manifests`) takes this option; parsing it sets the run's mirror.
MIRROR_OPTION = typer.Option(
    None,
    "--chart-mirror",
    metavar="<dir>",
    help="Offline mirror: chart archives (<chart>-<version>.tgz) tried before upstream; pinned "
    "manifests from manifests/ beside it. Default: $EKSINF_CHART_MIRROR, else mirror: in "
    ".eksinf/config.yaml, else ../shared/charts beside the stack.",
    file_okay=False,
    callback=_use_mirror,
)


def _use_hub(value: str | None) -> str | None:
    from ..flows.context import use_hub

    use_hub(value)
    return value


# Every command that opens the hub takes this option; parsing it sets the run's backend.
HUB_OPTION = typer.Option(
    None,
    "--hub",
    metavar=one_of(HUB_BACKENDS),
    help="Hub backend: local (SQLite) or cub. Default: .eksinf/config.yaml's hub:, else cub "
    "when run as `cub eksinf`, else local.",
    callback=_use_hub,
)
REGION_OPTION = typer.Option(
    None, "--region", help="AWS region. Default: the platform profile's region."
)
AWS_PROFILE_OPTION = typer.Option(
    None,
    "--aws-profile",
    help="AWS CLI profile for every AWS, kubectl and Helm call of this command. "
    "Default: $AWS_PROFILE as it was when the command started.",
)
JSON_OPTION = typer.Option(False, "--json", help="Print machine-readable JSON on stdout.")


def print_table(rows: list[dict[str, str]], columns: tuple[str, ...]) -> None:
    """output.table_text on stdout, in one write (a long listing is not a call per line)."""
    text = table_text(rows, columns)
    if text is not None:
        typer.echo(text)
