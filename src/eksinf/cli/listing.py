"""`eksinf components`' listing from the stack's model: its rows (the --json report), and the
whole listing kept for cli/quick.py to answer from (model/listing.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import EksinfError
from ..model.listing import keep_listing, listing_key
from ..model.stack import PLANES, Stack
from ..model.stackroot import find_stack_root


def component_rows(stack: Stack, plane: str | None) -> list[dict[str, Any]]:
    """`eksinf components`' rows: the stack's components in apply order (of one plane)."""
    return [
        {
            "name": c.name,
            "plane": c.plane,
            "order": c.order,
            "render": c.render,
            "charts": [f"{s.chart} {s.version}" for s in c.charts],
            "description": c.description,
        }
        for c in stack.select(plane=plane)
    ]


def sources_key(stack_dir: str | None) -> str | None:
    """The listing's key from the stack's sources as they are before the run loads them (None
    when there is no stack to read: the load reports that)."""
    try:
        return listing_key(find_stack_root(Path(stack_dir) if stack_dir else None))
    except (EksinfError, OSError):  # the load meets it again and reports it
        return None


def keep(stack: Stack, before: str | None) -> None:
    """Keep the stack's whole listing under its key, when its sources were the same bytes
    before and after it was loaded (so the listing is of exactly those bytes)."""
    if before is not None and listing_key(stack.root) == before:
        keep_listing(before, PLANES, component_rows(stack, None))
