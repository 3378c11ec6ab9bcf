"""Object metadata as the API server checks it on every kind (no OpenAPI schema says this).

Rules from k8s.io/apimachinery/pkg/api/validation (ValidateObjectMeta) and
pkg/util/validation (IsDNS1123Subdomain, IsDNS1123Label, IsDNS1035Label, IsQualifiedName,
IsValidLabelValue); which name rule a kind uses from each kind's Validate*Name in
k8s.io/kubernetes/pkg/apis/*/validation (RBAC names are path segments, Service names DNS-1035
labels, Namespace names DNS-1123 labels, a CRD's name is `<plural>.<group>`; the rest,
custom resources included, are DNS-1123 subdomains).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from eksinf.core.types import Doc
from eksinf.model.names import name_rule

_LABEL = name_rule(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = name_rule(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035 = name_rule(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED = name_rule(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = name_rule(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
ANNOTATIONS_MAX = 256 * 1024
RBAC_KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")


def dns1123_label(value: str) -> str | None:
    if len(value) > 63:
        return "must be at most 63 characters (DNS-1123 label)"
    if not _LABEL.match(value):
        return "must be a DNS-1123 label: lower-case alphanumerics and '-', starting and ending alphanumeric"
    return None


def dns1123_subdomain(value: str) -> str | None:
    if len(value) > 253:
        return "must be at most 253 characters (DNS-1123 subdomain)"
    if not _SUBDOMAIN.match(value):
        return (
            "must be a DNS-1123 subdomain: lower-case alphanumerics, '-' and '.', starting and "
            "ending alphanumeric"
        )
    return None


def dns1035_label(value: str) -> str | None:
    if len(value) > 63:
        return "must be at most 63 characters (DNS-1035 label)"
    if not _DNS1035.match(value):
        return "must be a DNS-1035 label: lower-case alphanumerics and '-', starting with a letter"
    return None


def path_segment(value: str) -> str | None:
    if value in (".", ".."):
        return f"may not be {value!r}"
    if "/" in value or "%" in value:
        return "may not contain '/' or '%'"
    return None


def qualified_name(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or dns1123_subdomain(prefix)):
        return "prefix must be a DNS-1123 subdomain"
    if not name or len(name) > 63 or not _QUALIFIED.match(name):
        return (
            "name part must be at most 63 characters: alphanumerics, '-', '_' or '.', starting "
            "and ending alphanumeric"
        )
    return None


def _name_rule(doc: Doc) -> Callable[[str], str | None]:
    kind = doc.get("kind")
    if kind == "Namespace":
        return dns1123_label
    if kind == "Service":
        return dns1035_label
    if kind in RBAC_KINDS and str(doc.get("apiVersion", "")).startswith(
        "rbac.authorization.k8s.io/"
    ):
        return path_segment
    return dns1123_subdomain


def problems(doc: Doc) -> Iterator[tuple[tuple[str, ...], str, Any, str]]:
    """(field path parts, rule, value, message) for each metadata field the server would refuse."""
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        yield ("metadata",), "required", meta, "metadata must be a mapping"
        return
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        if not meta.get("generateName"):
            yield ("metadata", "name"), "required", name, "name or generateName is required"
    else:
        message = _name_rule(doc)(name)
        if message:
            yield ("metadata", "name"), _name_rule(doc).__name__, name, message
        if doc.get("kind") == "CustomResourceDefinition":
            spec = doc.get("spec") or {}
            want = f"{(spec.get('names') or {}).get('plural')}.{spec.get('group')}"
            if name != want:
                yield (
                    ("metadata", "name"),
                    "crd-name",
                    name,
                    f"must be spec.names.plural + '.' + spec.group ({want})",
                )
    namespace = meta.get("namespace")
    if namespace is not None:
        message = dns1123_label(str(namespace))
        if message:
            yield ("metadata", "namespace"), "dns1123_label", namespace, message
    for key, value in (meta.get("labels") or {}).items():
        message = qualified_name(str(key))
        if message:
            yield ("metadata", "labels", key), "label key", key, message
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            yield (
                ("metadata", "labels", key),
                "label value",
                value,
                "must be a string of at most 63 characters: alphanumerics, '-', '_' or '.', "
                "starting and ending alphanumeric (or empty)",
            )
    annotations = meta.get("annotations") or {}
    for key in annotations:
        message = qualified_name(str(key).lower())
        if message:
            yield ("metadata", "annotations", key), "annotation key", key, message
    size = sum(len(str(k)) + len(str(v)) for k, v in annotations.items())
    if size > ANNOTATIONS_MAX:
        yield (
            ("metadata", "annotations"),
            "annotations size",
            size,
            f"must be at most {ANNOTATIONS_MAX} bytes in total",
        )
