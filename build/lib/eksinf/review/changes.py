"""Which resources were added, removed or changed between two snapshots, and how: pure."""

from __future__ import annotations

from dataclasses import dataclass

from .snapshot import Resource, Snapshot
from .structural import CrdSummary, FieldChange, crd_summary, diff, without_schemas

CRD_KIND = "CustomResourceDefinition"


@dataclass(frozen=True)
class ResourceChange:
    op: str  # added | removed | changed
    before: Resource | None
    after: Resource | None
    fields: tuple[FieldChange, ...] = ()
    crd: CrdSummary | None = None

    @property
    def resource(self) -> Resource:
        found = self.after or self.before
        assert found is not None  # a change has at least one side
        return found


def _changed(before: Resource, after: Resource) -> ResourceChange | None:
    if before.doc == after.doc:
        return None
    if after.kind == CRD_KIND:
        summary = crd_summary(before.doc, after.doc)
        fields = diff(without_schemas(before.doc), without_schemas(after.doc))
        return ResourceChange("changed", before, after, tuple(fields), summary)
    return ResourceChange("changed", before, after, tuple(diff(before.doc, after.doc)))


def compare(base: Snapshot, head: Snapshot) -> list[ResourceChange]:
    """Every resource that differs, in the head's order (removed ones where they were)."""
    old, new = base.by_key(), head.by_key()
    out: list[ResourceChange] = []
    for key, resource in old.items():
        if key not in new:
            out.append(ResourceChange("removed", resource, None))
    for key, resource in new.items():
        if key not in old:
            out.append(ResourceChange("added", None, resource))
        else:
            change = _changed(old[key], resource)
            if change is not None:
                out.append(change)
    return out
