"""Profile links: binding files (`links.bindings`) and the one engine that writes a profile
value into a unit (`links.engine`). Lint, `links resolve`, the hub's link-profile and its
resolve all go through the engine; see docs/linking.md."""

from .bindings import BINDINGS_FILE, LINKS_DIR, Binding, bindings_path, load_bindings
from .engine import (
    Target,
    apply_bindings,
    profile_value,
    resolve_units,
    target_path,
    unresolved,
    write,
)

__all__ = [
    "BINDINGS_FILE",
    "LINKS_DIR",
    "Binding",
    "Target",
    "apply_bindings",
    "bindings_path",
    "load_bindings",
    "profile_value",
    "resolve_units",
    "target_path",
    "unresolved",
    "write",
]
