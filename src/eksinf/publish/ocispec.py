"""OCI references and the bundle manifest: parsing `host/repo[:tag|@digest]` and
`oci-layout:DIR[:tag]`, building the one manifest shape both backends store, and checking a
manifest read back field by field before anything is built from it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eksinf.errors import FAILURE, USAGE, EksinfError
from eksinf.model.digest import oci_digest

ARTIFACT_TYPE = "application/vnd.eksinf.bundle.v1"
LAYER_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY_CONFIG = b"{}"
LAYOUT_PREFIX = "oci-layout:"
REF_NAME = "org.opencontainers.image.ref.name"
TITLE = "org.opencontainers.image.title"
CREATED = "org.opencontainers.image.created"
PINNED_CREATED = "1970-01-01T00:00:00Z"  # a real timestamp would make every push a new digest
MUTABLE_TAGS = frozenset({"latest"})
DEFAULT_TAG = "latest"
# Every read from the network is bounded: manifests (and tag lists, and the layout's index) at
# 4 MiB, what registries themselves accept for a manifest (OCI distribution spec); a token answer
# at 1 MiB; a blob at its declared size, and never above MAX_BLOB. A bundle unpacks to at most
# 256 MiB (bundle.MAX_TOTAL), so its gzip never comes near 512 MiB.
MAX_MANIFEST = 4 << 20
MAX_TOKEN = 1 << 20
MAX_BLOB = 512 << 20

_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_REPO = re.compile(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$"
)


# ---- references ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """Where an artifact lives: a registry repository or an OCI layout directory."""

    kind: str  # "registry" | "layout"
    location: str  # "host[:port]" for a registry, the directory for a layout
    repository: str  # repository path in the registry; "" for a layout
    tag: str | None = None
    digest: str | None = None

    @property
    def reference(self) -> str:
        """What to resolve: the digest if pinned, else the tag, else `latest`."""
        return self.digest or self.tag or DEFAULT_TAG

    @property
    def base(self) -> str:
        if self.kind == "layout":
            return f"{LAYOUT_PREFIX}{self.location}"
        return f"{self.location}/{self.repository}"

    def child(self, name: str) -> Ref:
        """The repository for one component under this base."""
        if self.kind == "layout":
            return Ref("layout", str(Path(self.location) / name), "")
        return Ref("registry", self.location, f"{self.repository}/{name}")

    def __str__(self) -> str:
        suffix = f"@{self.digest}" if self.digest else (f":{self.tag}" if self.tag else "")
        return f"{self.base}{suffix}"


def _split_suffix(text: str, original: str) -> tuple[str, str | None, str | None]:
    """Split `name[:tag][@digest]` where the name may itself contain ':' before a '/'."""
    digest = None
    if "@" in text:
        text, digest = text.rsplit("@", 1)
        if not _DIGEST.match(digest):
            raise _bad_ref(original, f"{digest!r} is not a sha256:<64 hex> digest")
    tag = None
    head, sep, tail = text.rpartition(":")
    if sep and "/" not in tail and head:
        if not _TAG.match(tail):
            raise _bad_ref(original, f"{tail!r} is not a valid tag")
        text, tag = head, tail
    return text, tag, digest


def _bad_ref(ref: str, why: str) -> EksinfError:
    return EksinfError(
        f"bad OCI reference {ref!r}: {why}",
        hint="Use oci-layout:PATH[:tag] or host[:port]/repository[:tag|@sha256:...] "
        "(an oci:// prefix is accepted).",
        exit_code=USAGE,
    )


def parse_ref(ref: str) -> Ref:
    text = ref.strip()
    if text.startswith(LAYOUT_PREFIX):
        path, tag, digest = _split_suffix(text[len(LAYOUT_PREFIX) :], ref)
        if not path:
            raise _bad_ref(ref, "no directory after oci-layout:")
        return Ref("layout", path, "", tag, digest)
    if text.startswith("oci://"):
        text = text[len("oci://") :]
    host, slash, rest = text.partition("/")
    if not slash or not rest:
        raise _bad_ref(ref, "no repository after the registry host")
    if not ("." in host or ":" in host or host == "localhost"):
        raise _bad_ref(ref, f"{host!r} is not a registry host (name it explicitly, e.g. ghcr.io)")
    repository, tag, digest = _split_suffix(rest, ref)
    if not _REPO.match(repository):
        raise _bad_ref(ref, f"repository {repository!r} must be lowercase path components")
    return Ref("registry", host, repository, tag, digest)


# ---- manifests ----------------------------------------------------------------------------


def canonical_json(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def build_manifest(blob: bytes, title: str, annotations: dict[str, str]) -> bytes:
    """The one manifest shape both backends store: same inputs, same bytes, same digest."""
    return canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "artifactType": ARTIFACT_TYPE,
            "config": {
                "mediaType": EMPTY_MEDIA_TYPE,
                "digest": oci_digest(EMPTY_CONFIG),
                "size": len(EMPTY_CONFIG),
            },
            "layers": [
                {
                    "mediaType": LAYER_MEDIA_TYPE,
                    "digest": oci_digest(blob),
                    "size": len(blob),
                    "annotations": {TITLE: title},
                }
            ],
            "annotations": {**annotations, CREATED: PINNED_CREATED},
        }
    )


def _not_a_bundle(where: str, why: str) -> EksinfError:
    return EksinfError(
        f"{where}: {why}",
        hint="This is not an eksinf bundle (was it pushed by another tool, or damaged?).",
        exit_code=FAILURE,
    )


def manifest_annotations(manifest: bytes, where: str) -> dict[str, str]:
    """The manifest's annotations, which must be a string-to-string map when present."""
    data = _manifest_object(manifest, where)
    annotations = data.get("annotations", {})
    if not isinstance(annotations, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in annotations.items()
    ):
        raise _not_a_bundle(where, "manifest annotations are not a map of strings")
    return annotations


