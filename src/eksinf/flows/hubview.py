"""The `fn` and `hub` commands' flows: what the hub holds, read and changed one step at a time,
and a unit's content compared between revisions or with its upstream."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.textdiff import unified_diff
from ..core.yamldump import canonical_text
from ..errors import USAGE, EksinfError
from ..hub.protocol import (
    FunctionResult,
    PromoteReport,
    Revision,
    Space,
    Unit,
    UploadReport,
    UploadSource,
)
from ..model.names import MANAGED_BY
from . import deploy
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
    lines = unified_diff(
        canonical_text(old, old_name).splitlines(keepends=True),
        canonical_text(new, f"{space}/{unit}").splitlines(keepends=True),
        old_name,
        f"{space}/{unit}",
    )
    return UnitDiff(old_name, f"{space}/{unit}", lines)


# ---- the hub commands' one-step flows ----------------------------------------------------

read_source = deploy.read_source  # a unit directory, bundle or OCI reference, read safely


def invoke(
    ctx: StackContext,
    space: str,
    function: str,
    args: list[str],
    unit: str | None = None,
    where: str | None = None,
) -> FunctionResult:
    """Run a hub function on the space's units (one unit, a where-clause, or all)."""
    with ctx.open_hub() as hub:
        return hub.invoke(space, function, args, unit=unit, where=where)


def spaces(ctx: StackContext, where: str | None = None) -> list[Space]:
    with ctx.open_hub() as hub:
        return hub.list_spaces(where)


def units(ctx: StackContext, space: str | None = None, where: str | None = None) -> list[Unit]:
    with ctx.open_hub() as hub:
        return hub.list_units(space, where)


def show(ctx: StackContext, space: str, unit: str, revision: int | None = None) -> tuple[Unit, str]:
    """The unit's record and its content (head, or `revision`)."""
    with ctx.open_hub() as hub:
        return hub.get_unit(space, unit), hub.unit_data(space, unit, revision)


def history(ctx: StackContext, space: str, unit: str) -> list[Revision]:
    with ctx.open_hub() as hub:
        return hub.history(space, unit)


def upload(
    ctx: StackContext,
    component: str,
    variant: str,
    source: UploadSource,
    prune: bool = False,
    dry_run: bool = False,
) -> UploadReport:
    """Upload one component, one unit per file, into <component>-<variant> (a re-upload
    merges and keeps unit IDs)."""
    with ctx.open_hub() as hub:
        return hub.variant_upload(
            component, variant, source, labels=MANAGED_BY, prune=prune, dry_run=dry_run
        )


def restore(ctx: StackContext, space: str, unit: str, revision: int) -> Unit:
    with ctx.open_hub() as hub:
        return hub.restore(space, unit, revision)


def create_variant(
    ctx: StackContext, variant: str, upstream: str, target: str | None = None
) -> Space:
    with ctx.open_hub() as hub:
        return hub.variant_create(variant, upstream, target=target)


def promote(ctx: StackContext, space: str) -> PromoteReport:
    with ctx.open_hub() as hub:
        return hub.variant_promote(space)


def delete_space(ctx: StackContext, space: str, recursive: bool, yes: bool) -> bool:
    """Delete the space (it must exist); without `yes`, only check it does. True: deleted."""
    with ctx.open_hub() as hub:
        hub.get_space(space)
        if not yes:
            return False
        hub.delete_space(space, recursive=recursive)
    return True
