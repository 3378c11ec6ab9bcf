"""Resolve a pinned chart to its archive bytes: cache, then mirror directory, then upstream.

Every archive is checked against the sha256 in `charts.lock` before it is used, whatever its
source; a mirror copy must also agree with the mirror's own SHA256SUMS. `resolve_pinned` and
`mirror_copy` are the one pinning engine, which upstream manifests (manifests.py) use too.
"""

from __future__ import annotations

import io
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urljoin, urlparse

from eksinf.core import cache
from eksinf.core.atomic import write_file
from eksinf.core.types import Doc, Docs
from eksinf.core.yamldump import dump_docs
from eksinf.core.yamlio import MAX_TEXT, load_docs, load_source
from eksinf.errors import CONTRACT, ENVIRONMENT, EksinfError
from eksinf.model import config
from eksinf.model.config import mirror_dir as mirror_dir  # defined beside config.mirror
from eksinf.model.digest import sha256_hex
from eksinf.model.stack import ChartSpec, Stack

MIRROR_ENV = config.MIRROR_ENV
MAX_CHART_BYTES = 64 << 20  # unpacked; the largest real chart here is a few MiB
FETCH_DEADLINE = 600.0  # seconds for one chart's index and archive from an HTTP repository
LOCK_HEADER = (
    "# Written by `eksinf charts lock`. Pins each chart archive and upstream manifest by sha256.\n"
)


@dataclass(frozen=True)
class LockEntry:
    """One chart pinned in charts.lock: its archive's sha256 and where it was pinned from."""

    chart: str
    version: str
    repo: str
    sha256: str
    pinned_from: str  # which source produced the pinned archive ("mirror" or the repo)

    def as_dict(self) -> dict[str, str]:
        return {
            "chart": self.chart,
            "version": self.version,
            "repo": self.repo,
            "sha256": self.sha256,
            "pinnedFrom": self.pinned_from,
        }


@dataclass(frozen=True)
class ResolvedChart:
    """A pinned chart's archive, checked against the lock, and where it came from."""

    spec: ChartSpec
    archive: bytes
    sha256: str
    origin: str  # cache | mirror | the upstream URL


def cache_dir() -> Path:
    return cache.root() / "charts"


def use_mirror(path: Path | None) -> None:
    """Set (or, with None, clear) this run's --chart-mirror (model.config holds it)."""
    config.use_mirror(path)


def _lock_body(stack: Stack) -> Doc:
    path = stack.lock_path
    if not path.is_file():
        return {}
    docs = load_source(path, label="charts.lock")
    body = docs[0] if docs else None
    return body if isinstance(body, dict) else {}


def read_lock_section(stack: Stack, section: str) -> list[Any]:
    """One section of charts.lock (`charts`, `manifests`): its list of entries."""
    items = _lock_body(stack).get(section) or []
    if not isinstance(items, list):
        raise EksinfError(
            f"charts.lock: {section} is not a list",
            hint="Regenerate it with `eksinf charts lock`.",
            exit_code=CONTRACT,
        )
    return items


def write_lock_sections(stack: Stack, sections: dict[str, Docs]) -> None:
    """Replace the given sections of charts.lock in one atomic write, keeping the others."""
    body = {**_lock_body(stack), **sections}
    ordered = {k: body[k] for k in sorted(body)}
    write_file(stack.lock_path, (LOCK_HEADER + dump_docs([ordered])).encode())


def read_lock(stack: Stack) -> dict[tuple[str, str, str], LockEntry]:
    entries = {}
    for item in read_lock_section(stack, "charts"):
        try:
            entry = LockEntry(
                item["chart"],
                str(item["version"]),
                item["repo"],
                item["sha256"],
                item["pinnedFrom"],
            )
        except (KeyError, TypeError) as exc:
            raise EksinfError(
                f"charts.lock: malformed entry {item!r}",
                hint="Regenerate it with `eksinf charts lock`.",
                exit_code=CONTRACT,
            ) from exc
        entries[(entry.chart, entry.version, entry.repo)] = entry
    return entries


def lock_items(entries: list[LockEntry]) -> Docs:
    """charts.lock's `charts` section for these pins."""
    return [e.as_dict() for e in sorted(entries, key=lambda e: (e.chart, e.version))]


def _lock_key(spec: ChartSpec) -> tuple[str, str, str]:
    return (spec.chart, spec.version, spec.repo)


def resolve(
    stack: Stack,
    spec: ChartSpec,
    mirror: Path | None,
    lock: dict[tuple[str, str, str], LockEntry] | None = None,
) -> ResolvedChart:
    """Return the archive for `spec`, verified against the lock."""
    lock = read_lock(stack) if lock is None else lock
    entry = lock.get(_lock_key(spec))
    if entry is None:
        raise EksinfError(
            f"chart {spec.chart} {spec.version} ({spec.repo}) is not pinned in charts.lock",
            hint="Run `eksinf charts lock` (with --chart-mirror if offline) and commit charts.lock.",
            exit_code=CONTRACT,
        )
    data, origin = resolve_pinned(
        f"chart {spec.chart} {spec.version}",
        entry.sha256,
        entry.pinned_from,
        cache_dir() / f"{entry.sha256}.tgz",
        lambda: fetch(spec, mirror),
    )
    return ResolvedChart(spec, data, entry.sha256, origin)


