"""Reading inputs without leaving the stack.

Every file eksinf reads to render, verify, bundle, upload or link must be a regular file inside
its folder: a symbolic link anywhere on the way (a linked component folder, a linked unit in
render/ or configs/, a linked values file) or a path that resolves outside the folder (`values:
../../../../etc/passwd`) is an input error (exit 3) naming the file and where it points, so an
outside file (a credentials file, /etc/passwd) never reaches configs/, a bundle, the hub or a CI
log. Files are opened with O_NOFOLLOW after the check, so a link swapped in meanwhile fails too.

Only regular files are inputs: a FIFO, a device or a socket is refused (opened non-blocking, so a
FIFO never hangs the run), and so is a file with more than one hard link, which, like a symbolic
link, can make an outside file (a key, /etc/shadow's neighbour) look like part of the stack.

Walks are iterative and bounded (entries and depth), and each file is capped in size.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from eksinf.core.fdread import read_fd
from eksinf.errors import CONTRACT, EksinfError

MAX_FILE_BYTES = 16 << 20  # the largest rendered unit (a CRD bundle) is ~2 MiB
MAX_ENTRIES = 20_000  # files and folders in one walked tree
MAX_DEPTH = 16


def _label(path: Path, base: Path | None) -> str:
    if base is not None and path.is_relative_to(base):
        return path.relative_to(base).as_posix()
    return str(path)


def _link_error(link: Path, base: Path | None) -> EksinfError:
    return EksinfError(
        f"{_label(link, base)}: is a symbolic link (to {os.readlink(link)}); eksinf reads only "
        "regular files inside the stack",
        hint="Replace the link with the file itself (a link could carry an outside file into "
        "configs/, a bundle or the hub).",
        exit_code=CONTRACT,
    )


def check(path: Path, folder: Path, base: Path | None = None, what: str = "file") -> Path:
    """Return `path` (absolute, normalised) if it lies inside `folder` with no link on the way.

    `base` (usually the stack root) only shortens names in messages.
    """
    # on strings, not Path objects: a render checks ~120 paths, and building a Path for every
    # step of each cost more than the lstat calls themselves
    top = os.path.abspath(folder)
    full = os.path.normpath(os.path.join(top, path))
    prefix = top if top.endswith("/") else top + "/"
    if full != top and not full.startswith(prefix):
        folder = Path(top)
        raise EksinfError(
            f"{_label(Path(os.path.abspath(folder / path)), base)}: {what} resolves outside "
            f"{_label(folder, base)}/ (to {full})",
            hint=f"Keep every {what} inside {_label(folder, base)}/.",
            exit_code=CONTRACT,
        )
    current = top
    for part in full[len(prefix) :].split("/") if full != top else ():
        current = os.path.join(current, part)
        if _is_link(current):
            raise _link_error(Path(current), base)
    return Path(full)


def _is_link(path: str) -> bool:
    """`Path.is_symlink`: a path that does not exist (or cannot, under a file) is no link;
    any other failure to lstat it (a folder this user may not search) is raised."""
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError as exc:
        if exc.errno in _NO_SUCH_PATH:
            return False
        raise
    except ValueError:  # a NUL byte in the name
        return False


_NO_SUCH_PATH = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)  # as pathlib ignores


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def _special_error(label: str, mode: int) -> EksinfError:
    return EksinfError(
        f"{label}: is {_kind(mode)}; eksinf reads only regular files",
        hint="Replace it with a regular file holding the content.",
        exit_code=CONTRACT,
    )


def read_bytes(path: Path, folder: Path, base: Path | None = None, what: str = "file") -> bytes:
    """The bytes of a regular file inside `folder` (see `check`) with one hard link, at most
    MAX_FILE_BYTES."""
    full = check(path, folder, base, what)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat below refuses it
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise EksinfError(
            f"{_label(full, base)}: cannot read: {exc.strerror}", exit_code=CONTRACT
        ) from exc
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):  # refused as opening it as a file object always refused it
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(full))
        if not stat.S_ISREG(st.st_mode):
            raise _special_error(_label(full, base), st.st_mode)
        if st.st_nlink > 1:
            raise EksinfError(
                f"{_label(full, base)}: has {st.st_nlink} hard links; eksinf reads only files "
                "that exist once",
                hint="Replace it with a copy (`cp --remove-destination`); a hard link can "
                "carry an outside file into configs/, a bundle or the hub.",
                exit_code=CONTRACT,
            )
        if st.st_size > MAX_FILE_BYTES:
            raise _too_large(_label(full, base), st.st_size)
        data = read_fd(fd, st.st_size + 1, MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise _too_large(_label(full, base), len(data))
    return data


def _too_large(label: str, size: int) -> EksinfError:
    return EksinfError(
        f"{label}: {size} bytes, over the {MAX_FILE_BYTES >> 20} MiB limit for one file",
        hint="Split the file; no unit or values file of a real stack comes near this size.",
        exit_code=CONTRACT,
    )


def files_under(folder: Path, base: Path | None = None, *, recursive: bool = True) -> list[Path]:
    """The regular files under `folder`, sorted; a link anywhere (the folder itself included)
    is refused, and so is a tree deeper than MAX_DEPTH or larger than MAX_ENTRIES."""
    return tree_under(folder, base, recursive=recursive)[0]


def tree_under(
    folder: Path, base: Path | None = None, *, recursive: bool = True
) -> tuple[list[Path], list[Path]]:
    """(the regular files, the folders) under `folder`, each sorted, bounded and refusing links
    as `files_under` says."""
    folder = Path(os.path.abspath(folder))
    if folder.is_symlink():
        raise _link_error(folder, base)
    if not folder.is_dir():
        return [], []
    found: list[Path] = []
    folders: list[Path] = []
    pending: list[tuple[Path, int]] = [(folder, 0)]
    seen = 0
    while pending:
        current, depth = pending.pop()
        with os.scandir(current) as entries:
            for entry in entries:
                seen += 1
                if seen > MAX_ENTRIES:
                    raise EksinfError(
                        f"{_label(folder, base)}: more than {MAX_ENTRIES} entries",
                        hint="A stack folder this large is not a stack; check the path.",
                        exit_code=CONTRACT,
                    )
                path = Path(entry.path)
                if entry.is_symlink():
                    raise _link_error(path, base)
                if entry.is_dir(follow_symlinks=False):
                    if not recursive:
                        continue
                    if depth + 1 > MAX_DEPTH:
                        raise EksinfError(
                            f"{_label(path, base)}: nested deeper than {MAX_DEPTH} folders",
                            exit_code=CONTRACT,
                        )
                    pending.append((path, depth + 1))
                    folders.append(path)
                elif entry.is_file(follow_symlinks=False):
                    found.append(path)
                else:
                    raise _special_error(
                        _label(path, base), entry.stat(follow_symlinks=False).st_mode
                    )
    return sorted(found), sorted(folders)
