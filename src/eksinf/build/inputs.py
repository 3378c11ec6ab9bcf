"""The inputs digest: sha256 over every input that determines rendered bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path

from eksinf.core import inside
from eksinf.model.stack import ALLOW_FILE, LINKS_DIR, Stack


def _renders_bytes(rel: Path) -> bool:
    """Whether a file under render/ can change rendered bytes. A component's links/ (profile
    bindings, read live by lint and the hub) and its HAZARDS.allow (read live by the guard)
    never reach configs/, so editing them must not make configs/ look stale."""

    return not (len(rel.parts) > 1 and rel.parts[1] in (LINKS_DIR, ALLOW_FILE))


INPUT_FILES = ("components.yaml", "versions.env", "charts.lock")


def is_render_input(rel: str) -> bool:
    """Whether a stack-relative posix path is an input `inputs_digest` covers."""
    parts = rel.split("/")
    return rel in INPUT_FILES or (
        len(parts) > 1 and parts[0] == "render" and _renders_bytes(Path(*parts[1:]))
    )


def digest_inputs(files: dict[str, bytes]) -> str:
    """sha256 over the render inputs among `files` (stack-relative posix path -> bytes).

    The one definition of the inputs digest: over the working tree (`inputs_digest`) and over
    a git commit's blobs (`eksinf diff`), so both agree on whether configs/ is stale.
    """
    digest = hashlib.sha256()
    top = [name for name in INPUT_FILES if name in files]
    # render/ files in Path order (by parts), as the digest has always been taken
    under = sorted(
        (r for r in files if r.startswith("render/") and is_render_input(r)),
        key=lambda r: r.split("/"),
    )
    for rel in top + under:
        digest.update(rel.encode() + b"\0")
        digest.update(files[rel] + b"\0")
    return digest.hexdigest()


def inputs_digest(stack: Stack) -> str:
    """sha256 over every input that determines rendered bytes, in a fixed order."""
    paths = [stack.root / "components.yaml", stack.root / "versions.env", stack.lock_path]
    # a link anywhere in render/ (or a linked top-level input) is refused here, the one walk
    # every render and lint makes
    paths += inside.files_under(stack.render_dir, stack.root)
    files = {
        p.relative_to(stack.root).as_posix(): p for p in paths if p.is_file() or p.is_symlink()
    }
    return digest_inputs(
        {
            rel: inside.read_bytes(p, stack.root, stack.root)
            for rel, p in files.items()
            if is_render_input(rel)
        }
    )
