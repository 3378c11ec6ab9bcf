"""A run without typer: the root's options, the one JSON report and how a run ends (an error's
lines on stderr, its JSON object, the exit code). The argument layer (app.py) and the commands
answered without it (quick.py) both end their runs here, so a failure reads the same whichever
path ran the command."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import EksinfError, write_failure
from ..flows.run import open_stack, reset_run
from ..flows.runlock import release_locks
from ..model.stack import Stack
from .output import echo, json_text, progress

if TYPE_CHECKING:  # a plain render or verify (cli/quick.py) builds no context
    from ..flows.context import StackContext


@dataclass
class State:
    """The root's options (--stack) and the command's one StackContext, once built."""

    stack_dir: str | None = None
    context: StackContext | None = None

    def stack_root(self) -> Path | None:
        """The stack folder when there is one (for commands that work without a stack), so
        their --out can be checked against it."""
        root = Path(self.stack_dir or ".")
        return root if (root / "components.yaml").is_file() else None

    def stack(self) -> Stack:
        # its .eksinf/config.yaml settings (the mirror); one run per stack: the lock is held
        # until the run ends
        return open_stack(Path(self.stack_dir) if self.stack_dir else None, progress)


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
    echo(text)


def failed(message: str, hint: str, exit_code: int, details: dict[str, Any] | None = None) -> int:
    """Under --json, a command that failed before printing its object prints the error as one
    (with the error's details, when it has any, beside its message)."""
    if _run.json_mode and not _run.emitted:
        emit_json({**(details or {}), "error": message, "hint": hint, "exit": exit_code})
    return exit_code


def report(exc: EksinfError) -> int:
    """An EksinfError as every command reports it: its message and hint on stderr."""
    progress(f"eksinf: {exc.message}")
    if exc.hint:
        progress(f"  hint: {exc.hint}")
    return failed(exc.message, exc.hint, exc.exit_code, exc.details)


def refused_write(exc: OSError) -> int:
    """What the file system refused where no stage named it: one line naming the path, exit 4;
    anything else is raised on."""
    refused = write_failure(exc, exc.filename or "a file", verb="use")
    if refused is None:
        raise exc
    return report(refused)


def interrupted() -> int:
    """A run stopped by Ctrl-C outside its command (inside it, the argument layer exits 130
    and says nothing)."""
    progress("eksinf: interrupted")
    return failed("interrupted", "", 130)


def aborted() -> int:
    """A run the argument layer aborted (end of input while a command read it)."""
    progress("eksinf: aborted")
    return failed("aborted", "", 1)


def run_command(json_mode: bool, command: Callable[[], int]) -> int:
    """Start a run, call `command` and return its exit code: an EksinfError reported, what the
    file system refused named (no traceback), and the stack locks let go however it ended."""
    start_run(json_mode)
    try:
        return command()
    except EksinfError as exc:
        return report(exc)
    # What the file system refuses where no stage named it (a read-only stack, a full disk, a
    # folder this user may not read or write): one line naming the path, exit 4, no traceback.
    except OSError as exc:
        return refused_write(exc)
    except KeyboardInterrupt:
        return interrupted()
    finally:
        release_locks()
