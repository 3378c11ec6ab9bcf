"""A review of two snapshots: changes grouped by plane and component, their risks, the NodePool
cost bounds, and the three ways to print it (text, Markdown for a pull request, JSON).

Everything here is pure; `eksinf diff` (cli/review.py) gathers the snapshots.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from eksinf.model.prices import PriceTable, load_catalogue, load_prices
from eksinf.model.stack import PLANES

from ..model.names import GPU_RESOURCE, PROFILE_KIND
from ..model.quantity import parse
from .changes import CRD_KIND, ResourceChange, compare
from .cost import PoolCost, max_hourly, nodegroup_max_hourly
from .risks import CLASSES, Risk, assess, severity
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
class GpuCount:
    label: str  # the workload or NodePool
    before: int | None  # None: absent on that side (workload) or no GPU limit (NodePool)
    after: int | None


@dataclass(frozen=True)
class GpuTotals:
    """GPUs the workloads request (replicas x nvidia.com/gpu per pod) and the most the NodePools
    may hold (their nvidia.com/gpu limits), before and after."""

    workloads: tuple[GpuCount, ...]
    pools: tuple[GpuCount, ...]

    @staticmethod
    def _sum(counts: tuple[GpuCount, ...], side: str) -> int | None:
        values = [getattr(c, side) for c in counts]
        return None if any(v is None for v in values) else sum(values)

    def requested(self, side: str) -> int:
        return sum(getattr(c, side) or 0 for c in self.workloads)

    def pool_maximum(self, side: str) -> int | None:
        """None when a GPU pool on that side has no GPU limit (its maximum is unbounded); a pool
        absent on a side holds 0."""
        return self._sum(self.pools, side)

    @property
    def changed(self) -> bool:
        return any(c.before != c.after for c in (*self.workloads, *self.pools))


@dataclass(frozen=True)
class Prices:
    """The table the costs were priced with, and where its figures came from."""

    table: PriceTable
    source: str  # "snapshot ..." or "AWS Price List API ..."


@dataclass(frozen=True)
class Finding:
    risk: Risk
    component: str
    resource: str  # label


@dataclass(frozen=True)
class Review:
    base: str
    head: str
    components: tuple[ComponentReview, ...]
    costs: tuple[PoolChange, ...]
    region: str | None
    notes: tuple[str, ...] = field(default=())
    gpus: GpuTotals = field(default=GpuTotals((), ()))
    prices: Prices | None = None

    @property
    def entries(self) -> list[Entry]:
        return [e for c in self.components for e in c.entries]

    @property
    def findings(self) -> list[Finding]:
        """Every finding, most severe class first (stable: component and resource order within)."""
        found = [
            Finding(r, c.name, e.change.resource.label)
            for c in self.components
            for e in c.entries
            for r in e.risks
        ]
        return sorted(found, key=lambda f: severity(f.risk.cls))

    @property
    def price_table(self) -> PriceTable:
        return self.prices.table if self.prices else load_prices()

    @property
    def price_source(self) -> str:
        return self.prices.source if self.prices else snapshot_source(load_prices())

    def monthly_delta(self) -> tuple[float | None, tuple[str, ...]]:
        """The change of the NodePools' summed monthly maximum, or None with the reasons it is
        unknown (the types without a price, or the pools whose spend is unbounded or unknown)."""
        hours = self.price_table.hours_per_month
        total, why = 0.0, []
        for p in self.costs:
            for sign, cost in ((-1, p.before), (1, p.after)):
                if cost is None:
                    continue
                if cost.hourly is None:
                    why += list(cost.unpriced) or [f"{p.pool}: {cost.reason}"]
                else:
                    total += sign * cost.hourly * hours
        return (None, tuple(dict.fromkeys(why))) if why else (total, ())

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


def profile_region(*snapshots: Snapshot) -> str | None:
    for snap in snapshots:
        for r in snap.resources:
            if r.kind == PROFILE_KIND:
                region = (r.doc.get("spec") or {}).get("region")
                if isinstance(region, str):
                    return region
    return None


def is_pool(r: Resource) -> bool:
    return (r.group, r.kind) == ("karpenter.sh", "NodePool")


def snapshot_source(table: PriceTable) -> str:
    return f"snapshot of {table.source} as of {table.as_of}"


def _costs(
    changes: list[ResourceChange], region: str | None, prices: PriceTable
) -> list[PoolChange]:
    catalogue = load_catalogue()

    def bound(r: Resource | None) -> PoolCost | None:
        if r is None:
            return None
        if region is None:
            return PoolCost(None, None, "unknown: the profile names no region")
        if is_nodegroup(r):
            return nodegroup_max_hourly(r.doc.get("spec") or {}, region, prices)
        return max_hourly(r.doc.get("spec") or {}, region, prices, catalogue)

    out = []
    for c in changes:
        r = c.resource
        if is_pool(r):
            paths: tuple[str, ...] = ("spec.limits", "spec.template.spec.requirements")
            name = r.name
        elif is_nodegroup(r):
            paths = ("spec.scalingConfig", "spec.instanceTypes", "spec.launchTemplate")
            name = f"nodegroup/{r.name}"
        else:
            continue
        if c.op != "changed" or any(f.path.startswith(paths) for f in c.fields):
            out.append(PoolChange(r.component, name, bound(c.before), bound(c.after)))
    return out


def is_nodegroup(r: Resource) -> bool:
    return (r.group, r.kind) == ("eks.services.k8s.aws", "Nodegroup")


WORKLOAD_KINDS = {
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "ReplicaSet"),
    ("batch", "Job"),
}


def _pod_gpus(pod: dict) -> int:
    """GPUs one pod asks for: extended resources are never overcommitted, so the limit (or the
    request, which must then equal it) is what the scheduler reserves."""
    total = 0
    for c in pod.get("containers") or []:
        res = (c or {}).get("resources") or {}
        value = (res.get("limits") or {}).get(
            GPU_RESOURCE, (res.get("requests") or {}).get(GPU_RESOURCE)
        )
        parsed = parse(value) if value is not None else None
        total += int(parsed) if parsed is not None and parsed > 0 else 0
    return total


def _workload_gpus(r: Resource) -> int | None:
    if (r.group, r.kind) not in WORKLOAD_KINDS:
        return None
    spec = r.doc.get("spec") or {}
    pod = (spec.get("template") or {}).get("spec") or {}
    per_pod = _pod_gpus(pod)
    if not per_pod:
        return None
    copies = spec.get("parallelism" if r.kind == "Job" else "replicas", 1)
    return per_pod * (copies if isinstance(copies, int) and copies >= 0 else 1)


def _pool_gpus(r: Resource) -> int | None:
    limit = ((r.doc.get("spec") or {}).get("limits") or {}).get(GPU_RESOURCE)
    parsed = parse(limit) if limit is not None else None
    return int(parsed) if parsed is not None else None


def _gpu_pool(r: Resource) -> bool:
    """A pool that may launch GPU nodes: it has a GPU limit or asks for nvidia.com/gpu."""
    reqs = (((r.doc.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "requirements"
    ) or []
    return _pool_gpus(r) is not None or any(
        isinstance(q, dict) and "gpu" in str(q.get("key", "")) for q in reqs
    )


def gpu_totals(base: Snapshot, head: Snapshot) -> GpuTotals:
    """From whole snapshots (not only the changed units): a total counts every workload."""
    workloads: dict[str, list[int | None]] = {}
    pools: dict[str, list[int | None]] = {}
    for side, snap in enumerate((base, head)):
        for r in snap.resources:
            if is_pool(r) and _gpu_pool(r):
                pools.setdefault(r.name, [0, 0])[side] = _pool_gpus(r)
            elif (n := _workload_gpus(r)) is not None:
                workloads.setdefault(r.label, [None, None])[side] = n
    return GpuTotals(
        tuple(GpuCount(k, *v) for k, v in sorted(workloads.items())),
        tuple(GpuCount(k, *v) for k, v in sorted(pools.items())),
    )


def review(
    base: Snapshot,
    head: Snapshot,
    base_label: str,
    head_label: str,
    notes: tuple[str, ...] = (),
    gpus: GpuTotals | None = None,
    prices: Prices | None = None,
    region: str | None = None,
) -> Review:
    """`gpus` comes from whole snapshots when `base`/`head` hold only the changed units;
    `region` prices the NodePools in another region than the profile's."""
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
    region = region or profile_region(head, base)
    table = prices.table if prices else load_prices()
    return Review(
        base_label,
        head_label,
        tuple(reviews),
        tuple(_costs(changes, region, table)),
        region,
        notes,
        gpus if gpus is not None else gpu_totals(base, head),
        prices,
    )


