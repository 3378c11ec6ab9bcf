"""What EC2 capacity costs and holds: the one price table (`status` and `diff` both read it) and
the instance catalogue that says how many CPUs, how much memory and how many GPUs each type has.

Both are hand-kept data files under `eksinf/data/`; a type or region they do not list is unknown,
never free. The price table is a dated snapshot of public on-demand prices (its `about` says
which and what it leaves out); live Price List answers replace its figures where they exist.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any, cast


@dataclass(frozen=True)
class PriceTable:
    about: str
    as_of: str
    hours_per_month: int
    regions: dict[str, Any]
    source: str = "the shipped price table"  # where the figures were read

    def with_rates(self, region: str, rates: dict[str, float], source: str) -> PriceTable:
        """This table with `rates` (instance type -> USD per hour) read live for `region`: they
        replace the shipped figures; types they lack keep theirs."""
        here = dict(self.regions.get(region, {}))
        here["instances"] = {**here.get("instances", {}), **rates}
        return replace(self, regions={**self.regions, region: here}, source=source)

    def instance_rate(self, region: str, instance_type: str) -> float | None:
        # the shipped table and with_rates hold numbers only
        return cast(
            float | None, self.regions.get(region, {}).get("instances", {}).get(instance_type)
        )

    def fixed_rate(self, region: str, key: str) -> float | None:
        return cast(float | None, self.regions.get(region, {}).get(key))


@cache
def load_prices() -> PriceTable:
    raw = json.loads(resources.files("eksinf").joinpath("data/prices.json").read_text())
    return PriceTable(
        raw["about"], raw["as_of"], raw["hours_per_month"], raw["regions"], raw["source"]
    )


@dataclass(frozen=True)
class InstanceType:
    """One EC2 instance type, described by the labels Karpenter puts on its nodes."""

    name: str  # g6.xlarge
    family: str
    size: str
    category: str
    generation: int
    arch: str
    cpu: int
    memory_mib: int
    gpus: int
    gpu_name: str | None


@cache
def load_catalogue() -> dict[str, tuple[InstanceType, ...]]:
    """Family -> every size of that family. A family that is listed is listed completely."""
    raw = json.loads(resources.files("eksinf").joinpath("data/instances.json").read_text())
    out: dict[str, tuple[InstanceType, ...]] = {}
    for family, info in raw["families"].items():
        out[family] = tuple(
            InstanceType(
                name=f"{family}.{size}",
                family=family,
                size=size,
                category=info["category"],
                generation=info["generation"],
                arch=info["arch"],
                cpu=row["cpu"],
                memory_mib=row["memoryMiB"],
                gpus=row.get("gpus", 0),
                gpu_name=row.get("gpuName"),
            )
            for size, row in info["sizes"].items()
        )
    return out
