"""One eksinf run per stack at a time.

Every command that loads a stack takes an exclusive lock on it for the rest of the run, so two
runs never interleave their writes (configs/, the hub, .eksinf/oci) or read a half-built state.
A second run waits, saying who holds the lock, and gives up with exit 4 after
$EKSINF_LOCK_TIMEOUT seconds. The lock file lives outside the stack (in the temp folder, keyed
by the stack's path) so that taking it changes nothing in the stack; the kernel drops the lock
when the process ends, however it ends. The temp folder is shared with every user, so the lock's
folder must be the user's own and private (0700), and the lock file is opened without following
a link and must be the user's regular file: another user cannot point it at a file of ours.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from eksinf.errors import ENVIRONMENT, EksinfError

LOCK_TIMEOUT_ENV = "EKSINF_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT = 300.0  # a full render or sandbox up takes well under a minute
_POLL = 0.2
_held: dict[Path, int] = {}


def lock_timeout(default: float = DEFAULT_LOCK_TIMEOUT) -> float:
    raw = os.environ.get(LOCK_TIMEOUT_ENV, "")
    try:
        return max(0.0, float(raw)) if raw else default
    except ValueError:
        return default


def lock_path(root: Path) -> Path:
    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"eksinf-{os.getuid()}" / f"stack-{key}.lock"


def _holder(fd: int) -> str:
    try:
        return os.pread(fd, 300, 0).decode("utf-8", "replace").strip() or "another eksinf run"
    except OSError:
        return "another eksinf run"


def acquire(root: Path, say: Callable[[str], None]) -> None:
    """Take the stack's lock for the rest of this run (no-op when this run holds it)."""
    root = root.resolve()
    if root in _held:
        return
    path = lock_path(root)
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        _check_private(path.parent, os.lstat(path.parent), stat.S_ISDIR, "folder")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link where the lock file goes
            raise EksinfError(
                f"the stack lock's file {path} is a symbolic link",
                hint="Another user may be interfering: remove it, or set TMPDIR to a folder of "
                "your own.",
                exit_code=ENVIRONMENT,
            ) from exc
        raise EksinfError(
            f"cannot create the stack lock {path}: {exc.strerror}",
            hint=f"Make {path.parent.parent} writable, or set TMPDIR to a writable folder.",
            exit_code=ENVIRONMENT,
        ) from exc
    try:
        _check_private(path, os.fstat(fd), stat.S_ISREG, "file")
    except EksinfError:
        os.close(fd)
        raise
    timeout = lock_timeout()
    deadline = time.monotonic() + timeout
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            holder = _holder(fd)
            if time.monotonic() >= deadline:
                os.close(fd)
                raise EksinfError(
                    f"stack {root} is busy: {holder} holds its lock (waited {timeout:g}s)",
                    hint=f"Let that run finish, then retry (${LOCK_TIMEOUT_ENV} sets how long "
                    "to wait).",
                    exit_code=ENVIRONMENT,
                ) from None
            if not told:
                say(f"waiting for {holder} to finish with {root} (up to {timeout:g}s)")
                told = True
            time.sleep(_POLL)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()}: eksinf {' '.join(sys.argv[1:])}"[:300].encode(), 0)
    _held[root] = fd


def _check_private(path: Path, st: os.stat_result, kind: Callable[[int], bool], what: str) -> None:
    """Refuse (exit 4) a lock folder or file that is a link, another user's, or open to others."""
    problem = None
    if not kind(st.st_mode):
        problem = f"is not a {what} (a symbolic link?)"
    elif st.st_uid != os.geteuid():
        problem = f"belongs to uid {st.st_uid}, not to you"
    elif stat.S_IMODE(st.st_mode) & 0o077:
        problem = f"is open to other users (mode {stat.S_IMODE(st.st_mode):o})"
    if problem is not None:
        raise EksinfError(
            f"the stack lock's {what} {path} {problem}",
            hint="Another user may be interfering: remove it, or set TMPDIR to a folder of "
            "your own.",
            exit_code=ENVIRONMENT,
        )


def release_all() -> None:
    """Drop every lock this run took (the CLI calls it when a command ends)."""
    for fd in _held.values():
        os.close(fd)
    _held.clear()
