"""Content digests: sha256, as bare hex and in OCI's `sha256:<hex>` form."""

from __future__ import annotations

import hashlib


def sha256_hex(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def oci_digest(data: bytes) -> str:
    """The OCI content digest of a blob (`sha256:<hex>`)."""
    return "sha256:" + sha256_hex(data)
