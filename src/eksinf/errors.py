"""The one error type every stage raises, and the exit codes scripts rely on."""

from __future__ import annotations

import errno
import shlex

# Exit codes (see docs/cli.md): scripts branch on these, so they never change meaning.
OK = 0
FAILURE = 1  # a failure or drift
USAGE = 2  # bad flags or arguments (typer/click also use 2)
CONTRACT = 3  # the input, stack or cluster breaks a stated rule
ENVIRONMENT = 4  # unreachable service, credentials, missing tool


class EksinfError(Exception):
    """A failure the user can act on: what went wrong, how to fix it, and the exit code."""

    def __init__(
        self,
        message: str,
        hint: str = "",
        exit_code: int = FAILURE,
        details: dict[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code
        # What a script needs beyond the sentence (camelCase keys): a --json error carries it.
        self.details = details or {}

    def __str__(self) -> str:
        return self.message


def shell_command(*words: object) -> str:
    """A command a hint tells the user to run, each word quoted for a POSIX shell: a value
    from input (a name, an ARN, a folder) may hold a space or a quote, and a pasted fix must
    run exactly what it names, never split or run something else. Plain words stay as written."""
    return " ".join(shlex.quote(str(word)) for word in words)


# OSErrors that say the place cannot take a write, whatever eksinf does: an environment error
_CANNOT_WRITE = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the filesystem is read-only",
    errno.EPERM: "the operation is not permitted",
    errno.EACCES: "permission denied",
}


def write_failure(
    exc: OSError, where: object, *, undone: bool = False, verb: str = "write"
) -> EksinfError | None:
    """The exit-4 error for an OSError met while writing `where` (a file or folder), or None
    when the error says something else (a bug or a race, which stays an OSError). `undone`: the
    caller put the output back as it was, and the hint says so."""
    why = _CANNOT_WRITE.get(exc.errno or 0)
    if why is None:
        return None
    return EksinfError(
        f"cannot {verb} {where}: {why} ({exc.strerror or exc})",
        hint=(
            "Nothing was half-written: the output is as it was before this run. " if undone else ""
        )
        + "Free space, or make the folder writable, then run again.",
        exit_code=ENVIRONMENT,
    )
