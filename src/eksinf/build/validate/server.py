"""`eksinf validate --server`: the API server itself admits every release.

`local`: each plane gets its own ephemeral control plane (kube.localplane), as mgmt (kind + ACK)
and workload (the EKS cluster) are different clusters in reality: one plane's objects never
satisfy the other's (a namespace, a CRD). On each, the CRDs the plane needs are created (the
plane's own CRD units and the CRDs the cluster provides, components.yaml `clusterCRDs`) and
awaited until Established; then every resolved unit of the plane (as the hub publishes it) is
created with server-side apply in Argo CD's order (Namespaces, then sync waves). A namespace a
unit uses that no unit of the plane holds is created first, and reported.

KUBECONFIG: every document is applied with `dryRun=All` to a user's cluster: admitted or refused
exactly as a real apply would be, and nothing is stored. A custom resource whose CRD the cluster
lacks, or an object whose namespace does not exist there (a dry run creates none), is reported
as not checkable here, never as a pass.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eksinf.core.types import Doc, Docs
from eksinf.errors import ENVIRONMENT, USAGE, EksinfError
from eksinf.kube.client import KubeClient, ResourceRef, object_ref
from eksinf.model import configs
from eksinf.model.configs import SYNC_WAVE
from eksinf.model.resources import resource_label

REFUSED = "refused"
NOT_CHECKABLE = "not-checkable"
CRD_API = "apiextensions.k8s.io/v1"
ESTABLISH_TIMEOUT = 60.0  # seconds for every CRD of a plane to be Established (~1 s here)
# Server-side apply types the patch before validation and refuses what does not fit the schema
# (an unknown field, a wrong type) in one message without causes:
# `failed to create typed patch object (ns/name; ...): .spec.foo: field not declared in schema`.
_TYPED = re.compile(r"(?:^|\s)\.([^\s:]+): ([^\n]+)")


@dataclass(frozen=True)
class ServerFinding:
    status: str  # refused | not-checkable
    plane: str
    unit: str  # e.g. configs/karpenter/nodepools.yaml
    resource: str  # apiVersion Kind namespace/name
    field: str  # the server's field path, "" when it names none
    message: str  # the server's own words

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def line(self) -> str:
        return (
            f"{self.status}: [{self.plane}] {self.unit} {self.resource} "
            f"{self.field or '(object)'}: {self.message}"
        )


@dataclass
class PlaneReport:
    plane: str
    admitted: int = 0
    crds: int = 0  # CRDs created and Established before the units
    created_namespaces: list[str] = field(default_factory=list)  # used, but no unit holds them
    findings: list[ServerFinding] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "plane": self.plane,
            "admitted": self.admitted,
            "crds": self.crds,
            "createdNamespaces": self.created_namespaces,
            "refused": sum(1 for f in self.findings if f.status == REFUSED),
            "notCheckable": sum(1 for f in self.findings if f.status == NOT_CHECKABLE),
        }


@dataclass
class ServerReport:
    target: str  # "local" or the kubeconfig (and context)
    profile: str
    planes: list[PlaneReport] = field(default_factory=list)

    @property
    def findings(self) -> list[ServerFinding]:
        return [f for p in self.planes for f in p.findings]

    def count(self, status: str) -> int:
        return sum(1 for f in self.findings if f.status == status)

    @property
    def ok(self) -> bool:
        return not self.count(REFUSED)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "target": self.target,
            "profile": self.profile,
            "admitted": sum(p.admitted for p in self.planes),
            "refused": self.count(REFUSED),
            "notCheckable": self.count(NOT_CHECKABLE),
            "planes": [p.as_dict() for p in self.planes],
            "findings": [f.as_dict() for f in self.findings],
        }


def _resource(doc: Doc) -> str:
    return f"{doc.get('apiVersion')} {resource_label(doc)}"


def causes(body: dict[str, Any], status: int) -> list[tuple[str, str]]:
    """(field, message) per cause of a refusal (a Status); its message when it names none."""
    details = body.get("details")
    found = details.get("causes") if isinstance(details, dict) else None
    out = [
        (str(c.get("field") or "").replace("<nil>", ""), str(c.get("message") or c.get("reason")))
        for c in (found if isinstance(found, list) else [])[:100]
        if isinstance(c, dict)
    ]
    if out:
        return out
    message = str(body.get("message") or f"HTTP {status}")
    if "typed patch" in message:
        typed = _TYPED.findall(message.split("): ", 1)[-1])
        if typed:
            return [(path, text) for path, text in typed[:100]]
    return [("", message)]


def _missing_namespace(status: int, body: dict[str, Any]) -> str | None:
    details = body.get("details")
    if status == 404 and isinstance(details, dict) and details.get("kind") == "namespaces":
        return str(details.get("name"))
    return None


def admit(
    client: KubeClient, plane: str, unit: str, doc: Doc, dry_run: bool, local: bool
) -> list[ServerFinding]:
    """Apply one document; what the server refused (or could not judge). [] when admitted."""
    status, body = client.admit(doc, dry_run)
    if status in (200, 201):
        return []
    resource = _resource(doc)
    if status == 404 and not body:
        what = f"the cluster does not serve {doc.get('kind')} ({doc.get('apiVersion')})"
        if local:  # every CRD the stack holds or the cluster provides was created
            return [ServerFinding(REFUSED, plane, unit, resource, "kind", what)]
        return [
            ServerFinding(
                NOT_CHECKABLE, plane, unit, resource, "", f"{what}: its CRD is not installed"
            )
        ]
    namespace = _missing_namespace(status, body)
    if namespace is not None and not local:
        return [
            ServerFinding(
                NOT_CHECKABLE,
                plane,
                unit,
                resource,
                "metadata.namespace",
                f"namespace {namespace} does not exist on the cluster (a dry run creates none)",
            )
        ]
    return [
        ServerFinding(REFUSED, plane, unit, resource, path, message)
        for path, message in causes(body, status)
    ]


def _established(crd: Doc) -> tuple[bool, str]:
    conditions = (crd.get("status") or {}).get("conditions") or []
    for condition in conditions:
        if condition.get("type") == "NamesAccepted" and condition.get("status") == "False":
            return False, str(condition.get("message"))
    ok = any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
    return ok, ""


def _without_webhook(crd: Doc) -> Doc:
    """The CRD with no conversion webhook: nothing runs on a bare control plane to answer one,
    and the server then refuses every object of the kind ("error resolving resource"). Objects
    are created in a served version and validated against its schema either way."""
    conversion = (crd.get("spec") or {}).get("conversion") or {}
    if conversion.get("strategy") != "Webhook":
        return crd
    return {**crd, "spec": {**crd["spec"], "conversion": {"strategy": "None"}}}


def install_crds(client: KubeClient, plane: str, crds: list[tuple[str, Doc]]) -> PlaneReport:
    """Create CRDs (unit label, document) and wait until each is Established (bounded)."""
    report = PlaneReport(plane)
    waiting: dict[str, tuple[str, Doc]] = {}
    for unit, doc in crds:
        found = admit(client, plane, unit, _without_webhook(doc), dry_run=False, local=True)
        report.findings += found
        if not found:
            waiting[str(doc["metadata"]["name"])] = (unit, doc)
    deadline = time.monotonic() + ESTABLISH_TIMEOUT
    while waiting:
        for name in sorted(waiting):
            current = client.get(ResourceRef(CRD_API, "CustomResourceDefinition", None, name)) or {}
            ok, refused = _established(current)
            if ok or refused:
                unit, doc = waiting.pop(name)
                if refused:
                    report.findings.append(
                        ServerFinding(REFUSED, plane, unit, _resource(doc), "spec.names", refused)
                    )
                else:
                    report.crds += 1
        if waiting and time.monotonic() > deadline:
            raise EksinfError(
                f"validate --server: CRDs not Established within {ESTABLISH_TIMEOUT:.0f}s: "
                + ", ".join(sorted(waiting)),
                hint="The control plane is overloaded or unwell: run it again.",
                exit_code=ENVIRONMENT,
            )
        if waiting:
            time.sleep(0.1)
    client.forget_discovery()  # the new kinds are served now
    return report


@dataclass(frozen=True)
class Placed:
    """One document of a plane, with what orders it: Argo CD applies Namespaces first, then
    by sync wave; within a wave, components in their plane order."""

    rank: tuple[bool, int, int, str, int]  # not a Namespace, sync wave, plane order, unit, index
    unit: str
    doc: Doc


def plane_docs(
    units: dict[str, Docs], order: dict[str, int], label: Callable[[str], str]
) -> list[Placed]:
    out = []
    for key, docs in units.items():
        for index, doc in enumerate(docs):
            if not isinstance(doc, dict) or not doc.get("kind"):
                continue
            meta = doc.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            wave = str((meta.get("annotations") or {}).get(SYNC_WAVE, "0"))
            rank = (
                doc.get("kind") != "Namespace",
                int(wave) if re.fullmatch(r"-?\d{1,6}", wave) else 0,
                order.get(key.split("/")[0], 0),
                key,
                index,
            )
            out.append(Placed(rank, label(key), doc))
    return sorted(out, key=lambda p: p.rank)


def _namespaces_needed(client: KubeClient, docs: Iterable[Placed]) -> Iterator[str]:
    for placed in docs:
        ref = object_ref(placed.doc)
        served = (client.resources(ref.api_version) or {}).get(ref.kind)
        if ref.namespace and served is not None and served.namespaced:
            yield str(ref.namespace)


def admit_plane(
    client: KubeClient,
    plane: str,
    units: dict[str, Docs],
    provided: list[tuple[str, Doc]],
    order: dict[str, int],
    dry_run: bool,
) -> PlaneReport:
    """Admit one plane's units: CRDs first (created for real unless `dry_run`), then the rest."""
    placed = plane_docs(units, order, lambda key: f"configs/{key}.yaml")
    crds = [(p.unit, p.doc) for p in placed if p.doc.get("kind") == "CustomResourceDefinition"]
    rest = [p for p in placed if p.doc.get("kind") != "CustomResourceDefinition"]
    local = not dry_run
    if local:
        report = install_crds(client, plane, [*provided, *crds])
        held = {
            str((p.doc.get("metadata") or {}).get("name"))
            for p in rest
            if p.doc.get("kind") == "Namespace"
        }
        for namespace in sorted(set(_namespaces_needed(client, rest)) - held):
            if client.get(ResourceRef("v1", "Namespace", None, namespace)) is not None:
                continue  # the server's own: default, kube-system, kube-public
            ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            report.findings += admit(client, plane, "(no unit)", ns, dry_run=False, local=True)
            report.created_namespaces.append(namespace)
    else:
        report = PlaneReport(plane)
        for unit, doc in crds:
            found = admit(client, plane, unit, doc, dry_run=True, local=False)
            report.findings += found
            report.admitted += not found
    for p in rest:
        found = admit(client, plane, p.unit, p.doc, dry_run, local)
        report.findings += found
        report.admitted += not found
    report.admitted += report.crds
    return report


