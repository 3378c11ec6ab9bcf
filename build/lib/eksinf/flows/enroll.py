"""Enrolling a cluster end to end: the cluster half (aws/enroll.py), then the hub half.

The cluster is wired first, so a refused apply leaves no hub half behind; the hub half is the
target space, its OCI target and apps space, and the placeholder gate (deploy.ensure_target_space).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..aws import enroll as cluster
from ..hub import open_hub
from ..model.names import apps_space, owner_labels
from ..model.targets import TargetKind, kind_labels
from .deploy import ensure_target_space


def enroll(
    stack_root: Path,
    name: str,
    access: cluster.ClusterAccess,
    registry: str,
    argocd_namespace: str,
    oci_credentials: tuple[str, str] | None,
    kind: TargetKind,
    install_argocd: bool = False,
    say: Any = lambda _m: None,
    argocd_timeout: float = 300,
) -> dict[str, Any]:
    """Install Argo CD when absent (unless told not to), wire the cluster, keep its kubeconfig,
    then create the hub half, recording the target's kind. Idempotent."""
    wiring = cluster.wire(
        name,
        access,
        registry,
        argocd_namespace,
        oci_credentials,
        stack_root / "configs" if install_argocd else None,
        say,
        argocd_timeout,
    )
    return {**wiring, "target": hub_target(stack_root, name, registry, kind), "kind": kind.name}


def hub_target(stack_root: Path, name: str, registry: str, kind: TargetKind) -> str:
    """Create (idempotently) the target space, its OCI target and apps space in the hub."""
    with open_hub(stack_root) as hub:
        ensure_target_space(hub, name, registry, owner_labels(Cluster=name, **kind_labels(kind)))
    return f"{name}/target"


def delete_hub_spaces(stack_root: Path, name: str) -> list[str]:
    """Remove the apps space, then the target space (recursive, never forced)."""
    gone = []
    with open_hub(stack_root) as hub:
        for space in (apps_space(name), name):
            if hub.space_exists(space):
                hub.delete_space(space, recursive=True)
                gone.append(space)
    return gone
