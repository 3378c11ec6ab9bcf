"""What commands print, as text: the one JSON report, aligned tables, stdout lines. No typer
here (but for text it would rewrite): the light commands (quick.py) print these too, byte for
byte as the argument layer does."""

from __future__ import annotations

import sys

from ..errors import FAILURE, EksinfError

MIN_CELL = 12  # a shortened column keeps at least this much (or its header)


def progress(message: str) -> None:
    """One line on stderr: progress, a warning or an error."""
    sys.stderr.write(f"{message}\n")
    sys.stderr.flush()


def as_click_writes(text: str) -> bool:
    """Whether typer's echo (click's, which the argument layer prints with) would write `text`
    unchanged: it strips ANSI escapes off a non-terminal and re-encodes a stream whose encoding
    is not UTF-8 (none of which the commands print in practice)."""
    encoding = (sys.stdout.encoding or "").lower().replace("-", "").replace("_", "")
    return "\x1b" not in text and (text.isascii() or encoding == "utf8")


def echo(text: str, nl: bool = True) -> None:
    """`text` (and a newline) on stdout, the bytes typer's echo writes: written here when that
    is `text` itself, so a command printing plain text imports no typer; else by typer."""
    if not as_click_writes(text):
        import typer

        typer.echo(text, nl=nl)
        return
    sys.stdout.write(text + "\n" if nl else text)
    sys.stdout.flush()


def json_text(data: object) -> str:
    """A command's one JSON object, as printed. Strict JSON: NaN and infinities are not JSON
    (most parsers refuse them), so a non-finite number is an error here, never printed; the data
    is made finite where it is read (prices, the price cache). One object, always: lists go
    under a key, so a script reads every command's output, and its error, the same way
    (docs/safety.md)."""
    if not isinstance(data, dict):
        raise EksinfError(
            f"the JSON report is a {type(data).__name__}, not one object",
            hint="This is a bug in eksinf: please report it with the command you ran.",
            exit_code=FAILURE,
        )
    import json  # here: `eksinf version` prints no JSON unless asked

    try:
        return json.dumps(data, indent=2, sort_keys=True, default=str, allow_nan=False)
    except ValueError as exc:
        raise EksinfError(
            f"the JSON report holds a number that is not finite ({exc})",
            hint="This is a bug in eksinf: please report it with the command you ran.",
            exit_code=FAILURE,
        ) from exc


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


def table_text(rows: list[dict[str, str]], columns: tuple[str, ...]) -> str | None:
    """Aligned columns under an upper-case header, the last one unpadded, fitted to the
    terminal's width (the widest column shortened, with `...`). No rows: None (no output at
    all), so an empty listing is empty."""
    if not rows:
        return None
    cells = [tuple(c.upper() for c in columns)] + [tuple(r[c] for c in columns) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    fitted = fit_widths(widths, [len(c) for c in columns], terminal_width())
    lines = []
    for row in cells:
        shown = [_cut(c, w) for c, w in zip(row, fitted, strict=True)]
        lines.append(
            "  ".join([*(c.ljust(w) for c, w in zip(shown[:-1], fitted, strict=False)), shown[-1]])
        )
    return "\n".join(lines)