# ---- values ----------------------------------------------------------------------------------


def _value(value: Any, limit: int = 100) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else json.dumps(value)
    return text if len(text) <= limit else text[: limit - 4] + '..."'


def describe_field(f: FieldChange) -> list[str]:
    """Diff lines, `-` for what goes and `+` for what comes, so GitHub and terminals colour
    them. A list of plain values shows only the items removed and added."""
    if f.op == "added":
        return [f"+ {f.path}: {_value(f.new)}"]
    if f.op == "removed":
        return [f"- {f.path}: {_value(f.old)}"]
    if isinstance(f.old, list) and isinstance(f.new, list):
        gone = [v for v in f.old if v not in f.new]
        new = [v for v in f.new if v not in f.old]
        if gone or new:
            return ([f"- {f.path}: {_value(gone)} (items removed)"] if gone else []) + (
                [f"+ {f.path}: {_value(new)} (items added)"] if new else []
            )
    return [f"- {f.path}: {_value(f.old)}", f"+ {f.path}: {_value(f.new)}"]


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def cost_cells(cost: PoolCost | None, hours: int) -> tuple[str, str]:
    """(hourly, monthly) as printed: `-` for no pool, `unbounded`, `unknown (no price: TYPES;
    >= $x)` naming the types without a price, `unknown (REASON)`, or `$x`. Never a zero for an
    unknown."""
    if cost is None:
        return "-", "-"
    if cost.hourly is not None:
        return _money(cost.hourly), _money(cost.hourly * hours)
    if cost.reason.startswith("no limits"):
        return "unbounded", "unbounded"
    if cost.unpriced:
        floor = cost.at_least or 0.0
        names = ", ".join(cost.unpriced)
        if not floor:
            return f"unknown (no price: {names})", "unknown"
        return (
            f"unknown (no price: {names}; >= {_money(floor)})",
            f"unknown (>= {_money(floor * hours)})",
        )
    why = cost.reason.removeprefix("unknown: ")
    return f"unknown ({why})", "unknown"


