"""Helpers every command module shares: the stack option, output to stdout/stderr, JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from ..errors import FAILURE, EksinfError
from ..flows.context import AwsChoice, Output, StackContext, open_stack, reset_run
from ..model.config import HUB_BACKENDS
from ..model.stack import Stack

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


def start_run(json_mode: bool) -> None:
    global _run
    _run = _Run(json_mode)
    reset_run()  # a mirror, stack or hub named in an earlier in-process run does not carry over


def emit_json(data: Any) -> None:
    """Print the command's one JSON object on stdout. Strict JSON: NaN and infinities are not
    JSON (most parsers refuse them), so a non-finite number is an error here, never printed; the
    data is made finite where it is read (prices, the price cache). One object, always: lists go
    under a key, so a script reads every command's output, and its error, the same way
    (docs/safety.md)."""
    if not isinstance(data, dict):
        raise EksinfError(
            f"the JSON report is a {type(data).__name__}, not one object",
            hint="This is a bug in eksinf: please report it with the command you ran.",
            exit_code=FAILURE,
        )
    try:
        text = json.dumps(data, indent=2, sort_keys=True, default=str, allow_nan=False)
    except ValueError as exc:
        raise EksinfError(
            f"the JSON report holds a number that is not finite ({exc})",
            hint="This is a bug in eksinf: please report it with the command you ran.",
            exit_code=FAILURE,
        ) from exc
    _run.emitted = True
    typer.echo(text)


def failed(message: str, hint: str, exit_code: int, details: dict[str, Any] | None = None) -> int:
    """Under --json, a command that failed before printing its object prints the error as one
    (with the error's details, when it has any, beside its message)."""
    if _run.json_mode and not _run.emitted:
        emit_json({**(details or {}), "error": message, "hint": hint, "exit": exit_code})
    return exit_code


def progress(message: str) -> None:
    """One line on stderr: progress, a warning or an error."""
    sys.stderr.write(f"{message}\n")
    sys.stderr.flush()


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


MIN_CELL = 12  # a shortened column keeps at least this much (or its header)


def terminal_width() -> int | None:
    """The terminal's width when output goes to one (or $COLUMNS says it); None for a pipe or
    file, which gets whole lines (scripts read --json)."""
    import os
    import shutil

    if os.environ.get("COLUMNS") or sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def fit_widths(widths: list[int], headers: list[int], room: int | None) -> list[int]:
    """Column widths that fit in `room` columns (two spaces between columns): the widest
    column is shortened first, none below MIN_CELL or its header."""
    fitted = list(widths)
    if room is None:
        return fitted
    while sum(fitted) + 2 * (len(fitted) - 1) > room:
        widest = max(range(len(fitted)), key=lambda i: fitted[i])
        floor = max(MIN_CELL, headers[widest])
        if fitted[widest] <= floor:
            break  # nothing left to shorten: the line wraps
        over = sum(fitted) + 2 * (len(fitted) - 1) - room
        second = max((w for i, w in enumerate(fitted) if i != widest), default=0)
        fitted[widest] = max(floor, fitted[widest] - over, min(fitted[widest] - 1, second))
    return fitted


def _cut(cell: str, width: int) -> str:
    return cell if len(cell) <= width else cell[: width - 3] + "..."


def print_table(rows: list[dict[str, str]], columns: tuple[str, ...]) -> None:
    """Aligned columns under an upper-case header, the last one unpadded, fitted to the
    terminal's width (the widest column shortened, with `...`). No rows: no output at all, so
    an empty listing is empty."""
    if not rows:
        return
    cells = [tuple(c.upper() for c in columns)] + [tuple(r[c] for c in columns) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    fitted = fit_widths(widths, [len(c) for c in columns], terminal_width())
    lines = []
    for row in cells:
        shown = [_cut(c, w) for c, w in zip(row, fitted, strict=True)]
        lines.append(
            "  ".join([*(c.ljust(w) for c, w in zip(shown[:-1], fitted, strict=False)), shown[-1]])
        )
    typer.echo("\n".join(lines))  # one write: a long listing is not a call per line
