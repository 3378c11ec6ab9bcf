"""The user's cache directory, and its content-addressed store of derived data.

One root (`$EKSINF_CACHE_DIR`, else `$XDG_CACHE_HOME/eksinf`, else `~/.cache/eksinf`) holds
every cache: chart archives and upstream manifests by digest, price lists, and the `derived`
store below.

The derived store keeps results of pure functions (a parse, a serialisation, parsed CEL rules,
a whole render) under the sha256 of everything they depend on, so an entry can make eksinf
faster, never different: a key names its input exactly, and a missing, unreadable, corrupt or
forged entry is recomputed. Entries are plain data (JSON or text), never a format that builds
objects. A cache folder is shared with whatever restored it (a CI cache step, a copied home), so
nothing in it is trusted:

- the root must be a real folder (not a link) the user owns, not writable by group or others;
  eksinf creates it 0700 (and tightens a merely readable one to 0700). Folders inside it and
  entries are refused unless they are the user's, not links, and private (entries 0600);
- every entry carries an HMAC-SHA256 over its space, key and bytes under a per-user random key
  kept outside the cache (`$EKSINF_CACHE_KEY`, else `$XDG_STATE_HOME/eksinf/cache.key`, else
  `~/.local/state/eksinf/cache.key`; 0600 in a 0700 folder). An entry that fails it was not
  written by this user's eksinf and is recomputed.

A root or key that fails these rules turns the store off for the run, with one warning line.
`EKSINF_NO_CACHE=1` turns the store off too, as `verify --full` does for its run, to check a
fresh computation end to end. Writes are atomic and best-effort (an unwritable cache costs
time, never a failure), and each space is bounded: past MAX_ENTRIES (or the space's own bound in
SPACE_ENTRIES) the least recently written entries go.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import stat
import sys
import time
from pathlib import Path

from eksinf.core.fdread import read_fd

# typing is not imported: `eksinf version` reads the cache, and pays for every import here
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

CACHE_ENV = "EKSINF_CACHE_DIR"
NO_CACHE_ENV = "EKSINF_NO_CACHE"
KEY_ENV = "EKSINF_CACHE_KEY"  # the key file's path
MAX_ENTRIES = 512  # per space; a stack's units and inputs need a few dozen
# Spaces of one small entry per document: a stack's validation and its releases check a few
# hundred documents, and each sandbox's releases are documents of their own.
SPACE_ENTRIES = {"verdicts": 4096}
MAX_ENTRY_BYTES = 64 << 20  # nothing derived from one stack file comes near this
KEY_BYTES = 32
MAC_BYTES = 32  # HMAC-SHA256, stored before the entry's bytes
_MAC_CONTEXT = b"eksinf derived entry 1\0"
_PRIVATE = 0o077  # group and other bits: none on anything eksinf trusts
SETTLED_NS = 2_000_000_000  # a module written this recently is not trusted by its stat alone


def root() -> Path:
    base = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "eksinf"
    )
    return Path(base)


def key_file() -> Path:
    explicit = os.environ.get(KEY_ENV)
    if explicit:
        return Path(explicit)
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(state) / "eksinf" / "cache.key"


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


# ---- trust: the root, the key, each entry ----------------------------------------------------

_warned: set[str] = set()


def _warn(kind: str, what: str) -> None:
    """One line on stderr, once per process per kind (the folder, the key, entries): the cache
    costs time, never output, and a folder of a thousand forged entries says so once."""
    if kind not in _warned:
        _warned.add(kind)
        print(f"eksinf: warning: {what}; derived data is recomputed", file=sys.stderr)


def _private_folder(path: Path, create: bool) -> str | None:
    """Why `path` is not a folder only this user can change (None when it is one). Created 0700
    when missing and `create`; one the user owns that others may only read is tightened."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            return "missing"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass  # another eksinf made it meanwhile: check what is there now
        except OSError as exc:
            return f"cannot create it ({exc.strerror})"
        try:
            st = os.lstat(path)
        except OSError as exc:
            return f"cannot read it ({exc.strerror})"
    except OSError as exc:
        return f"cannot read it ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a folder"
    if st.st_uid != os.geteuid():
        return f"it belongs to uid {st.st_uid}, not to you"
    if st.st_mode & 0o022:
        return f"others may write in it (mode {stat.S_IMODE(st.st_mode):o}; make it 0700)"
    if st.st_mode & _PRIVATE:
        try:
            os.chmod(path, 0o700, follow_symlinks=False)
        except OSError as exc:
            return f"cannot make it private ({exc.strerror})"
    return None


