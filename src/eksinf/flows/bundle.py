"""The bundle commands' entry points (bundle, push, pull, tags): each calls one function of the
publish layer, handed on here."""

from __future__ import annotations

from ..publish import oci
from ..publish.bundle import (
    ANNOTATION_PREFIX,
    BASE,
    KIND_ANNOTATION,
    Published,
    build_bundles,
    publish,
    safe_unpack,
)

__all__ = [
    "ANNOTATION_PREFIX",
    "BASE",
    "KIND_ANNOTATION",
    "Published",
    "build_bundles",
    "oci",
    "publish",
    "safe_unpack",
]
