"""Component bundles: reproducible tar.gz files built from configs/, and a safe unpacker.

A bundle is the flat contents of configs/<component>/ as a tar.gz whose bytes depend only on the
file names and contents: entries sorted, mode 0644, owner 0:0 with empty names, mtime 0, and a
gzip header with no name and no timestamp. So the same configs/ gives the same digest anywhere.

`safe_unpack` is the only way a bundle is read back: it accepts regular files with safe relative
names, refuses everything else by name and rule, and writes through a staging directory.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shutil
import sys
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from eksinf import __version__
from eksinf.core import cache, inside
from eksinf.core.atomic import write_file
from eksinf.core.gitinfo import commit_of
from eksinf.core.outdir import MARKER, MARKER_TEXT, claim, replace_with, staging_for
from eksinf.errors import CONTRACT, FAILURE, USAGE, EksinfError, write_failure
from eksinf.model.configs import parse_unit
from eksinf.model.digest import oci_digest, sha256_hex
from eksinf.model.placeholder import scan, text_may_hold
from eksinf.model.stack import Stack

if TYPE_CHECKING:
    from eksinf.build.units import Unit
    from eksinf.publish.oci import PushResult

BUNDLE_SUFFIX = ".tar.gz"
FILE_MODE = 0o644
# Caps for unpacking: a rendered unit is at most a few MiB (the largest CRD files are ~1 MiB).
MAX_MEMBER = 64 * 1024 * 1024
MAX_TOTAL = 256 * 1024 * 1024
MAX_MEMBERS = 10_000


# ---- building -----------------------------------------------------------------------------


def _check_name(name: str) -> None:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts or "\\" in name or name != str(path):
        raise EksinfError(
            f"bundle entry {name!r} is not a clean relative path",
            hint="Bundle entries are relative POSIX paths without '.', '..' or a leading '/'.",
            exit_code=FAILURE,
        )


def tar_bytes(files: dict[str, bytes]) -> bytes:
    """The uncompressed tar: its sha256 is stable even across zlib builds."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            _check_name(name)
            data = files[name]
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            info.mode = FILE_MODE
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def gzip_bytes(data: bytes) -> bytes:
    out = io.BytesIO()
    # filename="" and mtime=0 keep the gzip header free of anything but the content.
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(data)
    return out.getvalue()


def bundle_bytes(files: dict[str, bytes]) -> bytes:
    """A reproducible tar.gz of `files` (relative name -> content)."""
    return compress(tar_bytes(files))


def compress(tar: bytes) -> bytes:
    """`gzip_bytes(tar)`. Compressing is most of a bundle's cost and its result depends on the
    tar bytes alone, so it goes through the derived-data cache, keyed by them (and zlib's
    version)."""
    entry = cache.key(b"gzip-9", zlib.ZLIB_RUNTIME_VERSION.encode(), tar)
    hit = cache.get("gzip", entry)
    if hit is not None and _gunzips_to(hit, tar):
        return hit
    data = gzip_bytes(tar)
    cache.put("gzip", entry, data)
    return data


_DIGEST = re.compile(rb"sha256:[0-9a-f]{64}")


def bundle_digest(files: dict[str, bytes]) -> str:
    """`oci_digest(bundle_bytes(files))`, without building the bundle when these exact files
    were bundled before: a rerun with nothing changed compares releases and bundles by digest
    alone. The digest depends on the names, the contents and the code that writes the tar and
    the gzip (eksinf's, Python's, zlib's), so the derived-data cache keeps it under all of them."""
    entry = cache.key(
        b"bundle-digest-1",
        f"Python {sys.version}; zlib {zlib.ZLIB_RUNTIME_VERSION}".encode(),
        cache.code_digest().encode(),
        *(part for name in sorted(files) for part in (name.encode(), files[name])),
    )
    hit = cache.get("bundle-digest", entry)
    if hit is not None and _DIGEST.fullmatch(hit):
        return hit.decode()
    digest = oci_digest(bundle_bytes(files))
    cache.put("bundle-digest", entry, digest.encode())
    return digest


def _gunzips_to(data: bytes, tar: bytes) -> bool:
    """A cached archive is used only if it holds exactly these tar bytes (decompressing is
    several times cheaper than compressing)."""
    try:
        return gzip.decompress(data) == tar
    except (OSError, EOFError, zlib.error):
        return False