def _read_key(path: Path) -> bytes | str:
    """The key's bytes, or why the file cannot be trusted."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return exc.strerror or "cannot open it"
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & _PRIVATE:
            return "it is not a private file of yours (0600)"
        data = fh.read(KEY_BYTES + 1)
    return data if len(data) == KEY_BYTES else "it does not hold a 32-byte key"


def _make_key(path: Path) -> None:
    """A new random key, published whole: written to a temp file, then linked into place, so a
    concurrent eksinf sees no key or the whole key, and the first one made wins."""
    import tempfile  # only writes need it (~8 ms to import, which a warm read never pays)

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".cache.key.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:  # mkstemp makes it 0600
            fh.write(os.urandom(KEY_BYTES))
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        os.unlink(tmp)


class _Trust:
    """The store's folder and key for this run, and what this run knows of each space. A plain
    class: `eksinf version` reads the cache, and the dataclasses module alone costs it ~10 ms
    of imports."""

    __slots__ = ("folder", "secret", "spaces", "counts")

    def __init__(self, secret: bytes | None, folder: Path) -> None:
        self.secret = secret  # None: the store is off for this run
        self.folder = folder
        # Space folders found private this run. The root was checked private (0700, the
        # user's), so no one else can replace a folder inside it meanwhile: checking again
        # before every write (a cold render makes ~70) guards against nothing, and every entry
        # read is still checked on its own (`_read_private`).
        self.spaces: set[str] = set()
        # Entries each space holds, as far as this run knows (see `_bound`).
        self.counts: dict[str, int] = {}


# What root() and key_file() read: the trust of a run is looked up by these values, which
# cost less to read than the two paths (~10 us) on each of a cold render's ~150 accesses.
_PLACES = (CACHE_ENV, "XDG_CACHE_HOME", KEY_ENV, "XDG_STATE_HOME", "HOME")


@functools.cache
def _trust(places: tuple[str | None, ...]) -> _Trust:
    root_path, key_path = root(), key_file()  # what `places` names, read just now
    folder = root_path / "derived"
    why = _private_folder(root_path, create=True) or _private_folder(folder, create=True)
    if why is not None:
        _warn("folder", f"cache folder {root_path} refused: {why}")
        return _Trust(None, folder)
    why = _private_folder(key_path.parent, create=True)
    if why is None:
        secret = _read_key(key_path)
        if isinstance(secret, str) and not key_path.exists():
            try:
                _make_key(key_path)
            except OSError as exc:
                secret = f"cannot create it ({exc.strerror})"
            else:
                secret = _read_key(key_path)
        if isinstance(secret, bytes):
            return _Trust(secret, folder)
        why = secret
    _warn("key", f"cache key {key_path} refused: {why} (set {KEY_ENV} to move it)")
    return _Trust(None, folder)


def _trusted() -> _Trust | None:
    trust = _trust(tuple(map(os.environ.get, _PLACES)))
    return trust if trust.secret is not None else None


def _read_private(path: Path) -> tuple[bytes, bytes] | None:
    """The MAC and the bytes of the entry at `path` if it is a regular file of the user's that
    only the user may read (None otherwise), read without following a link and at most one
    entry's worth."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & _PRIVATE:
            return None
        mac = os.read(fd, MAC_BYTES)
        # the rest in one read, as big as the file, and handed on as read (a whole render is
        # ~3.5 MB, and every copy of it costs a warm run time); more only if it grew meanwhile
        return mac, read_fd(fd, max(st.st_size - MAC_BYTES, 0) + 1, MAX_ENTRY_BYTES + 1)
    finally:
        os.close(fd)


