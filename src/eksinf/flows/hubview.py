"""What the hub holds, read for `eksinf hub`: a unit's content compared between revisions or
with its upstream."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from ..core.yamlio import canonical_text
from ..errors import USAGE, EksinfError
from .context import StackContext


@dataclass(frozen=True)
class UnitDiff:
    old: str  # space/unit[@revision]
    new: str  # space/unit
    lines: list[str]

    def as_json(self) -> dict[str, Any]:
        return {"from": self.old, "to": self.new, "diff": "".join(self.lines)}


def unit_diff(
    ctx: StackContext,
    space: str,
    unit: str,
    from_rev: int | None = None,
    to_rev: int | None = None,
    upstream: bool = False,
) -> UnitDiff:
    """A unified diff of the unit's content (default: head-1 to head), or against its upstream
    unit's head. Both sides are compared as parsed YAML written in one style: a change shows as
    the fields it changed, not as the comments, quoting or indentation an edit re-wrote."""
    with ctx.open_hub() as hub:
        record = hub.get_unit(space, unit)
        new = hub.unit_data(space, unit, to_rev)
        if upstream:
            upstream_id = hub.get_space(space).annotations.get("UpstreamSpaceID")
            base_space = next(
                (s.slug for s in hub.list_spaces() if s.space_id == upstream_id), None
            )
            if base_space is None:
                raise EksinfError(f"{space} has no upstream space", exit_code=USAGE)
            old, old_name = hub.unit_data(base_space, unit), f"{base_space}/{unit}"
        else:
            old_rev = from_rev if from_rev is not None else max(1, record.head_revision - 1)
            old, old_name = hub.unit_data(space, unit, old_rev), f"{space}/{unit}@{old_rev}"
    # Content, not text: a base holds the committed file (comments, its quoting) and an edited
    # unit is written in eksinf's one style, so a text diff would show every line.
    lines = list(
        difflib.unified_diff(
            canonical_text(old, old_name).splitlines(keepends=True),
            canonical_text(new, f"{space}/{unit}").splitlines(keepends=True),
            old_name,
            f"{space}/{unit}",
        )
    )
    return UnitDiff(old_name, f"{space}/{unit}", lines)