def _signed(value: float) -> str:
    return f"{'+' if value >= 0 else '-'}{_money(abs(value))}"


def delta_line(rev: Review) -> str:
    delta, why = rev.monthly_delta()
    if delta is None:
        return f"monthly maximum delta: unknown (no price or no bound: {', '.join(why)})"
    return f"monthly maximum delta: {_signed(delta)}"


def gpu_lines(rev: Review) -> list[str]:
    """The GPU totals as plain lines (text and Markdown print the same)."""
    g = rev.gpus

    def n(value: int | None) -> str:
        return "unbounded" if value is None else str(value)

    lines = [
        f"GPUs requested by workloads: {g.requested('before')} -> {g.requested('after')}",
        f"GPU NodePools' maximum: {n(g.pool_maximum('before'))} -> {n(g.pool_maximum('after'))}",
    ]
    lines += [
        f"  {c.label}: {c.before if c.before is not None else '-'} -> "
        f"{c.after if c.after is not None else '-'}"
        for c in g.workloads
        if c.before != c.after
    ]
    lines += [f"  NodePool {c.label}: {n(c.before)} -> {n(c.after)}" for c in g.pools]
    return lines


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


def _finding_json(f: Finding) -> dict[str, Any]:
    return {
        **f.risk.as_dict(),
        "marker": CLASSES[f.risk.cls].marker,
        "severity": severity(f.risk.cls),
        "component": f.component,
        "resource": f.resource,
    }


def _count(value: int | None) -> int | str:
    return "unbounded" if value is None else value