def _mac(secret: bytes, space: str, entry_key: str, *data: bytes | memoryview) -> bytes:
    """The MAC of an entry whose bytes are `data`, one part after the other."""
    head = _MAC_CONTEXT + space.encode() + b"\0" + entry_key.encode() + b"\0"
    mac = hmac.new(secret, head, hashlib.sha256)
    for part in data:
        mac.update(part)  # not head + data: a copy of a large entry
    return mac.digest()


def _space(trust: _Trust, space: str, create: bool) -> Path | None:
    folder = trust.folder / space
    if space in trust.spaces:
        return folder
    if _private_folder(folder, create) is not None:
        return None
    trust.spaces.add(space)
    return folder


def get(space: str, entry_key: str) -> bytes | None:
    """The bytes stored under (space, key) by this user's eksinf, or None: missing, unreadable,
    not a private regular file of the user's, or failing its HMAC (then recomputed)."""
    return read_record(space, entry_key) if enabled() else None


def put(space: str, entry_key: str, data: bytes) -> None:
    if enabled():
        write_record(space, entry_key, data)


def put_parts(space: str, entry_key: str, parts: Sequence[bytes]) -> None:
    """`put` of the bytes `parts` make one after the other, never joined: a whole render's
    record is a JSON head and its ~3.5 MB of texts, and a joined copy of them costs a cold run
    time (the MAC is taken over the parts, and one writev writes them)."""
    if enabled():
        _write(space, entry_key, tuple(parts))


def put_many(space: str, entries: dict[str, bytes]) -> None:
    """`put` of several entries, the space pruned once after them all."""
    if not enabled() or not entries:
        return
    trust = _trusted()
    if trust is None or trust.secret is None:
        return
    folder = _space(trust, space, create=True)
    if folder is None:
        return
    try:
        for entry_key, data in entries.items():
            if len(data) <= MAX_ENTRY_BYTES:
                write_private(folder / entry_key, _mac(trust.secret, space, entry_key, data), data)
        _bound(trust, space, folder, len(entries))
    except OSError as exc:
        _unwritten(trust, space, exc)


def read_record(space: str, entry_key: str) -> bytes | None:
    """`get`, also when the store is off: for records of what earlier runs saw (the guard's
    determinism reference), which make a check stricter and are kept through `verify --full`."""
    return _read_many(space, [entry_key]).get(entry_key)


def get_many(space: str, entry_keys: list[str]) -> dict[str, bytes]:
    """`get` of several entries (the folder and key checked once): key -> bytes for each entry
    found and trusted; the others are missing from the answer."""
    return _read_many(space, entry_keys) if enabled() and entry_keys else {}


def _read_many(space: str, entry_keys: list[str]) -> dict[str, bytes]:
    trust = _trusted()
    if trust is None or trust.secret is None:
        return {}
    folder = _space(trust, space, create=False)
    if folder is None:
        return {}
    found = {}
    for entry_key in entry_keys:
        try:
            read = _read_private(folder / entry_key)
        except OSError:
            continue
        if read is None:
            _warn("entry", f"cache entry {folder / entry_key} refused: not a private file of yours")
            continue
        mac, data = read
        if len(mac) < MAC_BYTES or len(data) > MAX_ENTRY_BYTES:
            continue
        if not hmac.compare_digest(mac, _mac(trust.secret, space, entry_key, data)):
            _warn("entry", f"cache entry {folder / entry_key} refused: it fails its HMAC check")
            continue
        found[entry_key] = data
    return found


def write_record(space: str, entry_key: str, data: bytes) -> None:
    _write(space, entry_key, (data,))