def resolve_pinned(
    what: str,
    sha256: str,
    pinned_from: str,
    cached: Path,
    fetch: Callable[[], tuple[bytes, str]],
) -> tuple[bytes, str]:
    """The bytes charts.lock pins for `what` (a chart archive or an upstream manifest) and where
    they came from: the cache file when it holds them, else `fetch()` (a mirror folder, then
    upstream), refused unless their sha256 is the pinned one, then cached."""
    try:
        data = cached.read_bytes() if cached.is_file() else b""
    except OSError as exc:
        raise _cache_error(cached.parent, exc) from exc
    if data and sha256_hex(data) == sha256:
        return data, "cache"
    data, origin = fetch()
    digest = _sha256(data)
    if digest != sha256:
        raise EksinfError(
            f"{what} from {origin} has sha256 {digest}, but charts.lock pins {sha256} "
            f"(pinned from {pinned_from})",
            hint="Refusing bytes that differ from the lock. If the change is intended, run "
            "`eksinf charts lock` and review the diff of charts.lock.",
            exit_code=CONTRACT,
        )
    try:
        write_file(cached, data)
    except OSError as exc:
        raise _cache_error(cached.parent, exc) from exc
    return data, origin


def mirror_copy(mirror: Path | None, filename: str) -> bytes | None:
    """`filename` from a mirror folder, if there; refused when the mirror's own SHA256SUMS lists
    another digest for it (a damaged or replaced copy)."""
    if mirror is None:
        return None
    candidate = mirror / filename
    if not candidate.is_file():
        return None
    data = candidate.read_bytes()
    listed = _mirror_sums(mirror).get(filename)
    if listed is not None and listed != _sha256(data):
        raise EksinfError(
            f"{candidate}: sha256 {_sha256(data)} disagrees with the mirror's SHA256SUMS "
            f"({listed})",
            hint="The mirror copy is damaged or was replaced: restore it.",
            exit_code=CONTRACT,
        )
    return data


# The bytes last hashed by `_sha256`, and their digest: a mirror copy is checked against the
# mirror's SHA256SUMS, then against charts.lock, and the two checks hash it once (Argo CD's
# manifest is 1.9 MB: ~1 ms). Kept by identity, so only the very object hashed matches.
_last_hashed: list[tuple[bytes, str]] = []


def _sha256(data: bytes) -> str:
    if _last_hashed and _last_hashed[0][0] is data:
        return _last_hashed[0][1]
    digest = sha256_hex(data)
    _last_hashed[:] = [(data, digest)]
    return digest


def _mirror_sums(mirror: Path) -> dict[str, str]:
    sums = mirror / "SHA256SUMS"
    if not sums.is_file():
        return {}
    out = {}
    for line in sums.read_text(encoding="utf-8").splitlines()[:10_000]:
        parts = line.split()
        if len(parts) == 2:
            out[parts[1].lstrip("*")] = parts[0]
    return out


def _cache_error(folder: Path, exc: OSError) -> EksinfError:
    return EksinfError(
        f"cannot use the cache {folder}: {exc.strerror or exc}",
        hint=f"Make it (or HOME) writable, or set {cache.CACHE_ENV} to a writable folder.",
        exit_code=ENVIRONMENT,
    )


def fetch(spec: ChartSpec, mirror: Path | None) -> tuple[bytes, str]:
    """Fetch an archive without the lock: mirror directory first, then upstream."""
    copy = mirror_copy(mirror, f"{spec.chart}-{spec.version}.tgz")
    if copy is not None:
        return copy, "mirror"
    try:
        if spec.repo.startswith("oci://"):
            return _fetch_oci(spec), spec.source
        return _fetch_http(spec), spec.source
    except EksinfError as exc:
        where = f" and not in the mirror {mirror}" if mirror is not None else ""
        raise EksinfError(
            f"chart {spec.chart} {spec.version} is unreachable at {spec.source}{where}: "
            f"{exc.message}",
            hint=f"Seed a mirror: put {spec.chart}-{spec.version}.tgz in a directory and pass "
            f"--chart-mirror DIR (or set {MIRROR_ENV}, or `mirror: DIR` in .eksinf/config.yaml).",
            exit_code=ENVIRONMENT,
        ) from exc


