"""`eksinf diff`: what a change to the stack does, rendered on both sides, with its risks, GPU
totals and NodePool costs before and after."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..build.charts import mirror_dir
from ..review import report, source
from ..review.risks import CLASSES
from ..review.snapshot import gpu_units, snapshot, without_unchanged_units
from .context import StackContext

__all__ = ["CLASSES", "Review", "ReviewOptions", "review", "to_json", "to_markdown", "to_text"]

Review = report.Review

to_json = report.to_json
to_markdown = report.to_markdown
to_text = report.to_text


@dataclass(frozen=True)
class ReviewOptions:
    base: str | None = None  # the git ref to compare with; default: the merge base
    mirror: Path | None = None
    quiet: bool = False  # no progress lines (--json)
    region: str | None = None  # default: the profile's, from the rendered units
    prices: str = "snapshot"  # auto, live or snapshot


def review(ctx: StackContext, opts: ReviewOptions) -> report.Review:
    root = ctx.stack.root
    say = (lambda _m: None) if opts.quiet else ctx.say
    ref = opts.base or source.default_base(root)
    sha = source.resolve(root, ref)
    mirror = mirror_dir(opts.mirror, root)
    before = source.at_commit(root, opts.base or "merge-base", sha, mirror, say)
    after = source.working_tree(root, mirror, say)
    notes = tuple(
        f"{side.label}: committed configs/ was stale, so it was rendered from its inputs"
        for side in (before, after)
        if side.rendered
    )
    old, new = without_unchanged_units(before.files, after.files)
    base_snap, head_snap = snapshot(old), snapshot(new)
    gpus = report.gpu_totals(snapshot(gpu_units(before.files)), snapshot(gpu_units(after.files)))
    where = opts.region or report.profile_region(head_snap, base_snap)
    table, more = _price_table(ctx, base_snap, head_snap, where, opts.prices)
    return report.review(
        base_snap,
        head_snap,
        before.label,
        after.label,
        notes + more,
        gpus=gpus,
        prices=table,
        region=where,
    )


def _price_table(
    ctx: StackContext, before: Any, after: Any, region: str | None, mode: str
) -> tuple[report.Prices, tuple[str, ...]]:
    """The snapshot, with live Price List rates for the NodePools' candidate types when asked
    (live) or when credentials are configured (auto). A failed read is a note, never a zero."""
    from ..model.prices import load_catalogue, load_prices
    from ..review.cost import candidates
    from ..review.report import Prices, is_nodegroup, is_pool, snapshot_source

    table = load_prices()
    snap = Prices(table, snapshot_source(table))
    if mode == "snapshot" or region is None:
        return snap, ()
    from ..aws import pricing
    from ..aws.session import AwsIdentity, AwsSession

    session = AwsSession(AwsIdentity.resolve(region, ctx.aws.profile))
    if mode == "auto" and not session.has_credentials(metadata=False):
        return snap, ()
    catalogue = load_catalogue()
    resources = [r for side in (before, after) for r in side.resources]
    types = sorted(
        {
            t.name
            for r in resources
            if is_pool(r)
            for t in candidates(r.doc.get("spec") or {}, catalogue)[0]
        }
        | {
            str(t)
            for r in resources
            if is_nodegroup(r)
            for t in (r.doc.get("spec") or {}).get("instanceTypes") or []
        }
    )
    if not types:
        return snap, ()
    live = pricing.fetch_rates(session, region, types, [])
    notes = tuple(live.refused)
    if live.errors:
        notes += (f"live prices unavailable ({live.errors[0]}): priced from the {snap.source}",)
    if not live.on_demand:
        return snap, notes
    read = sorted(set(live.read_at[t] for t in live.on_demand))
    label = (
        f"AWS Price List API (pricing:GetProducts) for {len(live.on_demand)} type(s), read "
        f"{read[0] if len(read) == 1 else f'{read[0]} to {read[-1]}'}; the {snap.source} for "
        "any other"
    )
    return Prices(table.with_rates(region, live.on_demand, label), label), notes
