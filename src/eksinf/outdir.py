"""Folders eksinf replaces whole (configs/, every --out): who owns them, and the crash-safe swap.

A folder is replaced only if it is absent, empty, or carries eksinf's own marker from an earlier
eksinf write (`.eksinf-owned`; the stack's own configs/ is marked by render's provenance.json).
Anything else - a user's folder, the stack itself, its sources, HOME, `/` - is refused with exit 2
naming the folder and what is in it, before anything is touched. A symbolic link is never
followed when deleting: the target itself may not be a link, and the tree removal never descends
through one (shutil.rmtree's fd-based walk removes the link, not what it points at).
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from .errors import USAGE, EksinfError
from .faults import checkpoint

MARKER = ".eksinf-owned"
MARKER_TEXT = (
    "This folder was written by eksinf, which replaces it whole on its next write.\n"
    "Remove this file to stop eksinf from ever replacing the folder.\n"
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


def claim(target: Path, stack_root: Path | None = None, *, allow_configs: bool = False) -> Owned:
    """Check that eksinf may replace `target` whole; raise (exit 2) before touching anything.

    `allow_configs` lets the target be the stack's own configs/ (render's output), which is owned
    when it holds render's provenance record and is written without the marker.
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


def _remove_tree(path: Path) -> None:
    """Delete a folder eksinf built; a link in its place is removed, never followed."""
    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path)  # fd-based on Linux: never descends through a link


def recover_interrupted_swap(target: Path) -> None:
    """Finish or undo a write that a crash interrupted, so `target` is whole again."""
    new, old = _swap_paths(target)
    if not os.path.lexists(target) and old.is_dir() and not old.is_symlink():
        old.rename(target)  # crashed between the two fallback renames: put the old tree back
    for leftover in (new, old):
        if os.path.lexists(leftover):
            _remove_tree(leftover)


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE). False when unsupported."""
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
    new.mkdir(parents=True)
    return new


def replace_with(owned: Owned, staging: Path, swap_point: str, cleanup_point: str) -> None:
    """Swap a fully built staging folder in for `owned`, so a crash never leaves a mix.

    On Linux the swap is one atomic exchange of the two folders: the target is always either the
    old tree or the new one. Elsewhere it is two renames, and a crash between them leaves the old
    tree as a sibling that the next write puts back (recover_interrupted_swap).
    """
    target = owned.path
    if owned.marker:
        (staging / MARKER).write_text(MARKER_TEXT, encoding="utf-8")
    checkpoint(swap_point)
    if target.exists() and _exchange(staging, target):
        checkpoint(cleanup_point)
        _remove_tree(staging)  # it now holds the old tree
        return
    _, old = _swap_paths(target)
    if target.exists():
        target.rename(old)
    staging.rename(target)
    if os.path.lexists(old):
        _remove_tree(old)


def write_tree(owned: Owned, files: dict[str, str]) -> None:
    """Replace the owned folder with exactly `files` (plus the marker)."""
    new = staging_for(owned)
    for index, (rel, text) in enumerate(sorted(files.items())):
        dest = new / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")
        if index == len(files) // 2:
            checkpoint("render-write")
    replace_with(owned, new, "render-swap", "render-cleanup")
