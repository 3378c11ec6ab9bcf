"""`eksinf components`' listing, kept in the cache under exactly what decides it.

The listing is a function of components.yaml's and versions.env's bytes, components.yaml's
schema, eksinf's code, the YAML library and Python: kept under all of them, it is answered
without the stack's model (its YAML reader and dataclasses cost several times the command's
work). Only a listing of a stack that loaded is kept, so a stack that does not load is never
listed from here. No typing or dataclasses in this module: the light commands import it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from eksinf.core import cache, dist, inside
from eksinf.model.stackroot import COMPONENTS_SCHEMA

SPACE = "listing"
_FORMAT = b"components-listing-1"
SOURCES = ("components.yaml", "versions.env")  # what load_stack reads of a stack


def listing_key(root: Path) -> str | None:
    """The key of `root`'s listing, from its sources' bytes as they are now (read as the stack
    reads them: no link, bounded); None when they cannot be read so."""
    try:
        sources = [inside.read_bytes(root / name, root) for name in SOURCES]
        schema = COMPONENTS_SCHEMA.read_bytes()
        yaml = dist.release(dist.package_dirs("yaml"), "PyYAML")
    except Exception:  # the stack's model reports it, in its words
        return None
    return cache.key(
        _FORMAT, cache.code_digest().encode(), yaml.encode(), sys.version.encode(), schema, *sources
    )


def kept_listing(key: str) -> tuple[list[str], list[dict[str, object]]] | None:
    """(the planes, every component's row in apply order) kept under `key`, or None."""
    data = cache.get(SPACE, key)
    if data is None:
        return None
    import json

    try:
        record = json.loads(data)
        planes, rows = record["planes"], record["rows"]
    except (ValueError, TypeError, KeyError):
        return None
    ok = isinstance(planes, list) and isinstance(rows, list)
    return (planes, rows) if ok and all(isinstance(r, dict) for r in rows) else None


def keep_listing(key: str, planes: tuple[str, ...], rows: list[dict[str, object]]) -> None:
    import json

    cache.put(SPACE, key, json.dumps({"planes": list(planes), "rows": rows}).encode())


def of_plane(rows: list[dict[str, object]], plane: str | None) -> list[dict[str, object]]:
    """The rows of one plane (all when None), in their order: what Stack.select chooses."""
    return [r for r in rows if plane is None or r["plane"] == plane]
