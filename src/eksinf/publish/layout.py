"""An OCI image-layout directory as a bundle store."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path
from typing import Any

from eksinf.core.atomic import write_file
from eksinf.errors import FAILURE, EksinfError
from eksinf.model.digest import oci_digest
from eksinf.publish.ocispec import (
    _DIGEST,
    ARTIFACT_TYPE,
    INDEX_MEDIA_TYPE,
    MANIFEST_MEDIA_TYPE,
    MAX_MANIFEST,
    REF_NAME,
    Ref,
    _no_repository,
    canonical_json,
)


class LayoutStore:
    """An OCI image-layout directory: oci-layout, index.json and blobs/sha256/<hex>.

    Blobs are content-addressed and written by rename; index.json is replaced atomically under
    a lock, so readers see either the old index or the new one. A layout may come from anywhere,
    so every digest read from it is checked before a path is built from it, and every file is
    read with a size bound.
    """

    def __init__(self, ref: Ref) -> None:
        self.root = Path(ref.location)
        self.name = ref.base

    def _damaged(self, why: str) -> EksinfError:
        return EksinfError(
            f"{self.name}: {why}",
            hint="The layout is damaged; remove it and push again.",
            exit_code=FAILURE,
        )

    def _blob_path(self, digest: Any) -> Path:
        if not isinstance(digest, str) or not _DIGEST.match(digest):
            raise self._damaged(f"digest {digest!r} is not sha256:<64 hex>")
        return self.root / "blobs" / "sha256" / digest.removeprefix("sha256:")

    def _read(self, path: Path, limit: int) -> bytes:
        try:
            with path.open("rb") as handle:
                data = handle.read(limit + 1)
        except OSError as exc:
            raise self._damaged(
                f"{path.name} is not readable ({exc.strerror or type(exc).__name__})"
            ) from exc
        if len(data) > limit:
            raise self._damaged(f"{path.relative_to(self.root)} is larger than {limit} bytes")
        return data

    def _index(self) -> dict[str, Any]:
        path = self.root / "index.json"
        if not path.is_file():
            return {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": []}
        try:
            index = json.loads(self._read(path, MAX_MANIFEST))
        except (ValueError, RecursionError) as exc:
            raise self._damaged(f"index.json is not valid JSON ({type(exc).__name__})") from exc
        if not isinstance(index, dict) or not isinstance(index.get("manifests", []), list):
            raise self._damaged('index.json is not {"manifests": [...]}')
        if not all(
            isinstance(m, dict) and isinstance(m.get("annotations") or {}, dict)
            for m in index.get("manifests", [])
        ):
            raise self._damaged("index.json lists a manifest that is not an object")
        return index

    def get_manifest(self, reference: str) -> bytes | None:
        if _DIGEST.match(reference):
            path = self._blob_path(reference)
            return self._read(path, MAX_MANIFEST) if path.is_file() else None
        for entry in self._index().get("manifests", []):
            if (entry.get("annotations") or {}).get(REF_NAME) == reference:
                path = self._blob_path(entry.get("digest"))
                return self._read(path, MAX_MANIFEST) if path.is_file() else None
        return None

    def put_manifest(self, manifest: bytes, tags: list[str]) -> None:
        self.put_blob(manifest)
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".eksinf.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            index = self._index()
            kept = [
                m
                for m in index.get("manifests", [])
                if (m.get("annotations") or {}).get(REF_NAME) not in tags
            ]
            digest = oci_digest(manifest)
            for tag in tags:
                kept.append(
                    {
                        "mediaType": MANIFEST_MEDIA_TYPE,
                        "artifactType": ARTIFACT_TYPE,
                        "digest": digest,
                        "size": len(manifest),
                        "annotations": {REF_NAME: tag},
                    }
                )
            kept.sort(key=lambda m: str((m.get("annotations") or {}).get(REF_NAME, "")))
            index["manifests"] = kept
            write_file(self.root / "oci-layout", canonical_json({"imageLayoutVersion": "1.0.0"}))
            write_file(self.root / "index.json", canonical_json(index))

    def has_blob(self, digest: str) -> bool:
        return self._blob_path(digest).is_file()

    def put_blob(self, data: bytes) -> None:
        path = self._blob_path(oci_digest(data))
        if not path.is_file():
            write_file(path, data)

    def get_blob(self, digest: str, size: int) -> bytes:
        path = self._blob_path(digest)
        if not path.is_file():
            raise EksinfError(
                f"{self.name}: blob {digest} is missing",
                hint="The layout is incomplete; push again.",
                exit_code=FAILURE,
            )
        return self._read(path, size)

    def tags(self) -> list[str]:
        if not (self.root / "index.json").is_file():
            raise _no_repository(f"oci-layout:{self.root}")
        return sorted(
            str((m.get("annotations") or {}).get(REF_NAME))
            for m in self._index().get("manifests", [])
            if (m.get("annotations") or {}).get(REF_NAME)
        )
