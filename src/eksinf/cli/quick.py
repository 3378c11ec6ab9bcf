"""`eksinf version` and `eksinf components`, answered without the argument layer.

Importing typer and a command module costs several times what these two commands do (read the
version, list the stack). `answer` takes their plain forms (the root's --stack, --json,
--plane, wherever the app accepts them), does all the work, and prints only when all of it
succeeded, exactly what the app prints. Any other form, a value it does not expect, an error or
output it does not write the way click does is left to the app (None), which then answers it
from the start: every command line gets the app's bytes and exit code
(tests/test_quick_commands.py runs both ways).
"""

from __future__ import annotations

import sys

from .argv import STACK_OPTION, global_options_anywhere
from .output import json_text, table_text

# typing is not imported here (nor in argv.py and output.py): `version` would pay ~2 ms for it
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

COMPONENT_COLUMNS = ("component", "plane", "order", "render", "charts", "description")

# each command's options (the option -> whether it takes a value)
OPTIONS: dict[str, dict[str, bool]] = {
    "version": {"--json": False},
    "components": {"--json": False, "--plane": True},
}


def version_line(info: dict[str, str]) -> str:
    return f"eksinf {info['version']} (commit {info['commit']}, engine {info['engine']})"


def components_table(rows: list[dict[str, Any]]) -> tuple[list[dict[str, str]], tuple[str, ...]]:
    """`eksinf components`' rows as its table's cells, and its columns."""
    cells = [
        {
            "component": r["name"],
            "plane": r["plane"],
            "order": str(r["order"]),
            "render": r["render"],
            "charts": ", ".join(r["charts"]) or "-",
            "description": r["description"],
        }
        for r in rows
    ]
    return cells, COMPONENT_COLUMNS


class _ToTheApp(Exception):
    """What quick.py does not answer itself."""


def _options(words: list[str], known: dict[str, bool]) -> dict[str, str] | None:
    """The options `words` give (each at most once; a value never an option), or None when
    they are anything else."""
    found: dict[str, str] = {}
    at = 0
    while at < len(words):
        name, eq, value = words[at].partition("=")
        takes = known.get(name)
        if takes is None or name in found or (eq and not takes):
            return None
        if takes and not eq:
            if at + 1 >= len(words):
                return None
            value, at = words[at + 1], at + 1
        if takes and value.startswith("-"):
            return None
        found[name] = value
        at += 1
    return found


def parse(argv: list[str]) -> tuple[str, str | None, dict[str, str]] | None:
    """(command, --stack, its options) of a plain `version` or `components` command line."""
    args = global_options_anywhere(argv)
    stack: str | None = None
    while args and args[0].partition("=")[0] == STACK_OPTION:
        name, eq, value = args[0].partition("=")
        if not eq:
            if len(args) < 2:
                return None
            value, args = args[1], args[1:]
        if value.startswith("-"):
            return None
        stack, args = value, args[1:]
    if not args or args[0] not in OPTIONS:
        return None
    found = _options(args[1:], OPTIONS[args[0]])
    return None if found is None else (args[0], stack, found)


def _stdout_text(command: str, stack_dir: str | None, options: dict[str, str]) -> str | None:
    """What the command prints on stdout (None: nothing)."""
    if command == "version":
        from ..flows.about import version_info

        info = version_info()
        return json_text(info) if "--json" in options else version_line(info)
    from pathlib import Path

    from ..flows.runlock import hold_stack, release_locks
    from ..model.listing import kept_listing, listing_key, of_plane
    from ..model.stackroot import find_stack_root
    from .output import progress

    # the listing kept under the exact bytes of the stack's sources (model/listing.py): the
    # stack's model is not loaded; when nothing is kept (or the plane is not one), the app
    # loads it, answers, and keeps the listing for the next run
    root = find_stack_root(Path(stack_dir) if stack_dir else None)
    key = listing_key(root)
    kept = kept_listing(key) if key is not None else None
    plane = options.get("--plane")
    if kept is None or (plane is not None and plane not in kept[0]):
        raise _ToTheApp
    try:
        hold_stack(root, progress)  # as loading the stack does
        rows = of_plane(kept[1], plane)
    finally:
        release_locks()  # as the app does when its run ends
    if "--json" in options:
        return json_text({"components": rows})
    return table_text(*components_table(rows))


def _as_click_writes(text: str) -> bool:
    """Whether click's echo would write `text` unchanged: it strips ANSI escapes off a
    non-terminal and re-encodes a stream whose encoding is not UTF-8 (none of which the app's
    commands print in practice)."""
    encoding = (sys.stdout.encoding or "").lower().replace("-", "").replace("_", "")
    return "\x1b" not in text and (text.isascii() or encoding == "utf8")


def answer(argv: list[str]) -> int | None:
    """The exit code of a plain `version` or `components` run, after printing its output; None
    (nothing printed) for the app to answer."""
    parsed = parse(argv)
    if parsed is None:
        return None
    try:
        text = _stdout_text(*parsed)
    except KeyboardInterrupt:
        from .app import interrupted  # as the app answers one
        from .common import start_run

        start_run("--json" in parsed[2])
        return interrupted()
    except Exception:  # the app reports it (or raises it) in its own words
        return None
    if text is not None:
        if not _as_click_writes(text):
            return None
        try:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
        except OSError as exc:  # stdout refused (a full disk, a closed pipe): as the app says
            from .app import refused_write
            from .common import start_run

            # a JSON report counts as printed once it was tried, as emit_json counts it
            start_run("--json" in parsed[2], emitted="--json" in parsed[2])
            return refused_write(exc)
    return 0