def _stack_planes(
    stack: Any, planes: Iterable[str]
) -> tuple[str, dict[str, dict[str, Docs]], dict[str, list[tuple[str, Doc]]]]:
    """(profile, plane -> its resolved units, plane -> its cluster-provided CRDs)."""
    from eksinf import links
    from eksinf.build.validate.admission import published_units
    from eksinf.build.validate.provided import cluster_crd_units

    units = configs.read_units(stack.configs_dir)
    profile, published = published_units(stack, units, links.load_bindings(stack))
    plane_of = {c.name: c.plane for c in stack.components}
    by_plane: dict[str, dict[str, Docs]] = {p: {} for p in planes}
    for key, docs in published.items():
        plane = plane_of.get(key.split("/")[0])
        if plane in by_plane:
            by_plane[plane][key] = docs
    provided: dict[str, list[tuple[str, Doc]]] = {p: [] for p in planes}
    if any(c.cluster_crds for c in stack.components if c.plane in by_plane):
        for label, docs in cluster_crd_units(stack).items():
            plane = plane_of.get(label.split(" ")[0])
            if plane in provided:
                provided[plane] += [
                    (label, d) for d in docs if d.get("kind") == "CustomResourceDefinition"
                ]
    return profile, by_plane, provided


def _order(stack: Any) -> dict[str, int]:
    return {c.name: c.order for c in stack.components}