def _fetch_oci(spec: ChartSpec) -> bytes:
    import helm_python
    from helm_python.errors import HelmError

    # imported by the fetch paths only: a render from the cache or a mirror needs no network code
    from eksinf.core.net import is_loopback

    ref = f"{spec.repo.rstrip('/')}/{spec.chart}"
    host = urlparse(ref.replace("oci://", "http://", 1)).hostname or ""
    with tempfile.TemporaryDirectory(prefix="eksinf-pull-") as tmp:
        try:
            helm_python.pull(
                ref, version=spec.version, destination=tmp, plain_http=is_loopback(host)
            )
        except HelmError as exc:
            raise EksinfError(str(exc).splitlines()[0], exit_code=ENVIRONMENT) from exc
        archives = sorted(Path(tmp).glob("*.tgz"))
        if len(archives) != 1:
            raise EksinfError(f"expected one archive from {ref}", exit_code=ENVIRONMENT)
        return archives[0].read_bytes()


def _fetch_http(spec: ChartSpec) -> bytes:
    import requests

    from eksinf.core.net import Deadline, is_loopback, read_body

    repo = spec.repo.rstrip("/") + "/"
    parsed = urlparse(repo)
    if parsed.scheme == "http" and not is_loopback(parsed.hostname or ""):
        raise EksinfError(f"refusing plain HTTP to {parsed.hostname}", exit_code=ENVIRONMENT)
    deadline = Deadline.start(FETCH_DEADLINE)
    index_url = urljoin(repo, "index.yaml")
    try:
        with requests.get(index_url, timeout=deadline.timeout(index_url), stream=True) as got:
            got.raise_for_status()
            text = read_body(got, MAX_TEXT, deadline, index_url).decode("utf-8", "replace")
        index = load_source(Path("index.yaml"), text, label=f"{repo}index.yaml")[0]
        entries = index.get("entries") if isinstance(index, dict) else None
        versions = entries.get(spec.chart) if isinstance(entries, dict) else None
        match = next(
            (
                v
                for v in (versions if isinstance(versions, list) else [])
                if isinstance(v, dict) and str(v.get("version")) == spec.version
            ),
            None,
        )
        urls = match.get("urls") if match is not None else None
        if not isinstance(urls, list) or not urls or not isinstance(urls[0], str):
            raise EksinfError(f"{spec.chart} {spec.version} is not in {repo}index.yaml")
        url = urljoin(repo, urls[0])
        if urlparse(url).scheme == "http" and not is_loopback(urlparse(url).hostname or ""):
            raise EksinfError(f"refusing plain HTTP to {url}")
        with requests.get(url, timeout=deadline.timeout(url), stream=True) as archive:
            archive.raise_for_status()
            # gzip never makes an archive larger than what it unpacks to by more than headers
            return read_body(archive, MAX_CHART_BYTES, deadline, url)
    except requests.RequestException as exc:
        raise EksinfError(f"{type(exc).__name__}: {exc}", exit_code=ENVIRONMENT) from exc


def check_archive(spec: ChartSpec, data: bytes, origin: str) -> None:
    """Refuse (exit 3) an archive that is not a whole, readable chart whose Chart.yaml names
    `spec`'s chart and version: pinning a truncated or wrong file would make every later render
    fail far from the cause."""
    where = f"chart archive {spec.chart}-{spec.version}.tgz from {origin}"

    def refuse(why: str) -> EksinfError:
        return EksinfError(
            f"{where}: {why}",
            hint="Replace the archive with the chart's real .tgz (e.g. `helm pull`) and run "
            "`eksinf charts lock` again; nothing was pinned.",
            exit_code=CONTRACT,
        )

    chart_yaml: bytes | None = None
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member in tar:  # reading every member proves the stream is whole
                handle = tar.extractfile(member) if member.isfile() else None
                content = handle.read(MAX_CHART_BYTES + 1) if handle else b""
                total += len(content)
                if total > MAX_CHART_BYTES:
                    raise refuse(f"unpacks to more than {MAX_CHART_BYTES >> 20} MiB")
                if PurePosixPath(member.name).parts[1:] == ("Chart.yaml",):
                    chart_yaml = content
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise refuse(f"not a readable .tgz (truncated or another file: {exc})") from exc
    if chart_yaml is None:
        raise refuse("holds no <chart>/Chart.yaml")
    docs = load_docs(chart_yaml.decode("utf-8", "replace"), f"{where}: Chart.yaml")
    meta = docs[0] if docs and isinstance(docs[0], dict) else {}
    found = (str(meta.get("name")), str(meta.get("version")))
    if found != (spec.chart, spec.version):
        raise refuse(f"its Chart.yaml says {found[0]} {found[1]}, not {spec.chart} {spec.version}")


def pins(stack: Stack, mirror: Path | None) -> list[LockEntry]:
    """Pin every chart the stack uses to the archive currently served by its source (nothing is
    written: `manifests.lock` writes charts.lock once every pin is known)."""
    entries: dict[tuple[str, str, str], LockEntry] = {}
    for comp in stack.components:
        for spec in comp.charts:
            if _lock_key(spec) in entries:
                continue
            data, origin = fetch(spec, mirror)
            check_archive(spec, data, origin)
            entries[_lock_key(spec)] = LockEntry(
                spec.chart, spec.version, spec.repo, _sha256(data), origin
            )
    return sorted(entries.values(), key=lambda e: (e.chart, e.version))
