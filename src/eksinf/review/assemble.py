"""A review of two snapshots, assembled: changes grouped by plane and component with their risks
(kernel findings of risks.CLASSES), the NodePool and node group cost bounds, and GPU totals.
report.py prints it.

Everything here is pure; `eksinf diff` (cli/review.py) gathers the snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from eksinf.core.types import Doc
from eksinf.model.prices import PriceTable, load_catalogue, load_prices
from eksinf.model.stack import PLANES

from ..model.checks import Finding
from ..model.names import GPU_RESOURCE, PROFILE_KIND
from ..model.quantity import parse
from .changes import ResourceChange, compare
from .cost import PoolCost, max_hourly, nodegroup_max_hourly
from .risks import CLASSES, assess, severity
from .snapshot import STACK_GROUP, Resource, Snapshot

OPS = ("added", "removed", "changed")


@dataclass(frozen=True)
class Entry:
    change: ResourceChange
    risks: tuple[Finding, ...]


@dataclass(frozen=True)
class ComponentReview:
    name: str
    plane: str
    entries: tuple[Entry, ...]

    @property
    def classes(self) -> list[str]:
        return [c for c in CLASSES if any(r.name == c for e in self.entries for r in e.risks)]


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
        """Every finding, most severe class first (stable: component and resource order within),
        placed at (component, resource label)."""
        found = [
            replace(r, places=(c.name, e.change.resource.label))
            for c in self.components
            for e in c.entries
            for r in e.risks
        ]
        return sorted(found, key=lambda f: severity(f.name))

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
            n = sum(1 for e in self.entries if any(r.name == cls for r in e.risks))
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


def _pod_gpus(pod: Doc) -> int:
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