def check_local(
    stack: Any,
    planes: Iterable[str],
    mirror: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> ServerReport:
    """Each plane on its own fresh local control plane, created for real. The planes run side
    by side: most of a plane's time is the server taking CRDs and shutting down, not CPU."""
    from concurrent.futures import ThreadPoolExecutor

    from eksinf.kube import localplane
    from eksinf.kube.client import KubeAuth

    planes = list(planes)
    profile, by_plane, provided = _stack_planes(stack, planes)

    def one(plane: str) -> tuple[PlaneReport, float]:
        started = time.perf_counter()
        with localplane.running(mirror) as running:
            client = KubeClient(
                KubeAuth(server=running.server, ca_file=str(running.ca_file)),
                token=running.admin_token,
                timeout=60.0,
            )
            out = admit_plane(client, plane, by_plane[plane], provided[plane], _order(stack), False)
        return out, time.perf_counter() - started

    with ThreadPoolExecutor(max_workers=len(planes) or 1) as pool:
        done = [f.result() for f in [pool.submit(one, plane) for plane in planes]]
    for out, seconds in done:  # in plane order, whichever finished first
        if progress is not None:
            progress(
                f"validate --server local: plane {out.plane}: {out.admitted} objects admitted "
                f"in {seconds:.1f}s"
            )
    return ServerReport("local", profile, [out for out, _ in done])


def check_cluster(
    stack: Any, client: KubeClient, target: str, planes: Iterable[str]
) -> ServerReport:
    """A server-side dry run of each plane's units against a user's cluster."""
    planes = list(planes)
    profile, by_plane, _ = _stack_planes(stack, planes)
    report = ServerReport(target, profile)
    for plane in planes:
        report.planes.append(admit_plane(client, plane, by_plane[plane], [], _order(stack), True))
    return report


def planes_for(plane: str | None) -> list[str]:
    """The applied planes (mgmt, then workload), or the one asked for."""
    from eksinf.model.stack import PLANES

    applied = [p for p in PLANES if p != "hub"]
    if plane is None:
        return applied
    if plane not in applied:
        raise EksinfError(
            f"validate --server: unknown plane {plane!r}",
            hint=f"--plane takes one of: {', '.join(applied)}.",
            exit_code=USAGE,
        )
    return [plane]


def connect(kubeconfig: Path, context: str | None) -> tuple[KubeClient, str]:
    """A client for the kubeconfig's context (its current one unless `context`), and a label."""
    label = f"{kubeconfig} ({context})" if context else str(kubeconfig)
    return KubeClient.from_kubeconfig(kubeconfig, context=context), label
