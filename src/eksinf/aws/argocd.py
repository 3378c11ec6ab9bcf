"""Argo CD on a cluster: find it, check its version floor, install the pinned one when absent,
and ask it to refresh Applications right after a publish.

The install is the `argocd` component's committed units (configs/argocd/, rendered from the
pinned upstream install.yaml), applied by server-side apply through eksinf's own client, with
the namespace rewritten when `--argocd-namespace` is not the rendered one. The two Secrets the
component leaves out (Secrets never go into committed output) are created here, empty.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eksinf.core.types import Docs
from eksinf.core.yamlio import load_docs

from ..errors import CONTRACT, ENVIRONMENT, EksinfError, shell_command
from ..kube.apply import apply_all
from ..kube.client import KubeClient, KubeError, ResourceRef, resource_path
from ..model.resources import CLUSTER_SCOPED_KINDS
from .contract.facts import ARGOCD_FLOOR, version_of

COMPONENT = "argocd"
SERVER = "argocd-server"
# Created empty out of band: argocd-server writes its key into argocd-secret at start.
OUT_OF_BAND_SECRETS = ("argocd-secret", "argocd-notifications-secret")
REFRESH_ANNOTATION = "argocd.argoproj.io/refresh"
APPLICATION_API = ("argoproj.io/v1alpha1", "Application")
Say = Callable[[str], None]


def server_image(kube: KubeClient, namespace: str) -> str | None:
    """The argocd-server image, or None when Argo CD is not installed in `namespace`."""
    deploy = kube.get(resource_path("apps/v1", "Deployment", namespace, SERVER))
    if deploy is None:
        return None
    containers = deploy.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    return str(containers[0].get("image", "")) if containers else ""


def install_docs(configs_dir: Path, namespace: str) -> list[dict[str, Any]]:
    """The objects to apply: the component's units in apply order (Namespace, CRDs, the rest),
    moved to `namespace`, plus the out-of-band Secrets."""
    folder = configs_dir / COMPONENT
    units = sorted(folder.glob("*.yaml")) if folder.is_dir() else []
    if not units:
        raise EksinfError(
            f"{folder}: no rendered Argo CD units to install",
            hint="Run `eksinf render` (the argocd component renders the pinned install.yaml).",
            exit_code=CONTRACT,
        )
    docs = [
        d for path in units for d in load_docs(path.read_text(encoding="utf-8")) if d is not None
    ]
    out = []
    for doc in docs:
        doc = copy.deepcopy(doc)
        meta = doc.setdefault("metadata", {})
        if doc["kind"] == "Namespace":
            meta["name"] = namespace
        elif doc["kind"] not in CLUSTER_SCOPED_KINDS:
            meta["namespace"] = namespace
        if doc["kind"] == "ClusterRoleBinding":
            for subject in doc.get("subjects") or []:
                if subject.get("kind") == "ServiceAccount":
                    subject["namespace"] = namespace
        out.append(doc)
    for name in OUT_OF_BAND_SECRETS:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "Opaque",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": {
                        "app.kubernetes.io/name": name,
                        "app.kubernetes.io/part-of": "argocd",
                    },
                },
            }
        )
    rank = {"Namespace": 0, "CustomResourceDefinition": 1}
    return sorted(out, key=lambda d: rank.get(d["kind"], 2))  # stable: file order otherwise


@dataclass(frozen=True)
class ArgoOutcome:
    action: str  # present | installed | skipped
    image: str | None
    detail: str

    def as_json(self) -> dict[str, Any]:
        return {"action": self.action, "image": self.image, "detail": self.detail}


def ensure(
    kube: KubeClient,
    configs_dir: Path,
    namespace: str,
    *,
    timeout: float = 300,
    poll: float = 5,
    say: Say = lambda _m: None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> ArgoOutcome:
    """Leave an Argo CD at or above the floor alone; refuse one below it (exit 3); install the
    pinned one when absent and wait (bounded) until argocd-server is Available."""
    image = server_image(kube, namespace)
    floor = f"{ARGOCD_FLOOR[0]}.{ARGOCD_FLOOR[1]}"
    if image is not None:
        version = version_of(image)
        if version is not None and version < ARGOCD_FLOOR:
            raise EksinfError(
                f"Argo CD in {namespace} runs {image}, below the floor {floor}: it cannot "
                "resolve the oci:// sources the hub publishes",
                hint=f"Upgrade Argo CD in {namespace} to {floor} or later; eksinf leaves an "
                "existing installation alone.",
                exit_code=CONTRACT,
            )
        detail = "left alone" + ("" if version else " (version not in the image tag)")
        return ArgoOutcome("present", image, detail)
    docs = install_docs(configs_dir, namespace)
    say(f"argocd: installing {len(docs)} objects into {namespace} (server-side apply)")
    # CRDs Established before the root Application; one line for the install, not one per object
    apply_all(kube, docs, force=True)
    path = resource_path("apps/v1", "Deployment", namespace, SERVER)
    started = clock()
    deadline = started + timeout
    while True:
        deploy = kube.get(path) or {}
        conditions = (deploy.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions):
            break
        if clock() >= deadline:
            raise EksinfError(
                f"argocd-server in {namespace} not Available after {int(timeout)} s: "
                + why_not_available(kube, namespace),
                hint="Argo CD's objects are applied; once the cluster runs its pods "
                f"(`{shell_command('kubectl', '-n', namespace, 'get', 'pods')}`), re-run the same "
                "command: it converges and changes nothing else.",
                exit_code=ENVIRONMENT,
            )
        say(f"argocd: waiting for {SERVER} to be Available ({int(clock() - started)} s)")
        sleep(poll)
    image = server_image(kube, namespace)
    return ArgoOutcome("installed", image, f"{len(docs)} objects applied; {SERVER} Available")


def why_not_available(kube: KubeClient, namespace: str) -> str:
    """What the cluster lacks for argocd-server to run, from what it says: no node to run any
    pod (a bare API server, a cluster whose nodes are all gone), no pod at all (nothing runs the
    Deployment controller), or pods that are not ready (their phase and waiting reason)."""
    try:
        nodes: Docs | None = kube.items(resource_path("v1", "Node"))
    except KubeError:  # an identity that may not list nodes: say nothing about them
        nodes = None
    try:
        pods = kube.items(
            resource_path("v1", "Pod", namespace),
            label_selector=f"app.kubernetes.io/name={SERVER}",
        )
    except KubeError as exc:  # the timeout is the news; why it happened could not be read
        return f"its pods could not be read ({exc.message})"
    if not pods:
        lack = "the cluster has no nodes, " if nodes == [] else ""
        return (
            f"{lack}no {SERVER} pod exists (no controller has created one: is the cluster's "
            "controller manager running?)"
        )
    states = []
    for pod in pods:
        status = pod.get("status") or {}
        waiting = [
            (c.get("state") or {}).get("waiting", {}).get("reason")
            for c in status.get("containerStatuses") or []
        ]
        reason = next((w for w in waiting if w), "") or status.get("reason") or ""
        phase = f"{pod['metadata']['name']} {status.get('phase', 'Unknown')}"
        states.append(f"{phase} ({reason})" if reason else phase)
    lack = "the cluster has no nodes; " if nodes == [] else ""
    return f"{lack}pods not ready: {', '.join(sorted(states))}"


# ---- sync on publish ---------------------------------------------------------------------------


def application_path(namespace: str, name: str) -> ResourceRef:
    return resource_path(*APPLICATION_API, namespace, name)


def request_refresh(kube: KubeClient, namespace: str, names: list[str]) -> list[str]:
    """Ask Argo CD to refresh each Application now instead of at its next poll (the refresh
    annotation; Argo CD removes it once done). Returns the names that exist."""
    found = []
    for name in names:
        patched = kube.patch(
            application_path(namespace, name),
            {"metadata": {"annotations": {REFRESH_ANNOTATION: "normal"}}},
        )
        if patched is not None:
            found.append(name)
    return found


def sync_state(app: dict[str, Any] | None) -> tuple[str, str, str]:
    """(sync status, revision, health) as Argo CD reports them; Unknown when it says nothing."""
    status = (app or {}).get("status") or {}
    sync = status.get("sync") or {}
    return (
        str(sync.get("status") or "Unknown"),
        str(sync.get("revision") or ""),
        str((status.get("health") or {}).get("status") or "Unknown"),
    )


def wait_synced(
    kube: KubeClient,
    namespace: str,
    wanted: dict[str, str],
    timeout: float,
    poll: float,
    say: Say,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, float | None]:
    """Wait until each Application (name -> the revision just published) shows that revision
    as Synced. Returns name -> seconds it took, None for those not there by the timeout."""
    started = clock()
    took: dict[str, float | None] = {name: None for name in wanted}
    while True:
        for name, revision in wanted.items():
            if took[name] is not None:
                continue
            status, seen, _ = sync_state(kube.get(application_path(namespace, name)))
            if status == "Synced" and revision in (seen, seen.rsplit("@", 1)[-1]):
                took[name] = round(clock() - started, 1)
                say(f"sync: {name} Synced at the new release after {took[name]} s")
        left = [n for n, t in took.items() if t is None]
        if not left or clock() - started >= timeout:
            return took
        sleep(poll)
