"""The run's hold on its stack (core/stacklock.py), for the flows and for `eksinf components`
answered from the cache (cli/quick.py), which loads no stack model and no StackContext."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..core import stacklock


def hold_stack(root: Path, say: Callable[[str], None]) -> None:
    """Hold `root`'s lock until the run ends (one run per stack)."""
    stacklock.acquire(root, say)


def release_locks() -> None:
    """Let go of every stack lock this run took."""
    stacklock.release_all()
