"""The git commit a stack or the tool was built from, for provenance. Never fails: unknown is None."""

from __future__ import annotations

import subprocess
from pathlib import Path


def commit_of(path: Path) -> str | None:
    """HEAD of the repository holding `path`, with `-dirty` when tracked files are modified."""
    try:
        head = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}-dirty" if dirty else head