def _write(space: str, entry_key: str, parts: tuple[bytes, ...]) -> None:
    trust = _trusted()
    if trust is None or trust.secret is None or sum(map(len, parts)) > MAX_ENTRY_BYTES:
        return
    folder = _space(trust, space, create=True)
    if folder is None:
        return
    mac = _mac(trust.secret, space, entry_key, *parts)
    try:
        write_private(folder / entry_key, mac, *parts)
        _bound(trust, space, folder, 1)
    except OSError as exc:
        _unwritten(trust, space, exc)


def _unwritten(trust: _Trust, space: str, exc: OSError) -> None:
    """An entry that could not be written costs time, never a failure. A space folder removed
    meanwhile is checked (and made) again on its next write."""
    if isinstance(exc, FileNotFoundError):
        trust.spaces.discard(space)
        trust.counts.pop(space, None)


def write_private(path: Path, *parts: bytes) -> None:
    """Write `parts`, one after the other, atomically as a 0600 file: a new temporary file
    (O_EXCL, never through a link, 0600 as mkstemp makes it), then renamed over `path`.

    Not fsync'ed, as ever: an entry is only a cache, so one lost in a crash is recomputed, and
    the rename means a reader sees the whole entry or none (a torn one would fail its HMAC).
    Made here rather than with tempfile.mkstemp, and written with one writev rather than
    through a file object after joining the MAC and the data (a copy of a 3.5 MB render):
    each write of a cold render's ~70 costs less that way."""
    tmp = f"{path.parent}/.{path.name}.{os.urandom(6).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            left = sum(len(p) for p in parts)
            while left:  # writev may write less than asked (a signal, a full disk)
                done = os.writev(fd, parts)
                left -= done
                parts = _after(parts, done)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _after(parts: tuple[bytes, ...], done: int) -> tuple[bytes, ...]:
    """What is left of `parts` once their first `done` bytes are written."""
    rest = []
    for part in parts:
        if done >= len(part):
            done -= len(part)
            continue
        rest.append(part[done:])
        done = 0
    return tuple(rest)


