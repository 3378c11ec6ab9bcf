"""The git commit a stack or the tool was built from, for provenance. Never fails: unknown is None."""

from __future__ import annotations

from pathlib import Path

_NO_COMMIT = "(initial)"  # git's branch.oid in a repository without a commit yet


def commit_of(path: Path) -> str | None:
    """HEAD of the repository holding `path`, with `-dirty` when tracked files are modified.

    One git process (`eksinf version` runs this): porcelain v2's headers name HEAD's commit,
    and every other line is a tracked file that differs from it."""
    import subprocess  # here: a render or verify that prints no provenance starts no process

    try:
        lines = subprocess.run(
            ["git", "-C", str(path), "status", "--porcelain=v2", "--branch"]
            + ["--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    heads = [line.split(" ", 2)[2] for line in lines if line.startswith("# branch.oid ")]
    if not heads or heads[0] == _NO_COMMIT:
        return None
    dirty = any(not line.startswith("#") for line in lines)
    return f"{heads[0]}-dirty" if dirty else heads[0]
