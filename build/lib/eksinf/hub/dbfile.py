"""Opening the local hub's SQLite file, and turning what can go wrong with it into errors.

A hub database that is empty, truncated, corrupt, locked by another process or read-only is an
environment problem (exit 4) naming the file and what to do, never a traceback. An existing
empty (0-byte) file is refused rather than silently treated as a new hub: eksinf never wrote
one, so its history went somewhere, and publishing into a fresh hub would collide with the
immutable tags the lost one already pushed.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from eksinf.core.stacklock import LOCK_TIMEOUT_ENV, lock_timeout

from .protocol import Unavailable

SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT = 30.0  # seconds SQLite waits for another process's write transaction


def _corrupt(path: Path, what: str) -> Unavailable:
    """Only for a file that is not a hub (empty, not SQLite) or that SQLite's own check finds
    damaged (`sqlite_verdict`): the one case where moving it aside is the advice."""
    return Unavailable(
        f"hub database {path} is {what}",
        f"Restore it from a backup; or, to start a new hub (its history is lost), move it aside "
        f"(mv {path} {path}.broken) and run `eksinf sandbox up` or `eksinf install`.",
    )


def sqlite_verdict(path: Path) -> tuple[bool | None, str]:
    """SQLite's own check of the hub file with its WAL: (True, "ok"), (False, what
    `PRAGMA quick_check` or opening reports), or (None, why it could not be checked).

    Committed data may live in the -wal file (WAL mode; a checkpoint cut short by a full disk
    leaves it there), so the file alone says nothing: only SQLite, reading both, can tell. It
    runs on a private copy, so a check leaves no -wal or -shm file beside the user's hub."""
    wal = path.with_name(path.name + "-wal")
    try:
        with tempfile.TemporaryDirectory(prefix="eksinf-hub-check-") as tmp:
            copy = Path(tmp) / "hub.db"
            shutil.copyfile(path, copy)
            if wal.is_file():
                shutil.copyfile(wal, Path(tmp) / "hub.db-wal")
            try:
                db = sqlite3.connect(copy, isolation_level=None)
                try:
                    rows = [str(r[0]) for r in db.execute("PRAGMA quick_check(5)")]
                finally:
                    db.close()
            except sqlite3.Error as exc:
                return False, str(exc)
    except OSError as exc:
        return None, f"could not copy it to check it: {exc.strerror}"
    return (True, "ok") if rows == ["ok"] else (False, "; ".join(rows))


def _disk_full(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code == getattr(sqlite3, "SQLITE_FULL", 13) or "disk is full" in str(exc).lower()


def translate(path: Path, exc: sqlite3.Error) -> Unavailable:
    """The environment error for an SQLite failure on the hub file."""
    text = str(exc)
    low = text.lower()
    if _disk_full(exc):
        return Unavailable(
            f"disk full: the hub database {path} cannot grow ({text})",
            f"Free space on the filesystem holding {path.parent} and run the command again. "
            "The hub is intact: SQLite rolled back the write that did not fit, and what was "
            "committed before is kept.",
        )
    if "readonly" in low or "read-only" in low:
        return Unavailable(
            f"hub database {path} is read-only for this user ({text})",
            f"Make {path.parent} and the files in it writable by you, or set hub_path in "
            ".eksinf/config.yaml to a writable copy.",
        )
    if "locked" in low or "busy" in low:
        return Unavailable(
            f"hub database {path} is locked by another process (waited {lock_timeout(BUSY_TIMEOUT):g}s)",
            f"Wait for the other eksinf run to finish and retry (${LOCK_TIMEOUT_ENV} sets how "
            "long to wait).",
        )
    if "unable to open" in low or "disk i/o" in low:
        return Unavailable(
            f"cannot open hub database {path} ({text})",
            f"Check that {path.parent} exists and is readable and writable by you.",
        )
    healthy, said = sqlite_verdict(path)
    if healthy is False:
        return _corrupt(path, f"corrupt or truncated ({text}; SQLite's quick_check: {said})")
    checked = "SQLite's quick_check finds it intact" if healthy else f"it was not checked: {said}"
    return Unavailable(
        f"hub database {path}: {text} ({checked})",
        "Run the command again; if it fails the same way, keep the file (and its -wal file) "
        "as it is and report the error.",
    )


class Connection(sqlite3.Connection):
    """A connection whose failures name the hub file (see `translate`)."""

    hub_path: Path = Path()

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        try:
            return super().execute(sql, parameters)
        except sqlite3.IntegrityError:
            raise  # a constraint the caller handles, not the environment
        except sqlite3.Error as exc:
            raise translate(self.hub_path, exc) from exc


def connect(path: Path) -> Connection:
    """Open (creating if absent) the hub file after checking it looks like one."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise Unavailable(
            f"cannot create the hub's folder {path.parent}: {exc.strerror}",
            f"Make {path.parent.parent} writable, or set hub_path in .eksinf/config.yaml.",
        ) from exc
    if path.exists():
        try:
            with path.open("rb") as fh:
                head = fh.read(100)  # SQLite's file header
            size = path.stat().st_size
        except OSError as exc:
            raise Unavailable(
                f"cannot read hub database {path}: {exc.strerror}",
                f"Make {path} readable by you.",
            ) from exc
        wal = path.with_name(path.name + "-wal")
        if not head and not (wal.is_file() and wal.stat().st_size):
            raise _corrupt(path, "an empty file (0 bytes), not a hub eksinf wrote")
        if head and (not head.startswith(SQLITE_HEADER) or len(head) < 100):
            raise _corrupt(path, "not an SQLite database (corrupt, truncated or another file)")
        # A file shorter than its header says is checked by SQLite before it is opened here
        # (opening would leave -wal/-shm files beside a broken one). Shorter is not broken in
        # itself: the header counts pages a checkpoint was writing, whose committed copies are
        # still in the WAL when a full disk cut the checkpoint short.
        page_size = int.from_bytes(head[16:18], "big") if head else 0
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(head[28:32], "big") if head else 0
        if size < page_size * pages:
            healthy, said = sqlite_verdict(path)
            if healthy is False:
                raise _corrupt(
                    path,
                    f"corrupt or truncated ({size} bytes, its header says {page_size * pages}; "
                    f"SQLite's quick_check: {said})",
                )
    try:
        db = sqlite3.connect(
            path, isolation_level=None, timeout=lock_timeout(BUSY_TIMEOUT), factory=Connection
        )
    except sqlite3.Error as exc:
        raise translate(path, exc) from exc
    assert isinstance(db, Connection)
    db.hub_path = path
    return db
