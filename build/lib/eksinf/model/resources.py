"""Addressing resources inside a unit's documents: kinds, names, pod templates, containers.

The one pod-spec walker: every reader that looks for containers (links, lint, the hub's
functions, contract facts) goes through `pod_spec`, so a workload kind is added in one place.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

# Where pod templates keep their containers, by workload kind.
POD_SPEC_KEYS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "Pod": ("spec",),
}
WORKLOAD_KINDS = tuple(k for k in POD_SPEC_KEYS if k != "Pod")
# Kinds without a namespace (the API paths and manifests eksinf writes need to know).
CLUSTER_SCOPED_KINDS = frozenset(
    {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}
)


def api_group(api_version: str) -> str:
    """The API group of an apiVersion: "" for the core group (`v1`), `apps` for `apps/v1`."""
    return api_version.rpartition("/")[0]


def pod_spec(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The pod spec of a workload (or Pod) document, or None when it has none."""
    keys = POD_SPEC_KEYS.get(str(doc.get("kind", "")), ())
    node: Any = doc
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node if keys and isinstance(node, dict) else None


def pod_spec_path(doc: dict[str, Any]) -> str:
    """`spec.template.spec` (paths.py grammar) for the document's kind; '' when it has none."""
    return ".".join(POD_SPEC_KEYS.get(str(doc.get("kind", "")), ()))


def containers(doc: dict[str, Any], name: str = "*") -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(field, index, container) for every init and regular container named `name` ('*' = all)."""
    spec = pod_spec(doc) or {}
    for field in ("initContainers", "containers"):
        for index, item in enumerate(spec.get(field) or []):
            if isinstance(item, dict) and (name == "*" or item.get("name") == name):
                yield field, index, item


def split_name(name: str) -> tuple[str | None, str]:
    """`ns/name` -> (ns, name); `/name` or `name` -> (None, name)."""
    if "/" in name:
        ns, _, bare = name.partition("/")
        return (ns or None), bare
    return None, name


def kind_matches(doc: dict[str, Any], kind: str) -> bool:
    """`kind` is `Kind` or `apiVersion/Kind`."""
    if "/" in kind:
        return f"{doc.get('apiVersion')}/{doc.get('kind')}" == kind
    return doc.get("kind") == kind


def find_resource(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any] | None:
    """The document of `kind` named `namespace/name` (or `/name`), or None."""
    ns, bare = split_name(name)
    for doc in docs:
        if not isinstance(doc, dict) or not kind_matches(doc, kind):
            continue
        meta = doc.get("metadata") or {}
        if meta.get("name") == bare and meta.get("namespace") == ns:
            return doc
    return None


def resource_label(doc: dict[str, Any]) -> str:
    """`Kind namespace/name` (or `Kind /name` when cluster-scoped), the form bindings use."""
    meta = doc.get("metadata") or {}
    return f"{doc.get('kind')} {meta.get('namespace') or ''}/{meta.get('name', '?')}"


def resource_type(doc: dict[str, Any]) -> str:
    """ConfigHub's `<apiVersion>/<Kind>` (`apps/v1/Deployment`)."""
    return f"{doc.get('apiVersion', '')}/{doc.get('kind', '')}"


def resource_name(doc: dict[str, Any]) -> str:
    """ConfigHub's `<namespace>/<name>`, with an empty namespace when cluster-scoped."""
    meta = doc.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name', '')}"
