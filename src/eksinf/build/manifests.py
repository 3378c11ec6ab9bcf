"""Resolve a pinned upstream manifest (an `install.yaml`) to its bytes: cache, then mirror
directory, then its URL, through the same pinning as charts (`charts.resolve_pinned`): every
copy is checked against the sha256 pinned in charts.lock (section `manifests:`) before it is
used, whatever its source.

The mirror directory is EKSINF_MANIFEST_MIRROR, else the `manifests` folder beside the chart
mirror (one offline mirror holds both). A mirror's own SHA256SUMS, when present, must agree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from eksinf.build import charts
from eksinf.build.charts import (
    FETCH_DEADLINE,
    cache_dir,
    mirror_copy,
    read_lock_section,
    resolve_pinned,
)
from eksinf.build.charts import mirror_dir as chart_mirror_dir
from eksinf.errors import CONTRACT, ENVIRONMENT, EksinfError
from eksinf.model.digest import sha256_hex
from eksinf.model.stack import ManifestSpec, Stack

MIRROR_ENV = "EKSINF_MANIFEST_MIRROR"
LOCK_SECTION = "manifests"
MAX_BYTES = 64 * 1024 * 1024  # bound on one manifest (Argo CD's install.yaml is ~1.5 MB)


@dataclass(frozen=True)
class ManifestLock:
    """One upstream manifest pinned in charts.lock: its sha256 and where it was pinned from."""

    name: str
    version: str
    url: str
    sha256: str
    pinned_from: str  # "mirror" or the URL

    def as_dict(self) -> dict[str, str]:
        return {
            "name": self.name,
            "version": self.version,
            "url": self.url,
            "sha256": self.sha256,
            "pinnedFrom": self.pinned_from,
        }


@dataclass(frozen=True)
class ResolvedManifest:
    """A pinned upstream manifest's text, checked against the lock, and where it came from."""

    spec: ManifestSpec
    text: str
    sha256: str
    origin: str  # cache | mirror | the URL


def mirror_dir(chart_mirror: Path | None = None, root: Path | None = None) -> Path | None:
    """EKSINF_MANIFEST_MIRROR, else `manifests/` beside the chart mirror (given, or the one
    charts.mirror_dir finds for the stack `root`)."""
    env = os.environ.get(MIRROR_ENV)
    if env:
        return Path(env)
    charts = chart_mirror_dir(chart_mirror, root)
    return charts.parent / "manifests" if charts is not None else None


def read_lock(stack: Stack) -> dict[tuple[str, str], ManifestLock]:
    entries = {}
    for item in read_lock_section(stack, LOCK_SECTION):
        try:
            entry = ManifestLock(
                item["name"], str(item["version"]), item["url"], item["sha256"], item["pinnedFrom"]
            )
        except (KeyError, TypeError) as exc:
            raise EksinfError(
                f"charts.lock: malformed manifests entry {item!r}",
                hint="Regenerate it with `eksinf charts lock`.",
                exit_code=CONTRACT,
            ) from exc
        entries[(entry.url, entry.version)] = entry
    return entries


def resolve(
    stack: Stack,
    spec: ManifestSpec,
    mirror: Path | None,
    lock: dict[tuple[str, str], ManifestLock] | None = None,
) -> ResolvedManifest:
    """The manifest's text, verified against the lock."""
    lock = read_lock(stack) if lock is None else lock
    entry = lock.get((spec.url, spec.version))
    if entry is None:
        raise EksinfError(
            f"manifest {spec.name} {spec.version} ({spec.url}) is not pinned in charts.lock",
            hint="Run `eksinf charts lock` (with EKSINF_MANIFEST_MIRROR if offline) and commit "
            "charts.lock.",
            exit_code=CONTRACT,
        )
    data, origin = resolve_pinned(
        f"manifest {spec.name} {spec.version}",
        entry.sha256,
        entry.pinned_from,
        cache_dir().parent / "manifests" / f"{entry.sha256}.yaml",
        lambda: fetch(spec, mirror),
    )
    return ResolvedManifest(spec, data.decode("utf-8"), entry.sha256, origin)


def fetch(spec: ManifestSpec, mirror: Path | None) -> tuple[bytes, str]:
    """The manifest without the lock: mirror directory first, then its URL."""
    copy = mirror_copy(mirror, spec.mirror_file)
    if copy is not None:
        return copy, "mirror"
    import requests

    from eksinf.core.net import Deadline, read_body

    host = urlparse(spec.url).hostname or ""
    deadline = Deadline.start(FETCH_DEADLINE)
    try:
        with requests.get(spec.url, timeout=deadline.timeout(spec.url), stream=True) as resp:
            resp.raise_for_status()
            data = read_body(resp, MAX_BYTES, deadline, f"manifest {spec.url}")
    except requests.RequestException as exc:
        where = f" and {spec.mirror_file} is not in the mirror {mirror}" if mirror else ""
        raise EksinfError(
            f"manifest {spec.name} {spec.version} is unreachable at {host}{where}: "
            f"{type(exc).__name__}",
            hint=f"Offline, pass --chart-mirror DIR (or `mirror: DIR` in .eksinf/config.yaml) with "
            f"{spec.mirror_file} in DIR/../manifests "
            f"(or set {MIRROR_ENV} to the folder that holds it).",
            exit_code=ENVIRONMENT,
        ) from exc
    return data, spec.url


def pins(stack: Stack, mirror: Path | None) -> list[ManifestLock]:
    """Pin every manifest the stack uses to the bytes its source serves now (nothing written)."""
    entries: dict[tuple[str, str], ManifestLock] = {}
    for comp in stack.components:
        for spec in (*comp.manifests, *comp.cluster_crds):
            if (spec.url, spec.version) in entries:
                continue
            data, origin = fetch(spec, mirror)
            entries[(spec.url, spec.version)] = ManifestLock(
                spec.name, spec.version, spec.url, sha256_hex(data), origin
            )
    return sorted(entries.values(), key=lambda e: (e.name, e.version))


def lock(
    stack: Stack, chart_mirror: Path | None, manifest_mirror: Path | None
) -> tuple[list[charts.LockEntry], list[ManifestLock]]:
    """`charts lock`: pin every chart and manifest, then rewrite charts.lock once. Any fetch or
    check that fails leaves charts.lock exactly as it was: nothing is written until every pin
    is known."""
    chart_pins = charts.pins(stack, chart_mirror)
    manifest_pins = pins(stack, manifest_mirror)
    charts.write_lock_sections(
        stack,
        {
            "charts": charts.lock_items(chart_pins),
            LOCK_SECTION: [e.as_dict() for e in manifest_pins],
        },
    )
    return chart_pins, manifest_pins
