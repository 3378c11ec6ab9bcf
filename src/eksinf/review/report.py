"""A review of two snapshots: changes grouped by plane and component, their risks, the NodePool
cost bounds, and the three ways to print it (text, Markdown for a pull request, JSON).

Everything here is pure; `eksinf diff` (cli/review.py) gathers the snapshots.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..model.names import PROFILE_KIND
from ..prices import load_catalogue, load_prices
from ..stack import PLANES
from .changes import CRD_KIND, ResourceChange, compare
from .cost import PoolCost, max_hourly
from .risks import CLASSES, Risk, assess
from .snapshot import INPUT_API, STACK_GROUP, Resource, Snapshot
from .structural import FieldChange, crd_outline

OPS = ("added", "removed", "changed")
MARKER = "<!-- eksinf-diff -->"  # the workflow finds its own sticky comment by this line
MARKDOWN_LIMIT = 65_000  # GitHub refuses comment bodies over 65,536 characters


@dataclass(frozen=True)
class Entry:
    change: ResourceChange
    risks: tuple[Risk, ...]


@dataclass(frozen=True)
class ComponentReview:
    name: str
    plane: str
    entries: tuple[Entry, ...]

    @property
    def classes(self) -> list[str]:
        return [c for c in CLASSES if any(r.cls == c for e in self.entries for r in e.risks)]


@dataclass(frozen=True)
class PoolChange:
    component: str
    pool: str
    before: PoolCost | None  # None: the pool does not exist on that side
    after: PoolCost | None


@dataclass(frozen=True)
class Review:
    base: str
    head: str
    components: tuple[ComponentReview, ...]
    costs: tuple[PoolChange, ...]
    region: str | None
    notes: tuple[str, ...] = field(default=())

    @property
    def entries(self) -> list[Entry]:
        return [e for c in self.components for e in c.entries]

    @property
    def empty(self) -> bool:
        return not self.components

    def counts(self) -> dict[str, int]:
        return {op: sum(1 for e in self.entries if e.change.op == op) for op in OPS}

    def risk_counts(self) -> dict[str, int]:
        """Resources with at least one finding of each class (classes without any are left out)."""
        out = {}
        for cls in CLASSES:
            n = sum(1 for e in self.entries if any(r.cls == cls for r in e.risks))
            if n:
                out[cls] = n
        return out


def _region(*snapshots: Snapshot) -> str | None:
    for snap in snapshots:
        for r in snap.resources:
            if r.kind == PROFILE_KIND:
                region = (r.doc.get("spec") or {}).get("region")
                if isinstance(region, str):
                    return region
    return None


def _is_pool(r: Resource) -> bool:
    return (r.group, r.kind) == ("karpenter.sh", "NodePool")


def _costs(changes: list[ResourceChange], region: str | None) -> list[PoolChange]:
    prices, catalogue = load_prices(), load_catalogue()

    def bound(r: Resource | None) -> PoolCost | None:
        if r is None:
            return None
        if region is None:
            return PoolCost(None, None, "unknown: the profile names no region")
        return max_hourly(r.doc.get("spec") or {}, region, prices, catalogue)

    out = []
    for c in changes:
        if not _is_pool(c.resource):
            continue
        touched = c.op != "changed" or any(
            f.path.startswith(("spec.limits", "spec.template.spec.requirements")) for f in c.fields
        )
        if touched:
            out.append(
                PoolChange(c.resource.component, c.resource.name, bound(c.before), bound(c.after))
            )
    return out


def review(
    base: Snapshot, head: Snapshot, base_label: str, head_label: str, notes: tuple[str, ...] = ()
) -> Review:
    changes = compare(base, head)
    components = {**base.components, **head.components}
    plane_rank = {p: i for i, p in enumerate(PLANES)}

    def order(name: str) -> tuple[int, int, str]:
        plane, rank = components.get(name, ("?", 0))
        return (plane_rank.get(plane, len(PLANES)), rank, name)

    grouped: dict[str, list[Entry]] = {}
    for c in changes:
        grouped.setdefault(c.resource.component, []).append(Entry(c, tuple(assess(c))))
    reviews = []
    for name in sorted(grouped, key=order):
        entries = sorted(
            grouped[name], key=lambda e: (OPS.index(e.change.op), e.change.resource.label)
        )
        plane = components.get(name, ("stack" if name == STACK_GROUP else "?", 0))[0]
        reviews.append(ComponentReview(name, plane, tuple(entries)))
    region = _region(head, base)
    return Review(
        base_label, head_label, tuple(reviews), tuple(_costs(changes, region)), region, notes
    )


# ---- values ----------------------------------------------------------------------------------


def _value(value: Any, limit: int = 100) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else json.dumps(value)
    return text if len(text) <= limit else text[: limit - 4] + '..."'


def describe_field(f: FieldChange) -> str:
    if f.op == "added":
        return f"+ {f.path}: {_value(f.new)}"
    if f.op == "removed":
        return f"- {f.path}: {_value(f.old)}"
    if isinstance(f.old, list) and isinstance(f.new, list):
        gone = [v for v in f.old if v not in f.new]
        new = [v for v in f.new if v not in f.old]
        if gone or new:
            parts = ([f"added {_value(new)}"] if new else []) + (
                [f"removed {_value(gone)}"] if gone else []
            )
            return f"~ {f.path}: {'; '.join(parts)}"
    return f"~ {f.path}: {_value(f.old)} -> {_value(f.new)}"


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def cost_cells(cost: PoolCost | None, hours: int) -> tuple[str, str]:
    """(hourly, monthly) as printed: `-` for no pool, `unbounded`, `unknown (>= $x)` or `$x`."""
    if cost is None:
        return "-", "-"
    if cost.hourly is not None:
        return _money(cost.hourly), _money(cost.hourly * hours)
    if cost.at_least is not None:
        return (
            f"unknown (>= {_money(cost.at_least)})",
            f"unknown (>= {_money(cost.at_least * hours)})",
        )
    if cost.reason.startswith("no limits"):
        return "unbounded", "unbounded"
    return "unknown", "unknown"


# ---- JSON ------------------------------------------------------------------------------------


def _resource_json(e: Entry) -> dict[str, Any]:
    r = e.change.resource
    out: dict[str, Any] = {
        "id": r.label,
        "apiVersion": r.api_version,
        "kind": r.kind,
        "namespace": r.namespace,
        "name": r.name,
        "file": r.unit,
        "input": r.api_version == INPUT_API,
        "change": e.change.op,
        "fields": [f.as_dict() for f in e.change.fields],
        "risks": [x.as_dict() for x in e.risks],
    }
    if e.change.crd is not None:
        out["crd"] = e.change.crd.as_dict()
    elif r.kind == CRD_KIND:
        out["crd"] = {"versions": crd_outline(r.doc)}
    return out


def to_json(rev: Review) -> dict[str, Any]:
    prices = load_prices()
    return {
        "base": rev.base,
        "head": rev.head,
        "notes": list(rev.notes),
        "changed": not rev.empty,
        "summary": {**rev.counts(), "risks": rev.risk_counts()},
        "classes": [{"id": c.id, "title": c.title} for c in CLASSES.values()],
        "components": [
            {
                "component": c.name,
                "plane": c.plane,
                "resources": [_resource_json(e) for e in c.entries],
            }
            for c in rev.components
        ],
        "cost": {
            "region": rev.region,
            "pricesAsOf": prices.as_of,
            "hoursPerMonth": prices.hours_per_month,
            "nodePools": [
                {
                    "component": p.component,
                    "nodePool": p.pool,
                    "before": p.before.as_dict(prices.hours_per_month) if p.before else None,
                    "after": p.after.as_dict(prices.hours_per_month) if p.after else None,
                }
                for p in rev.costs
            ],
        },
    }


# ---- text ------------------------------------------------------------------------------------

SAME_CHANGE = 3  # this many risk-free resources with identical field changes print as one block


def blocks(comp: ComponentReview) -> list[list[Entry]]:
    """The entries to print, in order; risk-free resources whose field changes are identical
    (a chart bump relabelling every object it renders) share one block."""
    shared: dict[str, list[Entry]] = {}
    out: list[list[Entry]] = []
    for e in comp.entries:
        c = e.change
        if c.op == "changed" and not e.risks and c.crd is None and c.fields:
            key = json.dumps([f.as_dict() for f in c.fields], sort_keys=True, default=str)
            if key in shared:
                shared[key].append(e)
                continue
            shared[key] = [e]
            out.append(shared[key])
        else:
            out.append([e])
    return [
        part
        for block in out
        for part in ([block] if len(block) >= SAME_CHANGE else [[e] for e in block])
    ]


TEXT_FIELDS = 40  # per resource; the JSON has every field


def _summary_line(rev: Review) -> str:
    counts = rev.counts()
    return (
        f"{counts['added']} added, {counts['removed']} removed, {counts['changed']} changed "
        f"in {len(rev.components)} component(s)"
    )


def _cost_lines(rev: Review) -> list[str]:
    prices = load_prices()
    lines = []
    for p in rev.costs:
        before, after = (
            cost_cells(p.before, prices.hours_per_month),
            cost_cells(p.after, prices.hours_per_month),
        )
        lines.append(
            f"  NodePool {p.pool}: max {before[0]}/h ({before[1]}/month) -> "
            f"{after[0]}/h ({after[1]}/month)"
        )
        for side, cost in (("before", p.before), ("after", p.after)):
            if cost is not None:
                lines.append(f"    {side}: {cost.reason}")
    return lines


def to_text(rev: Review) -> str:
    if rev.empty:
        return f"no changes ({rev.base} -> {rev.head})\n" + "".join(
            f"note: {n}\n" for n in rev.notes
        )
    lines = [f"eksinf diff: {rev.base} -> {rev.head}"]
    lines += [f"note: {n}" for n in rev.notes]
    lines.append(_summary_line(rev))
    risks = rev.risk_counts()
    lines.append("risks: " + (", ".join(f"{k} {v}" for k, v in risks.items()) if risks else "none"))
    for comp in rev.components:
        lines.append("")
        lines.append(f"== {comp.plane} / {comp.name}")
        for block in blocks(comp):
            e = block[0]
            r = e.change.resource
            if len(block) > 1:
                lines.append(f"  changed  {len(block)} resources, each with the same change:")
                lines += [
                    f"           {x.change.resource.label}  ({x.change.resource.unit})"
                    for x in block
                ]
            else:
                lines.append(f"  {e.change.op:<8} {r.label}  ({r.unit})")
            lines += _crd_lines(e, "    ")
            for f in e.change.fields[:TEXT_FIELDS]:
                lines.append(f"    {describe_field(f)}")
            if len(e.change.fields) > TEXT_FIELDS:
                lines.append(f"    ... {len(e.change.fields) - TEXT_FIELDS} more (--format json)")
            for x in e.risks:
                at = f" {x.path}" if x.path else ""
                lines.append(f"    ! {x.cls}{at}: {x.reason}")
    if rev.costs:
        lines.append("")
        lines.append(
            f"cost (NodePool maximum, on-demand, {rev.region or 'region unknown'}, prices as of {load_prices().as_of}):"
        )
        lines += _cost_lines(rev)
    return "\n".join(lines) + "\n"


def _crd_lines(e: Entry, indent: str) -> list[str]:
    s = e.change.crd
    if s is None:
        if e.change.resource.kind == CRD_KIND and e.change.op != "changed":
            return [f"{indent}{line}" for line in crd_outline(e.change.resource.doc)]
        return []
    out = []
    if s.versions_added or s.versions_removed:
        out.append(
            f"versions: added {', '.join(s.versions_added) or '-'}; removed "
            f"{', '.join(s.versions_removed) or '-'}"
        )
    out += [f"served: {line}" for line in s.served]
    if s.storage_changed:
        out.append(f"storage: {', '.join(s.storage_before)} -> {', '.join(s.storage_after)}")
    if s.fields_added or s.fields_removed or s.fields_changed:
        out.append(
            f"schema: {len(s.fields_added)} field(s) added, {len(s.fields_removed)} removed, "
            f"{s.fields_changed} changed"
        )
        for name in s.fields_added[:10]:
            out.append(f"  + {name}")
        for name in s.fields_removed[:10]:
            out.append(f"  - {name}")
    return [f"{indent}{line}" for line in out]


# ---- Markdown --------------------------------------------------------------------------------

MD_FIELDS = 25


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _md_component(comp: ComponentReview) -> tuple[str, list[tuple[str, int]]]:
    """A component's collapsible section: its opening lines, then each block with the number of
    resources it shows (so a section can be cut between blocks)."""
    ops = {op: sum(1 for e in comp.entries if e.change.op == op) for op in OPS}
    counts = ", ".join(f"{n} {op}" for op, n in ops.items() if n)
    flags = f" · {', '.join(comp.classes)}" if comp.classes else ""
    opening = (
        f"<details>\n<summary><b>{comp.name}</b> ({comp.plane}): {counts}{flags}</summary>\n\n"
    )
    parts = []
    for block in blocks(comp):
        e = block[0]
        r = e.change.resource
        if len(block) > 1:
            names = ", ".join(f"`{x.change.resource.label}`" for x in block)
            lines = [f"**changed** {len(block)} resources, each with the same change: {names}"]
        else:
            lines = [f"**{e.change.op}** `{r.label}` in `{r.unit}`"]
        lines.append("")
        for x in e.risks:
            at = f" `{x.path}`" if x.path else ""
            lines.append(f"- :warning: **{x.cls}**{at}: {x.reason}")
        body = _crd_lines(e, "")
        body += [describe_field(f) for f in e.change.fields[:MD_FIELDS]]
        if len(e.change.fields) > MD_FIELDS:
            body.append(
                f"... {len(e.change.fields) - MD_FIELDS} more field changes in the JSON report"
            )
        if body:
            lines += ["", "```diff", *body, "```"]
        lines.append("")
        parts.append(("\n".join(lines) + "\n", len(block)))
    return opening, parts


_MD_CLOSE = "</details>\n"


def to_markdown(rev: Review, details: str | None = None, limit: int = MARKDOWN_LIMIT) -> str:
    """The pull-request comment: summary table, cost table, one collapsible section per component.

    Always under `limit` characters: what does not fit is cut between resources, counted, and
    pointed to the full JSON report (`details`, a URL, when the workflow has one).
    """
    pointer = details or "`eksinf diff --format json`"
    head = [MARKER, f"### eksinf diff: `{rev.base}` → `{rev.head}`", ""]
    head += [f"> {n}" for n in rev.notes]
    if rev.empty:
        return "\n".join([*head, "", "no changes", ""])
    head += [_summary_line(rev), ""]
    risks = rev.risk_counts()
    head += ["| risk | resources | what |", "|---|---:|---|"]
    for cls in CLASSES.values():
        if cls.id in risks:
            head.append(f"| `{cls.id}` | {risks[cls.id]} | {cls.title} |")
    if not risks:
        head.append("| none | 0 | no risk class matched |")
    head.append("")
    if rev.costs:
        hours = load_prices().hours_per_month
        head += [
            f"**NodePool maximum cost** (on-demand, {rev.region or 'region unknown'}, prices as of {load_prices().as_of}):",
            "",
            "| NodePool | before $/h | after $/h | before $/month | after $/month |",
            "|---|---:|---:|---:|---:|",
        ]
        for p in rev.costs:
            b, a = cost_cells(p.before, hours), cost_cells(p.after, hours)
            head.append(f"| `{p.component}/{p.pool}` | {b[0]} | {a[0]} | {b[1]} | {a[1]} |")
        head.append("")
    text = "\n".join(head) + "\n"
    left = len(rev.entries)
    tail = len(_md_truncated(left, pointer))  # the longest the pointer can be
    for comp in rev.components:
        opening, parts = _md_component(comp)
        section = opening
        shown = 0
        for block, count in parts:
            if len(text) + len(section) + len(block) + len(_MD_CLOSE) + tail > limit:
                break
            section += block
            shown += count
        if shown:
            text += section + _MD_CLOSE
            left -= shown
        if shown < sum(count for _, count in parts):
            break
    if left:
        text += _md_truncated(left, pointer)
    return text


def _md_truncated(count: int, pointer: str) -> str:
    return (
        f"\n**Truncated:** {count} more resource change(s) do not fit in one comment; "
        f"the full report is {pointer}.\n"
    )
