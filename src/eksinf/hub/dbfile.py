"""Opening the local hub's SQLite file, and turning what can go wrong with it into errors.

A hub database that is empty, truncated, corrupt, locked by another process or read-only is an
environment problem (exit 4) naming the file and what to do, never a traceback. An existing
empty (0-byte) file is refused rather than silently treated as a new hub: eksinf never wrote
one, so its history went somewhere, and publishing into a fresh hub would collide with the
immutable tags the lost one already pushed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from ..stacklock import LOCK_TIMEOUT_ENV, lock_timeout
from .protocol import Unavailable

SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT = 30.0  # seconds SQLite waits for another process's write transaction


def _corrupt(path: Path, what: str) -> Unavailable:
    return Unavailable(
        f"hub database {path} is {what}",
        f"Restore it from a backup; or, to start a new hub (its history is lost), move it aside "
        f"(mv {path} {path}.broken) and run `eksinf sandbox up` or `eksinf install`.",
    )


def translate(path: Path, exc: sqlite3.Error) -> Unavailable:
    """The environment error for an SQLite failure on the hub file."""
    text = str(exc)
    low = text.lower()
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
    return _corrupt(path, f"corrupt or truncated ({text})")


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
        if not head:
            raise _corrupt(path, "an empty file (0 bytes), not a hub eksinf wrote")
        if not head.startswith(SQLITE_HEADER) or len(head) < 100:
            raise _corrupt(path, "not an SQLite database (corrupt, truncated or another file)")
        # checked before SQLite opens it, which would leave -wal/-shm files beside a broken one
        page_size = int.from_bytes(head[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(head[28:32], "big")
        if size < page_size * pages:
            raise _corrupt(
                path, f"corrupt or truncated ({size} bytes; its header says {page_size * pages})"
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