@dataclass(frozen=True)
class Bundle:
    component: str
    path: Path
    sha256: str  # of the tar.gz: the OCI layer digest
    tar_sha256: str  # of the uncompressed tar: stable even if zlib changes
    size: int
    files: tuple[str, ...]
    data: bytes = field(repr=False, compare=False)
    provenance: dict[str, Any] = field(default_factory=dict, compare=False)
    placeholders: int = field(default=0, compare=False)  # values a link fills in (a base)

    @property
    def title(self) -> str:
        return f"{self.component}{BUNDLE_SUFFIX}"

    @property
    def digest(self) -> str:
        return f"sha256:{self.sha256}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "path": str(self.path),
            "title": self.title,
            "sha256": self.sha256,
            "tarSha256": self.tar_sha256,
            "size": self.size,
            "files": list(self.files),
            "provenance": self.provenance,
            "placeholders": self.placeholders,
        }


def component_files(stack: Stack, component: str) -> dict[str, bytes]:
    """The committed unit files of one component: relative name -> bytes."""
    root = stack.configs_dir / component
    # only regular files inside the stack: a link in configs/ is refused, never bundled
    return {
        p.relative_to(root).as_posix(): inside.read_bytes(p, stack.root, stack.root)
        for p in inside.files_under(root, stack.root)
    }


def _committed_units(component: str, files: dict[str, bytes], parsed: bool) -> list[Unit]:
    """One component's units; parsed now (`parse_unit`: its errors name the file), unless these
    bytes parsed before (`parsed`), when a stage parses a unit only if it asks for it."""
    from eksinf.build.units import Unit

    units = []
    for name, data in files.items():
        text = data.decode("utf-8")
        docs = None if parsed else parse_unit(component, name, text).docs
        units.append(Unit(component, name, text, docs))
    return units


def _committed_key(components: dict[str, dict[str, bytes]]) -> str:
    """The key of the committed bytes being bundled and eksinf's code: what the guard finds in
    them is a function of these alone (the allow files are applied each run), so it is kept
    under this key as a render's findings are under the render's (units.kept)."""
    parts = [b"bundle-committed-1", cache.code_digest().encode()]
    for component, files in components.items():
        parts.append(component.encode())
        for name, data in sorted(files.items()):
            parts += [name.encode(), data]
    return cache.key(*parts)


def guard_committed(stack: Stack, components: dict[str, dict[str, bytes]]) -> None:
    """Run the flattening guard on exactly the bytes being bundled.

    We guard the committed configs/, not a fresh render: the bundle ships configs/, this needs no
    charts or Helm engine, and `eksinf verify` (which CI runs first) already proves configs/
    equals a fresh render and covers the template-level hazards only a render can see.
    """
    # guard imports render, and the render's units load only to guard: keep bundle importable
    # on its own, and light for the commands that only digest or unpack bundles (sandbox up)
    from eksinf.build.guard import check
    from eksinf.build.units import ComponentOutput, RenderResult

    key = _committed_key(components)
    parsed = cache.passed("bundle-units", key.encode())
    outputs = tuple(
        ComponentOutput(stack.component(name), tuple(_committed_units(name, files, parsed)))
        for name, files in components.items()
    )
    report = check(RenderResult(stack, outputs, key=key))
    if not parsed:
        cache.record_pass("bundle-units", key.encode())
    if report.ok:
        return
    lines = [f"{f.component}/{f.file}: {f.resource}: {f.hazard}" for f in report.blocking]
    raise EksinfError(
        f"flattening guard: {len(lines)} unhandled hazard(s) in configs/: " + "; ".join(lines),
        hint="Fix each one, or allow it in render/<component>/HAZARDS.allow with `hazard`, "
        "`resource` and a `reason`; then re-render.",
        exit_code=CONTRACT,
    )


def chart_provenance(stack: Stack, component: str) -> list[dict[str, Any]]:
    """The pinned charts a component was rendered from, as recorded in configs/provenance.json."""
    from eksinf.build.units import PROVENANCE_FILE

    path = stack.configs_dir / PROVENANCE_FILE
    if not path.is_file():
        return []
    try:
        record = json.loads(inside.read_bytes(path, stack.root))
    except ValueError as exc:
        raise EksinfError(
            f"configs/{PROVENANCE_FILE}: not valid JSON ({exc})",
            hint="Re-render with `eksinf render`.",
            exit_code=CONTRACT,
        ) from exc
    return [
        {k: c[k] for k in ("name", "chart", "version", "repo", "sha256") if k in c}
        for c in record.get("charts", [])
        if c.get("component") == component
    ]