def _manifest_object(manifest: bytes, where: str) -> dict[str, Any]:
    try:
        data = json.loads(manifest)
    except (ValueError, RecursionError) as exc:
        raise _not_a_bundle(where, f"manifest is not JSON ({type(exc).__name__})") from exc
    if not isinstance(data, dict):
        raise _not_a_bundle(where, f"manifest is a JSON {type(data).__name__}, not an object")
    return data


def bundle_layer(manifest: bytes, where: str) -> dict[str, Any]:
    """The single bundle layer of a manifest, checked field by field (its digest is a
    sha256:<64 hex>, its size a whole number of bytes up to MAX_BLOB, its title a string), or a
    clear error naming what is wrong. Nothing builds a URL or a path from an unchecked field."""
    layers = _manifest_object(manifest, where).get("layers")
    if not isinstance(layers, list) or len(layers) != 1:
        raise _not_a_bundle(
            where,
            "expected exactly one layer, found "
            + (str(len(layers)) if isinstance(layers, list) else "none"),
        )
    layer = layers[0]
    if not isinstance(layer, dict):
        raise _not_a_bundle(where, f"the layer is a JSON {type(layer).__name__}, not an object")
    if layer.get("mediaType") != LAYER_MEDIA_TYPE:
        raise _not_a_bundle(
            where, f"layer media type is {layer.get('mediaType')!r}, not {LAYER_MEDIA_TYPE}"
        )
    digest, size = layer.get("digest"), layer.get("size")
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        raise _not_a_bundle(where, f"layer digest {digest!r} is not sha256:<64 hex>")
    if type(size) is not int or not 0 <= size <= MAX_BLOB:
        raise _not_a_bundle(
            where, f"layer size {size!r} is not a whole number of bytes up to {MAX_BLOB}"
        )
    annotations = layer.get("annotations", {})
    if not isinstance(annotations, dict) or not isinstance(annotations.get(TITLE, ""), str):
        raise _not_a_bundle(where, "layer annotations are not a map with a string title")
    return layer


class NoRepository(EksinfError):
    """The registry or layout holds no repository by that name (nothing was pushed there)."""


def _no_repository(where: str) -> EksinfError:
    return NoRepository(
        f"no repository {where}",
        hint="Check the spelling: each component is pushed to <base>/<component> "
        "(`eksinf push` prints the references it wrote).",
        exit_code=FAILURE,
    )
