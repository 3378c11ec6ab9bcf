"""Wiring an enrolled cluster, its cluster half: Argo CD repo credentials and the root app.

The hub half (space `<name>`, OCI target, apps space `<name>-argo-apps` holding the root
Application unit, placeholder gate) is flows/enroll.py's: this module never opens the hub.
The cluster half is built
by pure functions and applied through the one thin client (`kube.py`) with server-side apply,
so re-running enroll converges instead of failing. The root Application applied to the cluster
is the very unit the hub stores in the apps space.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from eksinf.core.yamlio import load_docs
from eksinf.publish.argo import application_schema
from eksinf.publish.argo import root_application as hub_root

from ..errors import CONTRACT, ENVIRONMENT, EksinfError
from ..kube.client import (
    KubeClient,
    eks_kubeconfig,
    object_ref,
    parse_kubeconfig,
    resource_path,
    write_kubeconfig,
)
from ..kube.kubeconfig import load as load_kubeconfig
from ..kube.kubeconfig import one_context
from ..model.names import apps_space, kubeconfig_path
from ..model.schema import Schema
from .scope import StackScope
from .session import AwsSession
from .status import describe_cluster

REPO_CREDS_LABEL = "argocd.argoproj.io/secret-type"


def repo_creds_name(name: str) -> str:
    return f"eksinf-oci-{name}"


def root_application(name: str, registry: str, namespace: str) -> dict[str, Any]:
    """The hub's root Application for the apps space, placed in Argo CD's namespace."""
    # the one Application publish/argo renders: a mapping
    doc = cast(dict[str, Any], load_docs(hub_root(apps_space(name), registry))[0])
    doc["metadata"]["namespace"] = namespace
    return doc


def repo_creds_secret(
    name: str, registry: str, username: str, password: str, namespace: str
) -> dict[str, Any]:
    """Argo CD repo-creds for the OCI registry (without it Argo gets a 401 and looks Healthy)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": repo_creds_name(name),
            "namespace": namespace,
            "labels": {REPO_CREDS_LABEL: "repo-creds", "app.kubernetes.io/managed-by": "eksinf"},
        },
        "stringData": {
            "type": "oci",
            "url": f"oci://{registry}",
            "username": username,
            "password": password,
        },
    }


def check_application(doc: dict[str, Any]) -> None:
    first = Schema(application_schema(), "argocd-application.schema.json").first_error(doc)
    if first:
        raise EksinfError(
            f"Application {doc.get('metadata', {}).get('name')}: {first.dotted}: {first.message}",
            exit_code=CONTRACT,
        )


def apply_wiring(kube: KubeClient, docs: list[dict[str, Any]]) -> list[str]:
    applied = []
    for doc in docs:
        if doc["kind"] == "Application":
            check_application(doc)
        kube.apply(doc)
        applied.append(f"{doc['kind']} {doc['metadata']['namespace']}/{doc['metadata']['name']}")
    return applied


def detach(kube: KubeClient, name: str, namespace: str) -> list[str]:
    """Remove the root app without touching workloads: drop its finalizer, delete orphaning."""
    done = []
    app = root_application(name, "-", namespace)
    path = object_ref(app)
    if kube.get(path) is not None:
        kube.patch(path, {"metadata": {"finalizers": None}})
        kube.delete(path, propagation="Orphan")
        done.append(f"Application {namespace}/{apps_space(name)} (orphaning its children)")
    secret = resource_path("v1", "Secret", namespace, repo_creds_name(name))
    if kube.delete(secret):
        done.append(f"Secret {namespace}/{repo_creds_name(name)}")
    return done


@dataclass(frozen=True)
class ClusterAccess:
    """How this command reaches the cluster, and what kubeconfig enroll leaves behind."""

    kube: KubeClient | None
    target_kubeconfig: Path
    generated: dict[str, Any] | None  # written only once the contract holds
    given: Path | None
    reduced: dict[str, Any] | None = None  # the given kubeconfig's chosen context, kept as is


def cluster_access(
    stack_root: Path,
    name: str,
    scope: StackScope,
    session: AwsSession,
    kubeconfig: Path | None,
    context: str | None = None,
) -> ClusterAccess:
    target = kubeconfig_path(stack_root, name)
    if kubeconfig is not None:
        merged, label = load_kubeconfig(kubeconfig)
        reduced = one_context(merged, context, label)
        auth = parse_kubeconfig(reduced, kubeconfig.parent, label)
        return ClusterAccess(KubeClient.from_auth(auth, session), target, None, kubeconfig, reduced)
    found = describe_cluster(session, scope.cluster)
    if found is None or not found.get("endpoint"):
        return ClusterAccess(None, target, None, None)
    generated = eks_kubeconfig(
        name,
        found["endpoint"],
        found.get("certificateAuthority", {}).get("data", ""),
        scope.cluster,
        session.identity,
    )
    auth = parse_kubeconfig(generated, target.parent, "generated kubeconfig")
    return ClusterAccess(KubeClient.from_auth(auth, session), target, generated, None)


def wiring_docs(
    name: str, registry: str, argocd_namespace: str, oci_credentials: tuple[str, str] | None
) -> tuple[list[dict[str, Any]], list[str]]:
    """The cluster half of a target: its root Application (and repo-creds when credentials are
    given). Returns (docs, what was skipped and why)."""
    docs = [root_application(name, registry, argocd_namespace)]
    skipped = []
    if oci_credentials:
        user, password = oci_credentials
        docs.insert(0, repo_creds_secret(name, registry, user, password, argocd_namespace))
    else:
        skipped.append(
            "repo-creds Secret (EKSINF_OCI_USERNAME/EKSINF_OCI_PASSWORD not set: "
            "the registry must allow anonymous pulls)"
        )
    return docs, skipped


def wire(
    name: str,
    access: ClusterAccess,
    registry: str,
    argocd_namespace: str,
    oci_credentials: tuple[str, str] | None,
    argocd_configs: Path | None = None,
    say: Callable[[str], None] = lambda _m: None,
    argocd_timeout: float = 300,
) -> dict[str, Any]:
    """Install Argo CD when absent (from `argocd_configs`, the stack's configs/, when given),
    apply the cluster half, then keep the kubeconfig. Idempotent."""
    from . import argocd

    if access.kube is None:
        raise EksinfError(
            f"cluster of {name} has no API endpoint yet: nothing to wire",
            hint="Wait until it is ACTIVE, or pass --kubeconfig.",
            exit_code=ENVIRONMENT,
        )
    docs, skipped = wiring_docs(name, registry, argocd_namespace, oci_credentials)
    outcome = None
    if argocd_configs is not None:
        outcome = argocd.ensure(
            access.kube, argocd_configs, argocd_namespace, timeout=argocd_timeout, say=say
        )
    # The cluster first: a refused apply leaves no hub half and no kubeconfig behind.
    applied = apply_wiring(access.kube, docs)
    if access.generated is not None:
        write_kubeconfig(access.target_kubeconfig, access.generated)
    elif access.reduced is not None and (
        access.given is None or access.given.resolve() != access.target_kubeconfig.resolve()
    ):
        write_kubeconfig(access.target_kubeconfig, access.reduced)
    return {
        "kubeconfig": str(access.target_kubeconfig),
        "server": access.kube.server,
        "appsSpace": apps_space(name),
        "applied": applied,
        "skipped": skipped,
        "argocd": outcome.as_json() if outcome else None,
    }
