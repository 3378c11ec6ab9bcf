"""The user's cache directory, and its content-addressed store of derived data.

One root (`$EKSINF_CACHE_DIR`, else `$XDG_CACHE_HOME/eksinf`, else `~/.cache/eksinf`) holds
every cache: chart archives and upstream manifests by digest, price lists, parsed CEL rules,
render records, and the `derived` store below.

The derived store keeps results of pure functions (a parse, a serialisation) under the sha256 of
everything they depend on, so an entry can make eksinf faster, never different: a key names its
input exactly, and a missing, unreadable or corrupt entry is recomputed. `EKSINF_NO_CACHE=1`
turns the store off, as `verify --full` does for its run, to check a fresh computation end to
end. Writes are
atomic and best-effort (an unwritable cache costs time, never a failure), and each space is
bounded: past MAX_ENTRIES the least recently written entries go.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
from pathlib import Path

from .atomic import write_file

CACHE_ENV = "EKSINF_CACHE_DIR"
NO_CACHE_ENV = "EKSINF_NO_CACHE"
MAX_ENTRIES = 512  # per space; a stack's units and inputs need a few dozen
MAX_ENTRY_BYTES = 64 << 20  # nothing derived from one stack file comes near this


def root() -> Path:
    base = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "eksinf"
    )
    return Path(base)


_off = False  # set by `disable()` for the rest of this process


def enabled() -> bool:
    return not _off and os.environ.get(NO_CACHE_ENV, "") in ("", "0")


def disable() -> None:
    """No derived data read or written for the rest of this run (`verify --full`)."""
    global _off
    _off = True


def key(*parts: bytes) -> str:
    """sha256 over length-prefixed parts, so no two part lists give the same key."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def _entry(space: str, entry_key: str) -> Path:
    return root() / "derived" / space / entry_key


def get(space: str, entry_key: str) -> bytes | None:
    if not enabled():
        return None
    try:
        with _entry(space, entry_key).open("rb") as fh:
            data = fh.read(MAX_ENTRY_BYTES + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_ENTRY_BYTES else None  # not one eksinf wrote: recompute


def put(space: str, entry_key: str, data: bytes) -> None:
    if not enabled() or len(data) > MAX_ENTRY_BYTES:
        return
    path = _entry(space, entry_key)
    with contextlib.suppress(OSError):
        write_file(path, data)
        _prune(path.parent)


def _prune(folder: Path) -> None:
    # Names only (no stat) until the space is over its bound: this runs after every write.
    with os.scandir(folder) as found:
        names = [e.name for e in found if not e.name.startswith(".") and e.is_file()]
    if len(names) <= MAX_ENTRIES:
        return
    entries = sorted((folder / n for n in names), key=_written_at)
    for old in entries[: len(entries) - MAX_ENTRIES]:
        old.unlink(missing_ok=True)


def _written_at(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed meanwhile by another eksinf: oldest, so it is dropped again
        return 0.0


def passed(check: str, *inputs: bytes) -> bool:
    """Whether `check` passed before on exactly these inputs (a pure check: schema validation of
    a text, say), so a run can skip it and the library it needs."""
    return get("checks", key(check.encode(), *inputs)) is not None


def record_pass(check: str, *inputs: bytes) -> None:
    put("checks", key(check.encode(), *inputs), b"")


@functools.cache
def code_digest() -> str:
    """sha256 over eksinf's own source files: part of the key of anything eksinf's code decides
    (a whole render), so an upgraded or edited eksinf never serves an older one's output."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()