def to_json(rev: Review) -> dict[str, Any]:
    prices = rev.price_table
    delta, unknown = rev.monthly_delta()
    return {
        "base": rev.base,
        "head": rev.head,
        "notes": list(rev.notes),
        "changed": not rev.empty,
        "summary": {**rev.counts(), "risks": rev.risk_counts()},
        "classes": [
            {"id": c.id, "title": c.title, "marker": c.marker, "severity": i}
            for i, c in enumerate(CLASSES.values())
        ],
        "findings": [_finding_json(f) for f in rev.findings],
        "gpus": {
            "requested": {
                "before": rev.gpus.requested("before"),
                "after": rev.gpus.requested("after"),
            },
            "nodePoolMaximum": {
                "before": _count(rev.gpus.pool_maximum("before")),
                "after": _count(rev.gpus.pool_maximum("after")),
            },
            "workloads": [
                {"resource": c.label, "before": c.before, "after": c.after}
                for c in rev.gpus.workloads
            ],
            "nodePools": [
                {"nodePool": c.label, "before": _count(c.before), "after": _count(c.after)}
                for c in rev.gpus.pools
            ],
        },
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
            "priceSource": rev.price_source,
            "pricesAsOf": prices.as_of,
            "hoursPerMonth": prices.hours_per_month,
            "monthlyMaximumDelta": None if delta is None else round(delta, 2),
            "deltaUnknownBecause": list(unknown),
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
    hours = rev.price_table.hours_per_month
    lines = []
    for p in rev.costs:
        before, after = cost_cells(p.before, hours), cost_cells(p.after, hours)
        lines.append(
            f"  {_pool_label(p)}: max {before[0]}/h ({before[1]}/month) -> "
            f"{after[0]}/h ({after[1]}/month)"
        )
        for side, cost in (("before", p.before), ("after", p.after)):
            if cost is not None:
                lines.append(f"    {side}: {cost.reason}")
    lines.append(f"  {delta_line(rev)}")
    return lines


def _pool_label(p: PoolChange) -> str:
    return p.pool if p.pool.startswith("nodegroup/") else f"NodePool {p.pool}"


def cost_heading(rev: Review) -> str:
    return (
        f"Maximum cost of the NodePools and node groups changed (on-demand, {rev.region or 'region unknown'}; prices: "
        f"{rev.price_source})"
    )


def _finding_text(f: Finding, indent: str) -> list[str]:
    marker = CLASSES[f.risk.cls].marker
    at = f" {f.risk.path}" if f.risk.path else ""
    lines = [f"{indent}{marker} {f.risk.cls}: {f.resource}{at}", f"{indent}    {f.risk.reason}"]
    lines += [f"{indent}    {k}: {v}" for k, v in f.risk.context]
    return lines


def _should_show_gpus(rev: Review) -> bool:
    return rev.gpus.changed or bool(rev.costs)


def to_text(rev: Review, color: bool = False) -> str:
    if rev.empty:
        return f"no changes ({rev.base} -> {rev.head})\n" + "".join(
            f"note: {n}\n" for n in rev.notes
        )
    lines = [f"eksinf diff: {rev.base} -> {rev.head}"]
    lines += [f"note: {n}" for n in rev.notes]
    lines.append(_summary_line(rev))
    risks = rev.risk_counts()
    lines.append(
        "risks: "
        + (", ".join(f"{CLASSES[k].marker} {k} {v}" for k, v in risks.items()) if risks else "none")
    )
    if rev.findings:
        lines += ["", "findings, most severe first:"]
        for found in rev.findings:
            lines += _finding_text(found, "  ")
    if _should_show_gpus(rev):
        lines += ["", *gpu_lines(rev)]
    if rev.costs:
        lines += ["", cost_heading(rev) + ":", *_cost_lines(rev)]
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
            for x in e.risks:
                at = f" {x.path}" if x.path else ""
                lines.append(f"    {CLASSES[x.cls].marker} {x.cls}{at}: {x.reason}")
            lines += _crd_lines(e, "    ")
            for f in e.change.fields[:TEXT_FIELDS]:
                lines += [f"    {line}" for line in describe_field(f)]
            if len(e.change.fields) > TEXT_FIELDS:
                lines.append(f"    ... {len(e.change.fields) - TEXT_FIELDS} more (--format json)")
    text = "\n".join(lines) + "\n"
    return paint(text) if color else text


# ANSI SGR codes: red, green, bold, yellow, reset
_RED, _GREEN, _BOLD, _YELLOW, _RESET = "\033[31m", "\033[32m", "\033[1m", "\033[33m", "\033[0m"
SEVERE = 2  # the first classes (AWS deletions, IAM widening) are printed in red, the rest yellow


def paint(text: str) -> str:
    """ANSI colour for a terminal: `-` lines red, `+` lines green, findings by severity,
    component headings bold. Applied after the text is built, so the facts cannot differ."""
    markers = {c.marker: i for i, c in enumerate(CLASSES.values())}
    out = []
    for line in text.splitlines():
        bare = line.lstrip()
        colour = ""
        if bare.startswith("- "):
            colour = _RED
        elif bare.startswith("+ "):
            colour = _GREEN
        elif line.startswith("== "):
            colour = _BOLD
        else:
            first = bare.split(" ", 1)[0]
            if first in markers:
                colour = _RED + _BOLD if markers[first] < SEVERE else _YELLOW
        out.append(f"{colour}{line}{_RESET}" if colour and line else line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


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
            lines.append(f"- {CLASSES[x.cls].marker} **{x.cls}**{at}: {_md_escape(x.reason)}")
        body = _crd_lines(e, "")
        body += [line for f in e.change.fields[:MD_FIELDS] for line in describe_field(f)]
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


MD_FINDINGS = 60  # findings listed per part of the comment (open, collapsed); the JSON has all


def _md_code(text: str) -> str:
    return f"`{text.replace('`', chr(39))}`"


def _md_finding(f: Finding) -> list[str]:
    at = f" {_md_code(f.risk.path)}" if f.risk.path else ""
    lines = [
        f"- {CLASSES[f.risk.cls].marker} **{f.risk.cls}** {_md_code(f.resource)}{at}: "
        f"{_md_escape(f.risk.reason)}"
    ]
    lines += [f"  - {k}: {_md_code(v)}" for k, v in f.risk.context]
    return lines


def _md_findings(rev: Review) -> list[str]:
    """The most severe class's findings in full, the rest collapsed."""
    found = rev.findings
    if not found:
        return []
    top = found[0].risk.cls
    first = [f for f in found if f.risk.cls == top]
    rest = found[len(first) :]
    cls = CLASSES[top]
    out = [f"#### {cls.marker} Highest risk: `{cls.id}` · {cls.title}", ""]
    out += [line for f in first[:MD_FINDINGS] for line in _md_finding(f)]
    if len(first) > MD_FINDINGS:
        out.append(f"- ... {len(first) - MD_FINDINGS} more `{top}` in the JSON report")
    out.append("")
    if rest:
        classes = ", ".join(
            f"{CLASSES[c].marker} {c} {sum(1 for f in rest if f.risk.cls == c)}"
            for c in dict.fromkeys(f.risk.cls for f in rest)
        )
        out += [
            "<details>",
            f"<summary>{len(rest)} more finding(s), most severe first: {classes}</summary>",
            "",
        ]
        out += [line for f in rest[:MD_FINDINGS] for line in _md_finding(f)]
        if len(rest) > MD_FINDINGS:
            out.append(f"- ... {len(rest) - MD_FINDINGS} more in the JSON report")
        out += ["", "</details>", ""]
    return out


def to_markdown(rev: Review, details: str | None = None, limit: int = MARKDOWN_LIMIT) -> str:
    """The pull-request comment: what a reviewer must read first, open (summary, the highest
    risk's findings, GPU totals, cost), then everything else collapsed (the other findings, one
    section per component with its field changes as coloured `diff` blocks).

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
    head += ["| | risk | resources | what |", "|---|---|---:|---|"]
    for cls in CLASSES.values():
        if cls.id in risks:
            head.append(f"| {cls.marker} | `{cls.id}` | {risks[cls.id]} | {cls.title} |")
    if not risks:
        head.append("| | none | 0 | no risk class matched |")
    head.append("")
    head += _md_findings(rev)
    if _should_show_gpus(rev):
        g = gpu_lines(rev)
        head += [f"**{g[0]}** · **{g[1]}**", ""]
        if g[2:]:
            head += ["```diff", *(_gpu_diff(line.strip()) for line in g[2:]), "```", ""]
    if rev.costs:
        hours = rev.price_table.hours_per_month
        head += [
            f"**{cost_heading(rev)}:**",
            "",
            "| pool | before $/h | after $/h | before $/month | after $/month |",
            "|---|---:|---:|---:|---:|",
        ]
        for p in rev.costs:
            b, a = cost_cells(p.before, hours), cost_cells(p.after, hours)
            head.append(
                f"| `{p.component}/{p.pool}` | {_md_escape(b[0])} | {_md_escape(a[0])} | "
                f"{_md_escape(b[1])} | {_md_escape(a[1])} |"
            )
        head += ["", f"**{delta_line(rev)}**", ""]
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


def _gpu_diff(line: str) -> str:
    """`label: 2 -> 4` as a diff line: `+` when it grows, `-` when it shrinks, ` ` otherwise."""
    label, _, change = line.rpartition(": ")
    old, _, new = change.partition(" -> ")

    def value(text: str) -> float:
        return float("inf") if text == "unbounded" else 0.0 if text == "-" else float(text)

    try:
        mark = "+" if value(new) > value(old) else "-" if value(new) < value(old) else " "
    except ValueError:
        mark = " "
    return f"{mark} {label}: {change}"