def provenance(
    stack: Stack, component: str, sha256: str, tar_sha256: str, commit: str | None
) -> dict[str, Any]:
    return {
        "sourceCommit": commit,
        "tool": {"name": "eksinf", "version": __version__},
        "charts": chart_provenance(stack, component),
        "bundleSha256": sha256,
        "tarSha256": tar_sha256,
    }


def rendered_components(stack: Stack) -> list[str]:
    """Components with at least one committed unit, in stack order."""
    return [c.name for c in stack.components if component_files(stack, c.name)]


def build_bundles(
    stack: Stack, components: list[str] | None = None, out: Path | None = None
) -> list[Bundle]:
    """Write bundles/<component>.tar.gz for the chosen (default: every rendered) component.

    The guard runs over all chosen components before any bundle is written.
    """
    if components:
        names = [stack.component(n).name for n in components]
        for name in names:
            if not component_files(stack, name):
                raise EksinfError(
                    f"component {name!r} has no rendered units in configs/{name}/",
                    hint="Run `eksinf render` (and commit configs/) before bundling it.",
                    exit_code=FAILURE,
                )
    else:
        names = rendered_components(stack)
        if not names:
            raise EksinfError(
                "no component has rendered units in configs/",
                hint="Run `eksinf render` first.",
                exit_code=FAILURE,
            )
    # an explicit --out gets bundles added, so it must be eksinf's to write (outdir.claim);
    # nothing is swapped, so the swap names beside it are not checked
    owned = claim(out, stack.root, swap=False) if out is not None else None
    chosen = {name: component_files(stack, name) for name in names}
    guard_committed(stack, chosen)
    target = owned.path if owned else stack.root / "bundles"
    commit = commit_of(stack.root)  # once: it runs git
    bundles = []
    for name, files in chosen.items():
        tar = tar_bytes(files)
        data = compress(tar)
        digest, tar_digest = sha256_hex(data), sha256_hex(tar)
        path = target / f"{name}{BUNDLE_SUFFIX}"
        bundles.append(
            Bundle(
                component=name,
                path=path,
                sha256=digest,
                tar_sha256=tar_digest,
                size=len(data),
                files=tuple(sorted(files)),
                data=data,
                provenance=provenance(stack, name, digest, tar_digest, commit),
                placeholders=count_placeholders(name, files),
            )
        )
    # Every bundle is checked before the first is written, so `bundle` and `push` (which pushes
    # these) write and publish nothing that `pull` would refuse.
    for made in bundles:
        check_pullable(made)
    for made in bundles:
        write_file(made.path, made.data, FILE_MODE)
    if owned and owned.marker:
        write_file(target / MARKER, MARKER_TEXT.encode())
    return bundles


def count_placeholders(component: str, files: dict[str, bytes]) -> int:
    """Values still holding the link placeholder across a bundle's YAML files."""
    total = 0
    for name, data in files.items():
        text = data.decode("utf-8")
        if name.endswith((".yaml", ".yml")) and text_may_hold(text):
            unit = parse_unit(component, name, text)
            total += sum(1 for doc in unit.docs for _ in scan(doc))
    return total


# ---- unpacking ----------------------------------------------------------------------------


def _refuse(member: str, rule: str, detail: str) -> EksinfError:
    return EksinfError(
        f"bundle member {member!r} refused ({rule}): {detail}",
        hint="Bundles hold only regular files with relative names; rebuild it with "
        "`eksinf bundle`, and do not trust its source until you know why it differs.",
        exit_code=FAILURE,
    )


def _member_name(info: tarfile.TarInfo) -> str:
    """Validate a member's name and return it without a leading './'."""
    raw = info.name
    if raw.startswith("/") or (len(raw) > 1 and raw[1] == ":"):
        raise _refuse(raw, "absolute-path", "absolute names would write outside the output dir")
    if "\\" in raw or "\0" in raw:
        raise _refuse(raw, "unsafe-name", "backslashes and NUL bytes are not allowed in names")
    parts = [p for p in PurePosixPath(raw).parts if p != "."]
    if ".." in parts:
        raise _refuse(raw, "parent-traversal", "'..' would write outside the output dir")
    return "/".join(parts)


