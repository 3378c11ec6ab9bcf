"""Which stack a run reads, found before anything in it is read: kept apart from the stack's
model (model/stack.py), which `eksinf components` answered from the cache does not load."""

from __future__ import annotations

from pathlib import Path

from eksinf.errors import USAGE, EksinfError
from eksinf.model import shipped

# components.yaml's schema, read beside this package's modules as cli/help.py reads its pages:
# importlib.resources (and the zipfile module its readers import) would cost every load ~3 ms
COMPONENTS_SCHEMA = Path(__file__).parents[1] / "schemas" / "components.schema.json"


def find_stack_root(start: Path | None) -> Path:
    """The stack a run reads: `start` (--stack) when given; else the nearest folder holding
    components.yaml from the working folder up (as git finds its repository: a command run in
    a stack's render/ or configs/ acts on that stack, never on another), not past the top of
    a git checkout; else the user's copy of the stack shipped inside eksinf (model.shipped)."""
    if start is not None:
        root = start.resolve()
        if (root / "components.yaml").is_file():
            return root
    else:
        root = Path.cwd().resolve()
        for folder in (root, *root.parents):  # bounded: a path has finitely many parents
            if (folder / "components.yaml").is_file():
                return folder
            if (folder / ".git").exists():
                break  # a checkout's top: a stack above it is not this checkout's
        found = shipped.shipped_root()
        if found is not None:
            return found
    raise EksinfError(
        f"no components.yaml in {root}",
        hint="Run from a stack directory or pass --stack DIR."
        if start is not None
        else "Run from a stack directory or pass --stack DIR (this eksinf carries no stack of "
        "its own: it was installed from a source checkout).",
        exit_code=USAGE,
    )
