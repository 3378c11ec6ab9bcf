"""Push and pull bundles as OCI artifacts: to a registry, or to an OCI image-layout directory.

We speak the OCI distribution API with `requests` ourselves instead of going through oras-py:
we need our own manifest (OCI 1.1 `artifactType`, the empty config), a digest check before and
after every write, and precise errors for an unreachable registry; all of which is a few HTTP
calls. Both backends store byte-identical manifests, so a bundle's digest is the same wherever
it lives.

Tags: every tag except `latest` is immutable. Pushing content that an immutable tag already
holds keeps that tag's manifest (and the provenance of the commit that first published it);
pushing different content under an existing immutable tag is refused.

Modules: `ocispec` (references, the manifest), `registry_auth` (credentials), `registry` (the
HTTP client), `layout` (the image-layout directory); this module holds the operations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from eksinf.errors import FAILURE, EksinfError, shell_command
from eksinf.model.digest import oci_digest
from eksinf.publish.layout import LayoutStore
from eksinf.publish.ocispec import (
    _DIGEST,
    _TAG,
    ARTIFACT_TYPE,
    DEFAULT_TAG,
    EMPTY_CONFIG,
    EMPTY_MEDIA_TYPE,
    LAYER_MEDIA_TYPE,
    LAYOUT_PREFIX,
    MUTABLE_TAGS,
    TITLE,
    NoRepository,
    Ref,
    _bad_ref,
    build_manifest,
    bundle_layer,
    manifest_annotations,
    parse_ref,
)

__all__ = [
    "ARTIFACT_TYPE",
    "DEFAULT_TAG",
    "EMPTY_MEDIA_TYPE",
    "LAYER_MEDIA_TYPE",
    "LAYOUT_PREFIX",
    "NoRepository",
    "Pulled",
    "PushResult",
    "Ref",
    "Store",
    "list_tags",
    "open_store",
    "parse_ref",
    "pull",
    "push",
]


class Store(Protocol):
    name: str

    def get_manifest(self, reference: str) -> bytes | None: ...
    def put_manifest(self, manifest: bytes, tags: list[str]) -> None: ...
    def has_blob(self, digest: str) -> bool: ...
    def put_blob(self, data: bytes) -> None: ...
    def get_blob(self, digest: str, size: int) -> bytes: ...
    def tags(self) -> list[str]: ...


def open_store(ref: Ref) -> Store:
    if ref.kind == "layout":
        return LayoutStore(ref)
    # imported here: the registry client loads requests (~30 ms), which `bundle` and every
    # oci-layout push, pull and tags listing never use
    from eksinf.publish.registry import RegistryStore

    return RegistryStore(ref)


# ---- operations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PushResult:
    ref: str  # repository, without tag
    manifest_digest: str
    layer_digest: str
    unchanged: bool
    tags: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "manifestDigest": self.manifest_digest,
            "layerDigest": self.layer_digest,
            "unchanged": self.unchanged,
            "tags": list(self.tags),
        }


@dataclass(frozen=True)
class Pulled:
    blob: bytes
    manifest_digest: str
    annotations: dict[str, str]
    title: str


def push(
    ref: str, blob: bytes, *, title: str, annotations: dict[str, str], tags: list[str]
) -> PushResult:
    """Publish `blob` as a one-layer bundle under every tag, verifying what was written."""
    target = parse_ref(ref)
    if target.digest:
        raise _bad_ref(ref, "push to a repository or tag, not a digest")
    tags = sorted(set(tags) | ({target.tag} if target.tag else set()))
    if not tags:
        raise _bad_ref(ref, "no tag to push")
    for tag in tags:
        if not _TAG.match(tag):
            raise _bad_ref(f"{target.base}:{tag}", f"{tag!r} is not a valid tag")
    store = open_store(target)
    layer_digest = oci_digest(blob)
    manifest = build_manifest(blob, title, annotations)
    existing: dict[str, bytes | None] = {tag: store.get_manifest(tag) for tag in tags}
    # An immutable tag that already holds this content keeps its manifest (and so the
    # provenance of the push that created it); one that holds other content is never moved.
    held_first: bytes | None = None
    for tag in tags:
        held = existing[tag]
        if tag in MUTABLE_TAGS or held is None:
            continue
        layer = bundle_layer(held, f"{target.base}:{tag}")
        if layer.get("digest") != layer_digest:
            raise EksinfError(
                f"{target.base}:{tag} already holds different content "
                f"({layer.get('digest')}, pushing {layer_digest}); tag {tag} is immutable",
                hint="Publish under a new version tag; only `latest` moves.",
                exit_code=FAILURE,
            )
        held_first = held_first or held
    manifest = held_first or manifest
    manifest_digest = oci_digest(manifest)
    stale = [
        tag
        for tag in tags
        if (held := existing[tag]) is None
        or (tag in MUTABLE_TAGS and oci_digest(held) != manifest_digest)
    ]
    if stale:
        for data in (EMPTY_CONFIG, blob):
            if not store.has_blob(oci_digest(data)):
                store.put_blob(data)
        store.put_manifest(manifest, stale)
    _verify_pushed(store, target, tags, manifest, stale, layer_digest, title)
    return PushResult(target.base, manifest_digest, layer_digest, not stale, tuple(tags))


def _verify_pushed(
    store: Store,
    target: Ref,
    tags: list[str],
    manifest: bytes,
    written: list[str],
    layer_digest: str,
    title: str,
) -> None:
    """Read every tag back: each names our layer by title and digest; written tags are ours."""
    manifest_digest = oci_digest(manifest)
    for tag in tags:
        where = f"{target.base}:{tag}"
        fetched = store.get_manifest(tag)
        if fetched is None or (tag in written and oci_digest(fetched) != manifest_digest):
            raise EksinfError(
                f"{where}: after the push the tag does not resolve to {manifest_digest}",
                hint="Another writer may have moved the tag; push again.",
                exit_code=FAILURE,
            )
        layer = bundle_layer(fetched, where)
        got_title = (layer.get("annotations") or {}).get(TITLE)
        if got_title != title or layer.get("digest") != layer_digest:
            raise EksinfError(
                f"{where}: the layer reads back as {got_title!r} {layer.get('digest')}, "
                f"expected {title!r} {layer_digest}",
                exit_code=FAILURE,
            )


def pull(ref: str, *, expect_digest: str | None = None) -> Pulled:
    """Fetch a bundle and verify its manifest digest (if pinned) and its layer digest."""
    source = parse_ref(ref)
    if expect_digest is not None and not _DIGEST.match(expect_digest):
        raise _bad_ref(expect_digest, "expected digest must be sha256:<64 hex>")
    store = open_store(source)
    manifest = store.get_manifest(source.reference)
    if manifest is None:
        raise EksinfError(
            f"{source} not found",
            hint=f"List what exists with `{shell_command('eksinf', 'tags', source.base)}`, "
            "or push it first.",
            exit_code=FAILURE,
        )
    manifest_digest = oci_digest(manifest)
    for wanted in filter(None, (source.digest, expect_digest)):
        if manifest_digest != wanted:
            raise EksinfError(
                f"{source}: manifest digest is {manifest_digest}, expected {wanted}",
                hint="The artifact changed since the digest was recorded; do not trust it "
                "until you know why.",
                exit_code=FAILURE,
            )
    layer = bundle_layer(manifest, str(source))
    annotations = manifest_annotations(manifest, str(source))
    blob = store.get_blob(layer["digest"], layer["size"])
    if oci_digest(blob) != layer["digest"] or len(blob) != layer["size"]:
        raise EksinfError(
            f"{source}: layer content does not match its digest {layer['digest']}",
            hint="The registry returned corrupt data; pull again.",
            exit_code=FAILURE,
        )
    title = (layer.get("annotations") or {}).get(TITLE, "")
    return Pulled(blob, manifest_digest, annotations, title)


def list_tags(ref: str, *, missing_ok: bool = False) -> list[str]:
    """The repository's tags; with missing_ok, none for a repository nothing was pushed to."""
    try:
        return open_store(parse_ref(ref)).tags()
    except NoRepository:
        if missing_ok:
            return []
        raise
