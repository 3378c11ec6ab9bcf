"""`eksinf version`, `components`, `render` and `verify`, answered without the argument layer.

Importing typer and a command module costs several times what `version` and `components` do
(read the version, list the stack), and over a third of a cached render. `answer` takes their
plain forms (the root's --stack and --json wherever the app accepts them, and each command's
options in OPTIONS) and gives the app's bytes and exit code (tests/test_quick_commands.py and
tests/test_quick_render.py run both ways). Any other form, or a value it does not expect, is
left to the app (None).

`version` and `components` do all their work first and print only when all of it succeeded;
an error, or output typer would not write as it stands, is left to the app, which answers from
the start. `render` and `verify` print as they go and write configs/, so redoing them would
repeat both: they call the functions the app's commands call (rendering.py) and end the run
as the app does (runstate.py), the same lines for the same failure.
"""

from __future__ import annotations

import sys

from .argv import STACK_OPTION, global_options_anywhere
from .output import as_click_writes, json_text, table_text

# typing is not imported here (nor in argv.py and output.py): `version` would pay ~2 ms for it
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

COMPONENT_COLUMNS = ("component", "plane", "order", "render", "charts", "description")

FLAG, VALUE, VALUES = "flag", "value", "values"  # VALUES: a value, the option repeatable
# each command's options taken here (the option -> what it takes); -c is --component's short
# form, given apart from its value (`-c NAME`)
OPTIONS: dict[str, dict[str, str]] = {
    "version": {"--json": FLAG},
    "components": {"--json": FLAG, "--plane": VALUE},
    "render": {"--json": FLAG, "--chart-mirror": VALUE, "--out": VALUE, "--skip-guard": FLAG},
    "verify": {
        "--json": FLAG,
        "--chart-mirror": VALUE,
        "--full": FLAG,
        "--component": VALUES,
        "-c": VALUES,
    },
}
LONG = {"-c": "--component"}
WORKING = ("render", "verify")  # commands that print as they go (see the module docstring)


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


def _options(words: list[str], known: dict[str, str]) -> dict[str, list[str]] | None:
    """The options `words` give, by long name, each with its values (only a VALUES option
    repeated; a value never empty nor an option), or None when they are anything else."""
    found: dict[str, list[str]] = {}
    at = 0
    while at < len(words):
        name, eq, value = words[at].partition("=")
        takes = known.get(name)
        if takes is None or (eq and (takes == FLAG or not name.startswith("--"))):
            return None  # the app's parser reads `-c=x` as the value "=x"
        name = LONG.get(name, name)
        if name in found and takes != VALUES:
            return None
        if takes != FLAG and not eq:
            if at + 1 >= len(words):
                return None
            value, at = words[at + 1], at + 1
        if takes != FLAG and (not value or value.startswith("-")):
            return None
        found.setdefault(name, []).extend([value] if takes != FLAG else [])
        at += 1
    return found


def _value(options: dict[str, list[str]], name: str) -> str | None:
    """A single-valued option's value (None: not given)."""
    values = options.get(name)
    return values[0] if values else None


def parse(argv: list[str]) -> tuple[str, str | None, dict[str, list[str]]] | None:
    """(command, --stack, its options) of a plain command line of a command in OPTIONS."""
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


def _stdout_text(command: str, stack_dir: str | None, options: dict[str, list[str]]) -> str | None:
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
    plane = _value(options, "--plane")
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


def _path(options: dict[str, list[str]], name: str, file_okay: bool = True) -> Path | None:
    """A path option's value as the app's parser gives it (typer's Path type): a path that
    exists must be readable (and, unless `file_okay`, not a file); otherwise the app says so."""
    value = _value(options, name)
    if value is None:
        return None
    import os
    import stat
    from pathlib import Path

    try:
        mode = os.stat(value).st_mode
    except OSError:
        return Path(value)
    if (not file_okay and stat.S_ISREG(mode)) or not os.access(value, os.R_OK):
        raise _ToTheApp
    return Path(value)


def _as_typer_calls(command: Callable[[], None]) -> int:
    """The exit code of `command` called as the argument layer calls a command (typer's main):
    a Ctrl-C exits 130 and says nothing; end of input is an abort after an empty line; a
    closed pipe exits 1."""
    import errno

    from .output import progress
    from .runstate import aborted

    try:
        command()
    except KeyboardInterrupt:
        return 130
    except EOFError:
        progress("")
        return aborted()
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        return _closed_pipe()
    return 0


def _closed_pipe() -> int:
    """A write to a closed pipe, as the argument layer ends it: exit 1, nothing said. typer
    makes the streams' flush ignore the closed pipe; here stdout is pointed at the null device,
    so the flush at exit writes what is left to nothing instead of failing (stderr's lines are
    flushed as written, so it has nothing left)."""
    import os

    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 1


def _work(
    command: str, stack_dir: str | None, options: dict[str, list[str]], owns_process: bool
) -> int | None:
    """The exit code of a plain `render` or `verify` run (None: left to the app)."""
    try:
        mirror = _path(options, "--chart-mirror", file_okay=False)
        out = _path(options, "--out")
    except _ToTheApp:
        return None
    # A render or verify is one short pass whose objects stay in use until it ends: the cyclic
    # collector's ~50 passes over the modules it imports and what it reads free ~3,000 objects
    # and cost ~6 ms of a no-cache render (peak memory ~4 MB more without them). Only when the
    # process ends with the command (`main`): an in-process caller keeps its collector.
    if owns_process:
        import gc

        gc.disable()
    from ..flows.run import use_mirror
    from .rendering import render, verify
    from .runstate import State, run_command

    json_out = "--json" in options

    def call() -> None:
        use_mirror(mirror)  # as parsing --chart-mirror does in the app
        load = State(stack_dir).stack
        if command == "render":
            render(load, mirror, out, "--skip-guard" in options, json_out)
        else:
            verify(load, mirror, "--full" in options, options.get("--component"), json_out)

    return run_command(json_out, lambda: _as_typer_calls(call))


def answer(argv: list[str], *, owns_process: bool = False) -> int | None:
    """The exit code of a plain `version`, `components`, `render` or `verify` run, after
    printing its output; None (nothing printed) for the app to answer. `owns_process`: the
    process ends when this returns (`main`), so process-wide settings may be tuned for it."""
    parsed = parse(argv)
    if parsed is None:
        return None
    if parsed[0] in WORKING:
        return _work(*parsed, owns_process)
    try:
        text = _stdout_text(*parsed)
    except KeyboardInterrupt:
        return 130  # as the app's command would end (_as_typer_calls)
    except Exception:  # the app reports it (or raises it) in its own words
        return None
    if text is not None:
        if not as_click_writes(text):
            return None
        try:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
        except OSError as exc:  # stdout refused (a full disk, a closed pipe): as the app says
            import errno

            if exc.errno == errno.EPIPE:
                return _closed_pipe()
            from .runstate import refused_write, start_run

            # a JSON report counts as printed once it was tried, as emit_json counts it
            start_run("--json" in parsed[2], emitted="--json" in parsed[2])
            return refused_write(exc)
    return 0