def _check_type(info: tarfile.TarInfo) -> None:
    if info.issym() or info.islnk():
        raise _refuse(
            info.name,
            "link",
            f"{'symbolic' if info.issym() else 'hard'} link to {info.linkname!r}; links are "
            "never unpacked",
        )
    if info.ischr() or info.isblk() or info.isfifo():
        raise _refuse(info.name, "special-file", "device files and FIFOs are never unpacked")
    if not (info.isfile() or info.isdir()):
        raise _refuse(info.name, "special-file", f"unsupported member type {info.type!r}")


def _open_tar(blob: bytes) -> tarfile.TarFile:
    try:
        return tarfile.open(fileobj=io.BytesIO(blob), mode="r:*")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise EksinfError(
            f"bundle is not a readable tar archive ({exc})",
            hint="Check the digest and pull it again.",
            exit_code=FAILURE,
        ) from exc


def _members(blob: bytes, max_member: int, max_total: int) -> Iterator[tuple[str, bytes | None]]:
    """Each member `pull` accepts, as (name, bytes; None for a folder), checked in archive order;
    the first one it refuses raises. `_stage` writes them; `check_pullable` only reads them."""
    seen: dict[str, str] = {}  # name -> "file" | "dir"
    total = 0
    files = 0
    with _open_tar(blob) as tar:
        count = 0
        while True:
            try:
                info = tar.next()
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise EksinfError(
                    f"bundle is corrupt after {files} file(s) ({exc})",
                    hint="Check the digest and pull it again.",
                    exit_code=FAILURE,
                ) from exc
            if info is None:
                break
            count += 1
            if count > MAX_MEMBERS:
                raise _refuse(info.name, "too-many-members", f"more than {MAX_MEMBERS} entries")
            name = _member_name(info)
            _check_type(info)
            if not name:  # the archive root "./"
                continue
            kind = "dir" if info.isdir() else "file"
            if name in seen:
                if kind == "dir" and seen[name] == "dir":
                    continue
                raise _refuse(info.name, "duplicate", "the name appears twice in the archive")
            parents = PurePosixPath(name).parents
            for parent in list(parents)[:-1]:
                if seen.get(str(parent)) == "file":
                    raise _refuse(info.name, "duplicate", f"{parent} is already a file")
                seen[str(parent)] = "dir"
            seen[name] = kind
            if kind == "dir":
                yield name, None
                continue
            if info.size > max_member:
                raise _refuse(
                    info.name,
                    "member-too-large",
                    f"{info.size} bytes exceeds the per-file cap of {max_member}",
                )
            total += info.size
            if total > max_total:
                raise _refuse(
                    info.name,
                    "total-too-large",
                    f"unpacked size would exceed the cap of {max_total} bytes",
                )
            source = tar.extractfile(info)
            try:
                data = source.read() if source else b""
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise EksinfError(
                    f"bundle member {info.name!r} is truncated or corrupt ({exc})",
                    hint="Check the digest and pull it again.",
                    exit_code=FAILURE,
                ) from exc
            if len(data) != info.size:
                raise _refuse(info.name, "truncated", "fewer bytes than its header claims")
            files += 1
            yield name, data