def _bound(trust: _Trust, space: str, folder: Path, written: int) -> None:
    """Keep `space` within its bound after `written` more entries. The folder is listed on the
    space's first write of the run, and again only when the entries counted since (each write
    counted as new, an overwrite too) pass the bound: a cold render's 60 writes to one space
    list it once, not 60 times. A space over its bound is pruned to a sixteenth below it, so a
    full space is not listed again on each of the next writes."""
    bound = SPACE_ENTRIES.get(space, MAX_ENTRIES)
    count = trust.counts.get(space)
    if count is not None and count + written <= bound:
        trust.counts[space] = count + written
        return
    trust.counts[space] = _prune(folder, bound, bound - bound // 16)


def _prune(folder: Path, bound: int, keep: int) -> int:
    """Past `bound` entries, drop the least recently written down to `keep`; how many are left."""
    # Names only (no stat) until the space is over its bound.
    with os.scandir(folder) as found:
        names = [e.name for e in found if not e.name.startswith(".") and e.is_file()]
    if len(names) <= bound:
        return len(names)
    entries = sorted((folder / n for n in names), key=_written_at)
    for old in entries[: len(entries) - keep]:
        old.unlink(missing_ok=True)
    return keep


def _written_at(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed meanwhile by another eksinf: oldest, so it is dropped again
        return 0.0


class Texts:
    """A record's long texts (a render's units and chart outputs), kept beside its JSON head
    rather than in it, as UTF-8 one after the other: the head says where each one is by its
    length, in the order it was written. Reading ~3.5 MB of YAML back through JSON's string
    escapes costs several times slicing it out of the bytes, and writing it costs an escaped
    copy. An entry is the head, a newline (JSON escapes every newline inside it), the texts:
    `parts` to write with `put_parts`, `split` to read."""

    def __init__(self, data: bytes | memoryview = b"") -> None:
        self.parts: list[bytes] = []
        self.data = memoryview(data)
        self.at = 0

    def put(self, text: str) -> int:
        raw = text.encode("utf-8")
        self.parts.append(raw)
        return len(raw)

    def take(self, size: int) -> str:
        if not isinstance(size, int) or size < 0 or self.at + size > len(self.data):
            raise ValueError("a text past the record's end")
        text = str(self.data[self.at : self.at + size], "utf-8")
        self.at += size
        return text

    def entry(self, head: bytes) -> tuple[bytes, ...]:
        """The entry's parts: `head` (JSON, no newline in it), a newline, the texts."""
        return (head, b"\n", *self.parts)

    @classmethod
    def split(cls, data: bytes) -> tuple[bytes, Texts]:
        """An entry's head, and its texts to take."""
        end = data.find(b"\n")
        if end < 0:
            raise ValueError("a record without its head's end")
        return data[:end], cls(memoryview(data)[end + 1 :])  # the texts are not copied

    def done(self) -> bool:
        """Whether every text was taken (an entry with bytes left over is not the one written)."""
        return self.at == len(self.data)


def passed(check: str, *inputs: bytes) -> bool:
    """Whether `check` passed before on exactly these inputs (a pure check: that units parsed,
    say), so a run can skip it and the library it needs."""
    return get("checks", key(check.encode(), *inputs)) is not None


def record_pass(check: str, *inputs: bytes) -> None:
    put("checks", key(check.encode(), *inputs), b"")


def _modules(package: str) -> list[tuple[str, os.stat_result]]:
    """Every module file under `package`: (its posix path inside it, its stat), in path order.
    Walked with scandir, each path built as it goes (os.walk and a relpath per file cost a run
    on an empty cache ~0.7 ms more); a link to a folder is not followed, as os.walk does not."""
    found: list[tuple[str, os.stat_result]] = []

    def walk(folder: str, prefix: str) -> None:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir():
                    if entry.name != "__pycache__" and not entry.is_symlink():
                        walk(entry.path, f"{prefix}{entry.name}/")
                elif entry.name.endswith(".py"):
                    found.append((prefix + entry.name, entry.stat()))

    walk(package, "")
    return sorted(found, key=lambda f: f[0].split("/"))


def _module_bytes(path: str, size: int) -> bytes:
    """A module's bytes, whole (a file object per module costs an empty cache's run ~0.5 ms
    more over eksinf's ~180)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return read_fd(fd, size + 1, sys.maxsize)
    finally:
        os.close(fd)


@functools.cache
def code_digest() -> str:
    """sha256 over eksinf's own source files: part of the key of anything eksinf's code decides
    (a whole render), so an upgraded or edited eksinf never serves an older one's output.

    Reading every module costs a run ~4 ms, so the digest is kept under the modules' names,
    sizes, inodes and modification and change times: writing a file changes its change time,
    which no one can set back (Python's own bytecode check trusts less: size and mtime). A run
    whose modules are as they were, and settled (see package_digest), reads none of them."""
    return package_digest(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def package_digest(package: str) -> str:
    """sha256 over the module files under `package` (their paths and bytes), kept under their
    stat as `code_digest` says."""
    modules = _modules(package)
    signature = key(
        b"eksinf modules 1",
        *(
            f"{rel}\0{st.st_size}\0{st.st_ino}\0{st.st_mtime_ns}\0{st.st_ctime_ns}".encode()
            for rel, st in modules
        ),
    )
    known = get("code", signature)
    if known is not None and len(known) == 64:
        return known.decode("ascii")
    digest = hashlib.sha256()
    for rel, st in modules:
        digest.update(rel.encode() + b"\0")
        digest.update(_module_bytes(f"{package}/{rel}", st.st_size))
        digest.update(b"\0")
    found = digest.hexdigest()
    # Kept only when every module was last written a while ago: a file system stamps times in
    # ticks, and a second write in the tick of the first would leave its stat as it was (git's
    # "racily clean" index entries). Any later write is stamped in a later tick.
    settled = time.time_ns() - SETTLED_NS
    if all(st.st_ctime_ns < settled and st.st_mtime_ns < settled for _, st in modules):
        put("code", signature, found.encode())
    return found
