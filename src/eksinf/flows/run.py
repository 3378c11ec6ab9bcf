"""The run's settings, set as the command line is parsed: the stack opened (its run lock held),
the chart mirror and the hub backend, and their reset between in-process runs.

Apart from `StackContext` (context.py): `render` and `verify` answered without the argument
layer (cli/quick.py) open the stack and set the mirror but never build a context, so they do
not create its classes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..model import config
from ..model.stack import Stack, load_stack
from .runlock import hold_stack


def open_stack(stack_dir: Path | None, say: Callable[[str], None]) -> Stack:
    """Load the stack and hold its run lock until the run ends (one run per stack)."""
    stack = load_stack(stack_dir)
    config.use_stack_root(stack.root)  # its .eksinf/config.yaml settings (the mirror)
    hold_stack(stack.root, say)
    return stack


def use_mirror(path: Path | None) -> None:
    """The offline chart and manifest mirror this run reads first (None: the environment's)."""
    config.use_mirror(path)


def use_hub(choice: str | None) -> None:
    """This run's --hub, for every hub a flow opens."""
    from ..hub import use_backend

    use_backend(choice)


def reset_run() -> None:
    """A mirror, stack or hub named in an earlier in-process run does not carry over (the hub
    is imported only by the commands that open it: a run that never loaded it has nothing to
    clear)."""
    import sys

    config.use_mirror(None)
    config.use_stack_root(None)
    hub = sys.modules.get("eksinf.hub")
    if hub is not None:
        hub.use_backend(None)
