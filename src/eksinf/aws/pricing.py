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
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from eksinf.core.atomic import write_file
from eksinf.core.types import Docs

from .session import AWS_FAILURES, AwsSession, translate

PRICE_LIST_REGION = "us-east-1"
ON_DEMAND_TTL = timedelta(hours=24)  # list prices change rarely
SPOT_TTL = timedelta(hours=1)  # spot prices move within the day
_MAX_PAGES = 20  # bound on GetProducts pages per instance type (one product is expected)
CLOCK_SKEW = timedelta(minutes=5)  # a cache entry read later than now + this was not read here
MAX_CACHE_BYTES = 4 << 20  # a price cache holds a few rates; anything near this is not ours


def cache_file(region: str) -> Path:
    """In eksinf's cache root (EKSINF_CACHE_DIR, else the user's cache directory)."""
    from eksinf.core import cache

    return cache.root() / "prices" / f"{region}.json"


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


def usable_rate(value: Any) -> float | None:
    """A USD rate as a positive finite float (a number, or a string of one as the Price List
    writes them), or None: NaN, infinities, zero, negatives and anything else are no rate."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        rate = float(value)
    except ValueError:
        return None
    return rate if math.isfinite(rate) and rate > 0 else None


def parse_on_demand(price_list: list[Any], instance_type: str) -> float | None:
    """The USD hourly on-demand rate from GetProducts' PriceList (JSON strings), or None when
    the answer holds no rate or disagreeing rates for the type (never a guess). An item that is
    not a JSON object of the documented shape holds no rate."""
    rates = set()
    for text in price_list:
        try:
            item = json.loads(text)
        except (TypeError, ValueError, RecursionError):
            continue
        attrs = _dig(item, "product", "attributes")
        if attrs.get("instanceType") != instance_type:
            continue
        for term in _dig(item, "terms", "OnDemand").values():
            for dim in _dig(term, "priceDimensions").values():
                usd = usable_rate(_dig(dim, "pricePerUnit").get("USD"))
                if isinstance(dim, dict) and dim.get("unit") == "Hrs" and usd is not None:
                    rates.add(round(usd, 6))
    return rates.pop() if len(rates) == 1 else None


def _dig(value: Any, *keys: str) -> dict[str, Any]:
    """The object at `keys` under `value`, or {} wherever the answer has something else."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else {}


def parse_spot(history: list[Any]) -> dict[str, float]:
    """`<type>@<zone>` -> the latest spot price in the history. An entry without a type, zone,
    time or usable price says nothing about any price, and is skipped."""
    latest: dict[str, tuple[datetime, float]] = {}
    for entry in history:
        if not isinstance(entry, dict):
            continue
        itype, zone, stamp = (
            entry.get(k) for k in ("InstanceType", "AvailabilityZone", "Timestamp")
        )
        rate = usable_rate(entry.get("SpotPrice"))
        if not (isinstance(itype, str) and isinstance(zone, str) and isinstance(stamp, datetime)):
            continue
        if rate is None or stamp.tzinfo is None:
            continue
        key = f"{itype}@{zone}"
        if key not in latest or stamp > latest[key][0]:
            latest[key] = (stamp, rate)
    return {k: v for k, (_, v) in sorted(latest.items())}


@dataclass
class LiveRates:
    """What the APIs (or the cache) said. Keys missing from `on_demand`/`spot` are not known."""

    on_demand: dict[str, float] = field(default_factory=dict)
    spot: dict[str, float] = field(default_factory=dict)  # "<type>@<zone>"
    read_at: dict[str, str] = field(default_factory=dict)  # key -> ISO time it was read
    errors: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # cache entries not trusted, and why


def _load_cache(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            raw = json.loads(handle.read(MAX_CACHE_BYTES + 1))
    except (OSError, ValueError, RecursionError):
        return {}  # absent, unreadable or over the bound: read the APIs again
    return raw if isinstance(raw, dict) else {}


def entry_problem(entry: Any, now: datetime) -> str | None:
    """Why a cache entry cannot be trusted (None: it can): a price that is not a positive finite
    number (NaN, negative, zero, text), or a time read that is not an ISO time with a zone or
    lies in the future (it would stay fresh forever)."""
    if not isinstance(entry, dict):
        return "not an object"
    usd = entry.get("usd")
    if isinstance(usd, str) or usable_rate(usd) is None:
        return f"price {usd!r} is not a positive finite number"
    read_at = entry.get("readAt")
    try:
        when = datetime.fromisoformat(read_at) if isinstance(read_at, str) else None
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        return f"time read {read_at!r} is not an ISO time with a zone"
    if when > now + CLOCK_SKEW:
        return f"read at {read_at}, in the future"
    return None


def _fresh(entry: dict[str, Any], now: datetime, ttl: timedelta) -> bool:
    return now - datetime.fromisoformat(entry["readAt"]) < ttl


def _trusted(
    cache: dict[str, Any], key: str, now: datetime, path: Path, out: LiveRates
) -> dict[str, Any] | None:
    """The cache's entry for `key` if it can be trusted; an untrusted one is dropped from the
    cache (so it is read again and never written back) and named in `out.refused`."""
    entry = cache.get(key)
    if entry is None:
        return None
    problem = entry_problem(entry, now)
    if problem is None and isinstance(entry, dict):  # no problem: it is an object
        return entry
    del cache[key]
    out.refused.append(f"price cache {path}: {key} refused ({problem}); read again")
    return None


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
        entry = _trusted(od_cache, itype, now, path, out)
        if entry is None or not _fresh(entry, now, ON_DEMAND_TTL):
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
    trusted = {k: _trusted(spot_cache, k, now, path, out) for k in wanted}
    stale = [k for k, e in trusted.items() if e is None or not _fresh(e, now, SPOT_TTL)]
    if stale:
        try:
            history = _spot_history(session, sorted({k.split("@")[0] for k in stale}), now)
        except AWS_FAILURES as exc:
            out.errors.append(translate(exc, "ec2 describe-spot-price-history").message)
        else:
            for key, rate in parse_spot(history).items():
                if key in stale:
                    trusted[key] = spot_cache[key] = {"usd": rate, "readAt": stamp}
                    dirty = True
    for key in wanted:
        entry = trusted[key]
        if entry is not None and _fresh(entry, now, SPOT_TTL):
            out.spot[key] = float(entry["usd"])
            out.read_at[key] = entry["readAt"]

    if dirty or out.refused:  # a refused entry is dropped from the file too
        body = {"region": region, "onDemand": od_cache, "spot": spot_cache}
        text = json.dumps(body, indent=1, sort_keys=True, allow_nan=False) + "\n"
        write_file(path, text.encode())
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


def _spot_history(session: AwsSession, types: list[str], now: datetime) -> Docs:
    ec2 = session.client("ec2")
    history: Docs = []
    pages = ec2.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=types,
        ProductDescriptions=["Linux/UNIX", "Linux/UNIX (Amazon VPC)"],
        StartTime=now,
        PaginationConfig={"MaxItems": 1000},
    )
    for page in pages:
        history += page.get("SpotPriceHistory", [])
    return history