def _stage(blob: bytes, staging: Path, max_member: int, max_total: int) -> list[str]:
    written: list[str] = []
    for name, data in _members(blob, max_member, max_total):
        dest = staging / name
        if data is None:
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(dest, flags, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        written.append(name)
    return sorted(written)


def check_pullable(bundle: Bundle) -> None:
    """Refuse (exit 3) a bundle `pull` would refuse, with pull's own checks and limits, so
    `bundle` never writes, and `push` never publishes, what no one can unpack."""
    try:
        for _ in _members(bundle.data, MAX_MEMBER, MAX_TOTAL):
            pass
    except EksinfError as exc:
        raise EksinfError(
            f"bundle {bundle.component}: `eksinf pull` would refuse it: {exc.message}",
            hint=f"Fix configs/{bundle.component}/ (plain file names, at most {MAX_MEMBERS} "
            f"files, {MAX_MEMBER >> 20} MiB each, {MAX_TOTAL >> 20} MiB in all) and run again; "
            "no bundle was written or pushed.",
            exit_code=CONTRACT,
        ) from exc


def safe_unpack(
    blob: bytes,
    out: Path,
    *,
    stack_root: Path | None = None,
    max_member: int = MAX_MEMBER,
    max_total: int = MAX_TOTAL,
) -> list[str]:
    """Unpack a bundle into `out`, replacing its contents; returns the file names written.

    `out` must be a folder eksinf may replace (outdir.claim: absent, empty or eksinf's own, never
    the stack or its sources). Everything is unpacked into a staging folder beside `out` and
    swapped in only when the whole archive passed, with the same crash-safe exchange `render`
    uses for configs/: a refusal or a crash leaves `out` exactly as it was.
    """
    owned = claim(out, stack_root)
    staging = staging_for(owned)
    try:
        names = _stage(blob, staging, max_member, max_total)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        refused = write_failure(exc, owned.path, undone=True) if isinstance(exc, OSError) else None
        if refused is not None:
            raise refused from exc
        raise
    replace_with(owned, staging, "unpack-swap", "unpack-cleanup")
    return names


# ---- publishing ---------------------------------------------------------------------------

ANNOTATION_PREFIX = "io.eksinf."
# What an artifact is for. A base is `eksinf push`'s bundle of configs/: linked values are still
# placeholders, so it is input to `eksinf install --from`, never applied. A release is what a hub
# space publishes: resolved, what Argo CD, Flux and `kubectl apply` consume.
KIND_ANNOTATION = f"{ANNOTATION_PREFIX}artifact.kind"
BASE, RELEASE = "base", "release"
PUSH_WORKERS = 4


def default_version(bundle: Bundle) -> str:
    """The immutable tag: tool version + short content digest, e.g. `0.1.0-5e6d580f7cd0`.

    It changes exactly when the bytes (or the tool that made them) change, so it never has to
    move; `latest` is the tag that moves.
    """
    return f"{__version__}-{bundle.sha256[:12]}"


def bundle_annotations(
    stack: Stack, bundle: Bundle, *, version: str, source: str
) -> dict[str, str]:
    """Manifest annotations: the OCI standard keys plus our provenance (charts, tool, tar)."""
    prov = bundle.provenance
    charts = ",".join(f"{c['chart']}@{c['version']}=sha256:{c['sha256']}" for c in prov["charts"])
    annotations = {
        KIND_ANNOTATION: BASE,
        f"{ANNOTATION_PREFIX}placeholders": str(bundle.placeholders),
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.revision": prov["sourceCommit"] or "unknown",
        "org.opencontainers.image.source": source,
        "org.opencontainers.image.title": bundle.component,
        "org.opencontainers.image.description": stack.component(bundle.component).description,
        f"{ANNOTATION_PREFIX}tool.version": prov["tool"]["version"],
        f"{ANNOTATION_PREFIX}tar.sha256": bundle.tar_sha256,
        f"{ANNOTATION_PREFIX}charts": charts,
    }
    return {k: v for k, v in annotations.items() if v}


@dataclass(frozen=True)
class Published:
    bundle: Bundle
    version: str
    result: PushResult

    def as_dict(self) -> dict[str, Any]:
        return {
            "component": self.bundle.component,
            "version": self.version,
            **self.result.as_dict(),
            "provenance": self.bundle.provenance,
        }


def publish(
    stack: Stack,
    bundles: list[Bundle],
    base: str,
    *,
    version: str | None = None,
    source: str = "",
    on_pushed: Callable[[Published], None] = lambda _p: None,
) -> list[Published]:
    """Push each bundle to `<base>/<component>` with tags `latest` and its version."""
    from eksinf.publish import oci  # requests, ~50 ms: only commands that push pay for it

    root = oci.parse_ref(base)
    if root.tag or root.digest:
        raise EksinfError(
            f"registry base {base!r} names a tag or digest",
            hint="Pass a repository base; each component goes to <base>/<component>.",
            exit_code=USAGE,
        )

    def push_one(bundle: Bundle) -> Published:
        tag = version or default_version(bundle)
        result = oci.push(
            str(root.child(bundle.component)),
            bundle.data,
            title=bundle.title,
            annotations=bundle_annotations(stack, bundle, version=tag, source=source),
            tags=[oci.DEFAULT_TAG, tag],
        )
        return Published(bundle, tag, result)

    # Components are independent repositories: push them concurrently (the registry
    # round trips dominate), and report in stack order.
    from concurrent.futures import ThreadPoolExecutor  # loaded only to push

    done = []
    with ThreadPoolExecutor(max_workers=PUSH_WORKERS) as pool:
        for published in pool.map(push_one, bundles):
            on_pushed(published)
            done.append(published)
    return done
