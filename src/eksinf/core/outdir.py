"""Folders eksinf replaces whole (configs/, every --out): who owns them, and the crash-safe swap.

A folder is replaced only if it is absent, empty, or carries eksinf's own marker from an earlier
eksinf write (`.eksinf-owned`; the stack's own configs/ is marked by render's provenance.json).
Anything else - a user's folder, the stack itself, its sources, HOME, `/` - is refused with exit 2
naming the folder and what is in it, before anything is touched. A symbolic link is never
followed when deleting: the target itself may not be a link, and the tree removal never descends
through one (shutil.rmtree's fd-based walk removes the link, not what it points at).

The swap uses two sibling names (`.<name>.new`, `.<name>.old`). Such a folder is eksinf's only
while it carries SWAP_MARKER, written when eksinf makes it (and into the tree it swaps out); a
folder, file or link of the user's that has the name is never renamed over or deleted: the
write is refused (exit 2) naming it, before any work.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from eksinf.core import inside
from eksinf.core.faults import checkpoint
from eksinf.errors import USAGE, EksinfError, write_failure

MARKER = ".eksinf-owned"
MARKER_TEXT = (
    "This folder was written by eksinf, which replaces it whole on its next write.\n"
    "Remove this file to stop eksinf from ever replacing the folder.\n"
)
SWAP_MARKER = ".eksinf-swap"
SWAP_MARKER_TEXT = (
    "eksinf is swapping this folder in or out of place; it deletes it on its next write.\n"
)
# configs/ is committed without the marker; render's provenance record marks it instead.
RENDER_RECORD = "provenance.json"
# Stack folders that hold sources, history or state: never an output, nor anything inside them.
SOURCE_FOLDERS = (".git", "render", "src", "docs", "iam", ".eksinf")
_LISTED = 5  # entries named in a refusal


@dataclass(frozen=True)
class Owned:
    """A folder checked by `claim`: the only thing `write_tree` and `replace_with` accept."""

    path: Path
    marker: bool  # write MARKER into the new tree (every output except the stack's configs/)


def _refuse(path: Path, why: str) -> EksinfError:
    return EksinfError(
        f"refusing to replace {path}: {why}",
        hint="eksinf replaces an output folder whole; pass a new or empty folder "
        f"(or one an earlier eksinf run wrote, which holds {MARKER}).",
        exit_code=USAGE,
    )


def _contents(path: Path) -> str:
    names = sorted(os.listdir(path))
    shown = [
        n + ("/" if (path / n).is_dir() and not (path / n).is_symlink() else "") for n in names
    ]
    more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
    return ", ".join(shown[:_LISTED]) + more


def _within(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def claim(
    target: Path,
    stack_root: Path | None = None,
    *,
    allow_configs: bool = False,
    swap: bool = True,
) -> Owned:
    """Check that eksinf may replace `target` whole; raise (exit 2) before touching anything.

    `allow_configs` lets the target be the stack's own configs/ (render's output), which is owned
    when it holds render's provenance record and is written without the marker. `swap` (every
    caller that replaces the folder, i.e. all but `bundle --out`, which adds files) also checks
    that the swap names beside it are free or eksinf's own.
    """
    path = Path(os.path.abspath(target))
    real = path.resolve()
    home = Path.home().resolve()
    if path.is_symlink():
        raise _refuse(
            path,
            f"it is a symbolic link (to {os.readlink(path)}); eksinf never writes or "
            "deletes through a link",
        )
    if real == Path(real.anchor):
        raise _refuse(path, "it is the filesystem root")
    configs = False
    if stack_root is not None:
        root = stack_root.resolve()
        if root.is_relative_to(real):
            raise _refuse(path, "it is the stack or a folder holding it")
        for name in SOURCE_FOLDERS:
            if _within(real, root / name):
                raise _refuse(path, f"it is inside the stack's {name}/ (sources, history or state)")
        configs = real == root / "configs"
        if _within(real, root / "configs") and not (configs and allow_configs):
            raise _refuse(path, "it is inside the stack's committed configs/ (render writes it)")
    if home.is_relative_to(real):
        raise _refuse(path, "it is your home folder or holds it")
    if swap:
        for sibling in _swap_paths(path):
            _check_swap_name(sibling)
    if not os.path.lexists(path):
        return Owned(path, marker=not configs)
    if not path.is_dir():
        raise _refuse(path, "it exists and is not a folder")
    if not os.listdir(path) or _is_regular(path / MARKER):
        return Owned(path, marker=not configs)
    if configs and _is_regular(path / RENDER_RECORD):
        return Owned(path, marker=False)
    raise _refuse(path, f"it is not empty and eksinf did not write it (holds {_contents(path)})")


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


# ---- the crash-safe swap ------------------------------------------------------------------


def _swap_paths(target: Path) -> tuple[Path, Path]:
    return target.parent / f".{target.name}.new", target.parent / f".{target.name}.old"


def _is_swap_folder(path: Path) -> bool:
    """A real folder (not a link) holding eksinf's swap marker: one eksinf made for a swap."""
    try:
        is_dir = stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False
    return is_dir and _is_regular(path / SWAP_MARKER)


def _check_swap_name(path: Path) -> None:
    """Refuse (exit 2) when something eksinf did not make holds a name its swap uses."""
    if not os.path.lexists(path) or _is_swap_folder(path):
        return
    if path.is_symlink():
        held = f"a symbolic link (to {os.readlink(path)})"
    elif path.is_dir():
        held = "a folder without eksinf's swap marker"
    else:
        held = "a file"
    raise EksinfError(
        f"refusing to write beside {path}: it is {held}, and eksinf uses that name for its "
        "crash-safe swap; it leaves what it did not make alone",
        hint=f"Move or rename {path} (it is yours: eksinf never made it), then run again.",
        exit_code=USAGE,
    )


