"""The stack that ships inside eksinf: a command run with no --stack and no stack in the working
folder uses it, as the Go original's plugin used the stack it embedded.

The build copies the stack's files (`STACK_FILES`) into the package as `eksinf/stack/`, with
`SHIPPED` beside them: the digest of their bytes (setup.py for the wheel, .ci/build-plugin.py
for the cub plugin asset). The package itself is never written: on first use, and again whenever
the digest changes (an upgrade), the files are copied into the user's state folder
(`$EKSINF_STATE_DIR`, else `$XDG_STATE_HOME/eksinf`, else `~/.local/state/eksinf`) as
`stack/`, and that copy is the stack root. What eksinf keeps beside a stack (`.eksinf/`: the
local hub, the sandbox's OCI layout, kubeconfigs; `bundles/`) therefore lands in the state
folder and outlives upgrades; only the stack's own files are replaced. The copy is marked
(`.eksinf/shipped`), and commands that write into a stack (`render`, `charts lock`) refuse it:
changes belong in a stack folder of one's own.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import CONTRACT, EksinfError

# The stack, as the package carries it: every file and folder eksinf reads from a stack root.
STACK_FILES = ("components.yaml", "versions.env", "charts.lock", "aws-objects.lock")
STACK_DIRS = ("render", "configs", "iam")
DIGEST_FILE = "SHIPPED"  # beside the files in the package: the digest of their bytes
MARKER = Path(".eksinf") / "shipped"  # in the user's copy: the digest it was copied at
STATE_ENV = "EKSINF_STATE_DIR"


def state_dir() -> Path:
    """Where eksinf keeps what belongs to the user, not to a stack folder."""
    explicit = os.environ.get(STATE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "eksinf"


def packaged() -> Path | None:
    """The stack inside the installed package, or None (a source checkout, an editable install:
    the build copies it in)."""
    from importlib import resources  # here: every stack load imports this module

    try:
        folder = Path(str(resources.files("eksinf").joinpath("stack")))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - a zipped package
        return None
    if (folder / "components.yaml").is_file() and (folder / DIGEST_FILE).is_file():
        return folder
    return None


def is_shipped(root: Path) -> bool:
    """Whether `root` is the user's copy of the shipped stack (a copy of that copy elsewhere is
    the user's own stack)."""
    return (root / MARKER).is_file() and root.resolve() == (state_dir() / "stack").resolve()


def shipped_root(package: Path | None = None) -> Path | None:
    """The user's copy of the shipped stack, brought up to the package's digest first; None
    when this eksinf carries no stack."""
    package = package or packaged()
    if package is None:
        return None
    digest = (package / DIGEST_FILE).read_text().strip()
    root = state_dir() / "stack"
    marker = root / MARKER
    if marker.is_file() and marker.read_text().strip() == digest:
        return root
    if not marker.is_file():
        _refuse_foreign(root)
    _refresh(package, root, digest)
    return root


def _refuse_foreign(root: Path) -> None:
    """A folder at the copy's place without the marker was not made by eksinf: its stack files
    would be replaced, so nothing is touched and the user decides."""
    held = [name for name in (*STACK_FILES, *STACK_DIRS) if (root / name).exists()]
    if held:
        raise EksinfError(
            f"{root} holds {', '.join(held)} that eksinf did not put there (no {MARKER}); the "
            "shipped stack is copied to that folder",
            hint=f"Move that folder away, or set {STATE_ENV} to another folder.",
            exit_code=CONTRACT,
        )


def _refresh(package: Path, root: Path, digest: str) -> None:
    """Replace the stack's files in `root` with the package's, leaving everything else there
    (`.eksinf/`, `bundles/`) alone. Each entry is copied beside its place, then renamed in, so a
    reader never sees half a file; the marker is written last."""
    import shutil
    import tempfile

    (root / MARKER.parent).mkdir(parents=True, exist_ok=True)
    for name in (*STACK_FILES, *STACK_DIRS):
        src = package / name
        if not src.exists():
            continue
        staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
        try:
            new = staging / name
            if src.is_dir():
                shutil.copytree(src, new)
            else:
                shutil.copyfile(src, new)
            dest = root / name
            if dest.is_dir() and not dest.is_symlink():
                old = staging / "old"
                dest.rename(old)
            elif dest.exists() or dest.is_symlink():
                dest.unlink()
            new.rename(dest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    tmp = root / MARKER.with_name("shipped.tmp")
    tmp.write_text(digest + "\n")
    tmp.replace(root / MARKER)
