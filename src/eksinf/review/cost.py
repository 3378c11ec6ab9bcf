"""The most a Karpenter NodePool can cost per hour, from its limits and the instance types its
requirements allow, priced with the table `eksinf status` uses.

A NodePool's `spec.limits` bounds the resources of all its nodes together (cpu, memory,
nvidia.com/gpu, nodes; karpenter.sh docs, concepts/nodepools "spec.limits"). For each limited
resource the spend is at most the limit times the highest price per unit of that resource among
the types the pool may launch; the bound is the smallest of those. On-demand prices bound spot
and reserved capacity too (reservations bill at the on-demand rate).

Unknown stays unknown: a pool without limits is unbounded, a pool that does not name its
instance families (or names one the catalogue lacks) cannot be priced, and a candidate type
without a price leaves only a lower bound ("at least"). Karpenter notes that limit checks are
eventually consistent and can overrun during rapid scale-out; the bound is the limit's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eksinf.core.types import Doc
from eksinf.model.prices import InstanceType, PriceTable

from ..model.names import FAMILY_KEY, GPU_RESOURCE
from ..model.quantity import parse

TYPE_KEY = "node.kubernetes.io/instance-type"
# How each requirement key reads an instance type; keys not listed are ignored, which only
# widens the candidate set, so the bound stays an upper bound.
_LABELS = {
    FAMILY_KEY: lambda t: t.family,
    TYPE_KEY: lambda t: t.name,
    "karpenter.k8s.aws/instance-size": lambda t: t.size,
    "karpenter.k8s.aws/instance-category": lambda t: t.category,
    "karpenter.k8s.aws/instance-generation": lambda t: str(t.generation),
    "karpenter.k8s.aws/instance-cpu": lambda t: str(t.cpu),
    "karpenter.k8s.aws/instance-memory": lambda t: str(t.memory_mib),
    "karpenter.k8s.aws/instance-gpu-count": lambda t: str(t.gpus),
    "karpenter.k8s.aws/instance-gpu-name": lambda t: t.gpu_name,
    "kubernetes.io/arch": lambda t: t.arch,
}


def _number(value: Any) -> float | None:
    parsed = parse(value)
    return None if parsed is None or parsed < 0 else float(parsed)


# Units of each limited resource per instance type.
_PER_TYPE = {
    "cpu": lambda t: t.cpu,
    "memory": lambda t: t.memory_mib * 1024**2,
    GPU_RESOURCE: lambda t: t.gpus,
    "nodes": lambda t: 1,
}


@dataclass(frozen=True)
class PoolCost:
    """The maximum hourly spend of one NodePool. `hourly` is None when unknown or unbounded."""

    hourly: float | None
    at_least: float | None  # a lower bound on the maximum, when some candidate has no price
    reason: str  # how the figure was reached, or why it is unknown
    candidates: tuple[str, ...] = ()
    unpriced: tuple[str, ...] = ()

    def as_dict(self, hours_per_month: int) -> dict[str, Any]:
        return {
            "hourly": _round(self.hourly),
            "monthly": _round(self.hourly * hours_per_month) if self.hourly is not None else None,
            "atLeastHourly": _round(self.at_least),
            "reason": self.reason,
            "candidates": list(self.candidates),
            "unpriced": list(self.unpriced),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _matches(t: InstanceType, req: Doc) -> bool:
    read = _LABELS.get(req.get("key", ""))
    if read is None:
        return True
    have = read(t)
    values = [str(v) for v in req.get("values") or []]
    op = req.get("operator")
    if op == "In":
        return have in values
    if op == "NotIn":
        return have not in values
    if op == "Exists":
        return have is not None
    if op == "DoesNotExist":
        return have is None
    if op in ("Gt", "Lt") and values and have is not None:
        try:
            return int(have) > int(values[0]) if op == "Gt" else int(have) < int(values[0])
        except ValueError:
            return True
    return True


def candidates(
    spec: Doc, catalogue: dict[str, tuple[InstanceType, ...]]
) -> tuple[list[InstanceType], str | None]:
    """The catalogued types a pool may launch, or the reason they cannot be known."""
    reqs = ((spec.get("template") or {}).get("spec") or {}).get("requirements") or []
    reqs = [r for r in reqs if isinstance(r, dict)]
    named = [
        r for r in reqs if r.get("key") in (FAMILY_KEY, TYPE_KEY) and r.get("operator") == "In"
    ]
    if not named:
        return [], "its requirements do not name instance families (instance-family In)"
    families: set[str] = set()
    for req in named:
        for value in req.get("values") or []:
            families.add(str(value) if req["key"] == FAMILY_KEY else str(value).split(".")[0])
    missing = sorted(f for f in families if f not in catalogue)
    if missing:
        return [], f"instance families {', '.join(missing)} are not in the instance catalogue"
    types = [t for f in sorted(families) for t in catalogue[f]]
    return [t for t in types if all(_matches(t, r) for r in reqs)], None


def max_hourly(
    spec: Doc, region: str, prices: PriceTable, catalogue: dict[str, tuple[InstanceType, ...]]
) -> PoolCost:
    limits = {k: _number(v) for k, v in (spec.get("limits") or {}).items() if k in _PER_TYPE}
    if not limits or any(v is None for v in limits.values()):
        return PoolCost(None, None, "no limits: the pool's spend is unbounded")
    types, why = candidates(spec, catalogue)
    if why:
        return PoolCost(None, None, f"unknown: {why}")
    # a type bigger than a limit cannot launch at all under it
    types = [t for t in types if all(_PER_TYPE[k](t) <= v for k, v in limits.items())]
    if not types:
        return PoolCost(
            0.0, None, "no instance type fits its requirements and limits: it launches nothing"
        )
    names = tuple(t.name for t in types)
    rates = {t.name: prices.instance_rate(region, t.name) for t in types}
    unpriced = tuple(n for n, r in rates.items() if r is None)
    bound: float | None = None
    steps = []
    for resource, limit in sorted(limits.items()):
        assert limit is not None
        per_unit = [
            (rates[t.name] / _PER_TYPE[resource](t), t.name)
            for t in types
            if rates[t.name] is not None and _PER_TYPE[resource](t) > 0
        ]
        if any(_PER_TYPE[resource](t) == 0 for t in types):
            continue  # some candidate uses none of it: this limit alone bounds nothing
        if not per_unit:
            continue
        rate, worst = max(per_unit)
        value = limit * rate
        steps.append(f"{resource} {limit:g} x ${rate:.4f} ({worst})")
        if bound is None or value < bound:
            bound = value
    if unpriced:  # checked first: a missing price is the reason, whatever the limits bound
        # what the priced types alone can really reach: whole nodes of one type within the limits
        reach = max(
            (
                min(int(v // _PER_TYPE[k](t)) for k, v in limits.items() if _PER_TYPE[k](t) > 0)
                * (rates[t.name] or 0.0)
                for t in types
                if rates[t.name] is not None
            ),
            default=0.0,
        )
        return PoolCost(
            None,
            reach,
            f"unknown: no price for {', '.join(unpriced)} in {region}"
            + (f"; the priced types alone reach ${reach:.2f}/h" if reach else ""),
            names,
            unpriced,
        )
    if bound is None:
        return PoolCost(
            None, None, "unknown: no limit bounds every candidate type", names, unpriced
        )
    return PoolCost(bound, None, "; ".join(steps), names, unpriced)


# A node group that names no instance type and no launch template gets this one (ACK eks
# Nodegroup CRD, spec.instanceTypes: "then t3.medium is used, by default").
NODEGROUP_DEFAULT_TYPE = "t3.medium"


def nodegroup_max_hourly(spec: Doc, region: str, prices: PriceTable) -> PoolCost:
    """The most an EKS managed node group can cost per hour: `scalingConfig.maxSize` nodes of
    its dearest instance type (a launch template's type is not read here: unknown)."""
    max_size = (spec.get("scalingConfig") or {}).get("maxSize")
    if not isinstance(max_size, int) or isinstance(max_size, bool) or max_size < 0:
        return PoolCost(None, None, "unknown: no scalingConfig.maxSize")
    types = [str(t) for t in spec.get("instanceTypes") or []]
    if not types:
        if spec.get("launchTemplate"):
            return PoolCost(None, None, "unknown: the instance type is in its launch template")
        types = [NODEGROUP_DEFAULT_TYPE]
    rates = {t: prices.instance_rate(region, t) for t in types}
    unpriced = tuple(t for t, r in rates.items() if r is None)
    priced = [(r, t) for t, r in rates.items() if r is not None]
    if unpriced:
        reach = max_size * max(priced)[0] if priced else 0.0
        return PoolCost(
            None,
            reach,
            f"unknown: no price for {', '.join(unpriced)} in {region}",
            tuple(types),
            unpriced,
        )
    rate, worst = max(priced)
    return PoolCost(
        max_size * rate, None, f"maxSize {max_size} x ${rate:.4f} ({worst})", tuple(types)
    )
