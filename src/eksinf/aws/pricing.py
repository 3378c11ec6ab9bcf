"""Live EC2 prices for `status`: on-demand from the Price List Query API, spot from EC2's spot
price history, both cached on disk with the time they were read.

On-demand: `pricing:GetProducts` (service AmazonEC2) for the stack's region, Linux, shared
tenancy, no pre-installed software, capacity status Used: the plain on-demand instance-hour.
The Price List Query API answers only in a few regions; us-east-1 serves every region's prices.
Spot: `ec2:DescribeSpotPriceHistory` with StartTime=now returns the price in effect now for each
zone; the instance's own zone is used.

`parse_*` functions are pure over the API's answers; `fetch_rates` does the I/O and the cache.
A failed read is never a zero: the rate is missing and `status` falls back to the shipped table
(on-demand) or says unknown (spot), labelled either way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..atomic import write_file
from .session import AWS_FAILURES, AwsSession, translate

PRICE_LIST_REGION = "us-east-1"
ON_DEMAND_TTL = timedelta(hours=24)  # list prices change rarely
SPOT_TTL = timedelta(hours=1)  # spot prices move within the day
_MAX_PAGES = 20  # bound on GetProducts pages per instance type (one product is expected)


def cache_file(region: str) -> Path:
    """Beside the chart cache (EKSINF_CACHE_DIR, else the user's cache directory)."""
    from ..charts import cache_dir

    return cache_dir().parent / "prices" / f"{region}.json"


def product_filters(region: str, instance_type: str) -> list[dict[str, str]]:
    match = {
        "regionCode": region,
        "instanceType": instance_type,
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "licenseModel": "No License required",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in match.items()]


def parse_on_demand(price_list: list[str], instance_type: str) -> float | None:
    """The USD hourly on-demand rate from GetProducts' PriceList (JSON strings), or None when
    the answer holds no rate or disagreeing rates for the type (never a guess)."""
    rates = set()
    for text in price_list:
        item = json.loads(text)
        attrs = (item.get("product") or {}).get("attributes") or {}
        if attrs.get("instanceType") != instance_type:
            continue
        for term in ((item.get("terms") or {}).get("OnDemand") or {}).values():
            for dim in (term.get("priceDimensions") or {}).values():
                usd = (dim.get("pricePerUnit") or {}).get("USD")
                if dim.get("unit") == "Hrs" and usd is not None and float(usd) > 0:
                    rates.add(round(float(usd), 6))
    return rates.pop() if len(rates) == 1 else None


def parse_spot(history: list[dict[str, Any]]) -> dict[str, float]:
    """`<type>@<zone>` -> the latest spot price in the history."""
    latest: dict[str, tuple[Any, float]] = {}
    for entry in history:
        key = f"{entry['InstanceType']}@{entry['AvailabilityZone']}"
        stamp = entry["Timestamp"]
        if key not in latest or stamp > latest[key][0]:
            latest[key] = (stamp, float(entry["SpotPrice"]))
    return {k: v for k, (_, v) in sorted(latest.items())}


@dataclass
class LiveRates:
    """What the APIs (or the cache) said. Keys missing from `on_demand`/`spot` are not known."""

    on_demand: dict[str, float] = field(default_factory=dict)
    spot: dict[str, float] = field(default_factory=dict)  # "<type>@<zone>"
    read_at: dict[str, str] = field(default_factory=dict)  # key -> ISO time it was read
    errors: list[str] = field(default_factory=list)


def _load_cache(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # absent or unreadable: read the APIs again
    return raw if isinstance(raw, dict) else {}


def _fresh(entry: Any, now: datetime, ttl: timedelta) -> bool:
    try:
        return now - datetime.fromisoformat(entry["readAt"]) < ttl
    except (TypeError, KeyError, ValueError):
        return False


def fetch_rates(
    session: AwsSession,
    region: str,
    on_demand_types: list[str],
    spot_keys: list[tuple[str, str]],
    now: datetime | None = None,
) -> LiveRates:
    """Rates for the types (on-demand) and (type, zone) pairs (spot) in use, from the cache
    when fresh, else from the APIs; new answers are written back with the time read."""
    now = now or datetime.now(UTC)
    path = cache_file(region)
    cache = _load_cache(path)
    od_cache: dict[str, Any] = cache.get("onDemand") or {}
    spot_cache: dict[str, Any] = cache.get("spot") or {}
    if not isinstance(od_cache, dict) or not isinstance(spot_cache, dict):
        od_cache, spot_cache = {}, {}  # a damaged cache is read again from the APIs
    out = LiveRates()
    stamp = now.isoformat(timespec="seconds")
    dirty = False

    for itype in sorted(set(on_demand_types)):
        entry: Any = od_cache.get(itype)
        if not _fresh(entry, now, ON_DEMAND_TTL):
            try:
                rate = _get_products(session, region, itype)
            except AWS_FAILURES as exc:
                out.errors.append(translate(exc, "pricing get-products").message)
                break  # unreachable or refused: the rest would fail the same way
            if rate is None:
                continue
            entry = od_cache[itype] = {"usd": rate, "readAt": stamp}
            dirty = True
        out.on_demand[itype] = float(entry["usd"])
        out.read_at[itype] = entry["readAt"]

    wanted = sorted({f"{t}@{z}" for t, z in spot_keys})
    stale = [k for k in wanted if not _fresh(spot_cache.get(k), now, SPOT_TTL)]
    if stale:
        try:
            history = _spot_history(session, sorted({k.split("@")[0] for k in stale}), now)
        except AWS_FAILURES as exc:
            out.errors.append(translate(exc, "ec2 describe-spot-price-history").message)
        else:
            for key, rate in parse_spot(history).items():
                if key in stale:
                    spot_cache[key] = {"usd": rate, "readAt": stamp}
                    dirty = True
    for key in wanted:
        entry = spot_cache.get(key)  # Any: what the cache file holds
        if _fresh(entry, now, SPOT_TTL):
            out.spot[key] = float(entry["usd"])
            out.read_at[key] = entry["readAt"]

    if dirty:
        body = {"region": region, "onDemand": od_cache, "spot": spot_cache}
        write_file(path, (json.dumps(body, indent=1, sort_keys=True) + "\n").encode())
    return out


def _get_products(session: AwsSession, region: str, instance_type: str) -> float | None:
    client = session.client("pricing", PRICE_LIST_REGION)
    items: list[str] = []
    token: dict[str, str] = {}
    for _page in range(_MAX_PAGES):
        answer = client.get_products(
            ServiceCode="AmazonEC2",
            Filters=product_filters(region, instance_type),
            FormatVersion="aws_v1",
            MaxResults=100,
            **token,
        )
        items += answer.get("PriceList", [])
        if not answer.get("NextToken"):
            break
        token = {"NextToken": answer["NextToken"]}
    return parse_on_demand(items, instance_type)


def _spot_history(session: AwsSession, types: list[str], now: datetime) -> list[dict]:
    ec2 = session.client("ec2")
    history: list[dict] = []
    pages = ec2.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=types,
        ProductDescriptions=["Linux/UNIX", "Linux/UNIX (Amazon VPC)"],
        StartTime=now,
        PaginationConfig={"MaxItems": 1000},
    )
    for page in pages:
        history += page.get("SpotPriceHistory", [])
    return history