def _mark_swap(folder: Path) -> None:
    (folder / SWAP_MARKER).write_text(SWAP_MARKER_TEXT, encoding="utf-8")


def _remove_swap_folder(path: Path) -> None:
    """Delete a swap folder eksinf made; anything else at that name is refused, never touched."""
    _check_swap_name(path)
    if os.path.lexists(path):
        shutil.rmtree(path)  # fd-based on Linux: never descends through a link


def recover_interrupted_swap(target: Path) -> None:
    """Finish or undo a write that a crash interrupted, so `target` is whole again. Only swap
    folders eksinf marked are touched; anything else at those names is refused (exit 2)."""
    new, old = _swap_paths(target)
    for leftover in (new, old):
        _check_swap_name(leftover)
    if not os.path.lexists(target) and _is_swap_folder(old):
        old.rename(target)  # crashed between the two fallback renames: put the old tree back
    for leftover in (new, old):
        _remove_swap_folder(leftover)
    if _is_regular(target / SWAP_MARKER):  # crashed after the swap, before unmarking the tree
        (target / SWAP_MARKER).unlink()


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE). False when unsupported."""
    import ctypes  # here: only a write swaps folders, and every render imports this module

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False  # the filesystem or kernel cannot exchange: use the two-rename fallback
    raise OSError(err, os.strerror(err), str(b))


def staging_for(owned: Owned) -> Path:
    """A fresh, empty staging folder beside the target (after finishing any interrupted swap)."""
    recover_interrupted_swap(owned.path)
    new, _ = _swap_paths(owned.path)
    with _undone_on_failure(owned, new):
        new.parent.mkdir(parents=True, exist_ok=True)
        new.mkdir()
        _mark_swap(new)
    return new


def replace_with(owned: Owned, staging: Path, swap_point: str, cleanup_point: str) -> None:
    """Swap a fully built staging folder in for `owned`, so a crash never leaves a mix.

    On Linux the swap is one atomic exchange of the two folders: the target is always either the
    old tree or the new one. Elsewhere it is two renames, and a crash between them leaves the old
    tree as a sibling that the next write puts back (recover_interrupted_swap). A write the disk
    or filesystem refuses (full, read-only, not permitted) is exit 4, with the target as it was
    and the staging folder removed.
    """
    with _undone_on_failure(owned, staging):
        _swap(owned, staging, swap_point, cleanup_point)


@contextlib.contextmanager
def _undone_on_failure(owned: Owned, staging: Path) -> Iterator[None]:
    """Remove eksinf's staging folder and its marker in the target when building or swapping
    fails, and turn a refused write (disk full, read-only, not permitted) into exit 4."""
    try:
        yield
    except BaseException as exc:
        with contextlib.suppress(OSError):
            if _is_swap_folder(staging):
                shutil.rmtree(staging)
            if _is_regular(owned.path / SWAP_MARKER):
                (owned.path / SWAP_MARKER).unlink()
        refused = write_failure(exc, owned.path, undone=True) if isinstance(exc, OSError) else None
        if refused is not None:
            raise refused from exc
        raise


def _swap(owned: Owned, staging: Path, swap_point: str, cleanup_point: str) -> None:
    target = owned.path
    if owned.marker:
        (staging / MARKER).write_text(MARKER_TEXT, encoding="utf-8")
    checkpoint(swap_point)
    if target.exists():
        # The old tree is a swap folder from here on, wherever a crash leaves it; a crash before
        # the swap leaves only this marker in the target, which the next write removes.
        _mark_swap(target)
    if target.exists() and _exchange(staging, target):
        (target / SWAP_MARKER).unlink()
        checkpoint(cleanup_point)
        _remove_swap_folder(staging)  # it now holds the old tree
        return
    _, old = _swap_paths(target)
    _check_swap_name(old)
    if target.exists():
        target.rename(old)
    staging.rename(target)
    (target / SWAP_MARKER).unlink()
    if os.path.lexists(old):
        _remove_swap_folder(old)


def write_tree(owned: Owned, files: dict[str, str]) -> None:
    """Replace the owned folder with exactly `files` (plus the marker). A folder that already
    holds exactly that (the same files with the same bytes, no other file or folder) is left as
    it is once any interrupted swap is finished: a rerun with nothing changed rewrites no file
    and removes no tree, which cost more than the comparison."""
    recover_interrupted_swap(owned.path)
    if _holds_exactly(owned, files):
        return
    new = staging_for(owned)
    with _undone_on_failure(owned, new):
        for index, (rel, text) in enumerate(sorted(files.items())):
            dest = new / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text, encoding="utf-8")
            if index == len(files) // 2:
                checkpoint("render-write")
        _swap(owned, new, "render-swap", "render-cleanup")


def _holds_exactly(owned: Owned, files: dict[str, str]) -> bool:
    """Whether the owned folder is already what `write_tree` would make of `files`. Anything
    unusual in it (a link, a special file, a file with more than one name, a tree over the
    walk's bounds) answers no: the rebuild replaces it whole, as it always did."""
    expected = {rel: text.encode("utf-8") for rel, text in files.items()}
    if owned.marker:
        expected[MARKER] = MARKER_TEXT.encode("utf-8")
    root = owned.path
    try:
        found, folders = inside.tree_under(root)
        if sorted(p.relative_to(root).as_posix() for p in found) != sorted(expected):
            return False
        wanted = {parent.as_posix() for rel in expected for parent in Path(rel).parents}
        if {p.relative_to(root).as_posix() for p in folders} != wanted - {"."}:
            return False
        return all(
            inside.read_bytes(p, root) == expected[p.relative_to(root).as_posix()] for p in found
        )
    except (EksinfError, OSError):
        return False
