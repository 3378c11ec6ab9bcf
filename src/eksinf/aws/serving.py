"""Running means serving: what a cluster says about each component, read through the
Kubernetes API only. Argo CD's Applications (sync, health), the ACK objects (ACK.ResourceSynced,
ACK.Terminal with its message), Karpenter (NodePools, NodeClaims launched/registered, instance
types), and each inference Deployment (available replicas, and `/v1/models` of its Service
through the API server's service proxy listing the profile's modelId). On a HyperPod target,
each InferenceEndpointConfig: serving is its ready pods and the CR's deployment state, checked
with `/v1/models` through the pod proxy; SageMaker endpoint registration is a sub-status that
never decides serving (an endpoint can serve behind its ALB while registration is pending).

Every row has a `state`: healthy | degraded | unknown. Unknown (no answer, no status yet, a
failed read) is reported as such and never counts as healthy. A 401 or 403 is not a state: it
stops the report with the client's diagnosis (exit 4). `collect` does the reads;
the `*_rows` functions are pure over what the API answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import EksinfError
from ..kube.client import KubeAccessError, KubeClient, ResourceRef, resource_path
from ..model.configs import read_units, resources
from .argocd import APPLICATION_API, sync_state

HEALTHY, DEGRADED, UNKNOWN = "healthy", "degraded", "unknown"
NODEPOOLS = resource_path("karpenter.sh/v1", "NodePool")
NODECLAIMS = resource_path("karpenter.sh/v1", "NodeClaim")
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
INFERENCE_COMPONENT = "inference-workloads"
HYPERPOD_COMPONENT = "hyperpod-inference"
ENDPOINT_CONFIG = ("inference.sagemaker.aws.amazon.com/v1", "InferenceEndpointConfig")
COMPLETE = "DeploymentComplete"  # the CRD's status.state enum (and the deployment's state)


def _condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return None


def argo_rows(apps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for app in sorted(apps, key=lambda a: a["metadata"]["name"]):
        sync, revision, health = sync_state(app)
        if sync == "Synced" and health == "Healthy":
            state = HEALTHY
        elif "Unknown" in (sync, health) or health == "Progressing":
            state = UNKNOWN
        else:
            state = DEGRADED
        rows.append(
            {
                "application": app["metadata"]["name"],
                "sync": sync,
                "health": health,
                "revision": revision or None,
                "state": state,
            }
        )
    return rows


def ack_row(label: str, obj: dict[str, Any] | None, error: str = "") -> dict[str, Any]:
    """One ACK object: ACK.Terminal wins (a spec AWS refuses), then ACK.ResourceSynced."""
    if error:
        return {"resource": label, "synced": None, "state": UNKNOWN, "message": error}
    if obj is None:
        return {"resource": label, "synced": None, "state": DEGRADED, "message": "absent"}
    terminal = _condition(obj, "ACK.Terminal")
    if terminal is not None and terminal.get("status") == "True":
        return {
            "resource": label,
            "synced": "Terminal",
            "state": DEGRADED,
            "message": str(terminal.get("message") or "ACK.Terminal"),
        }
    synced = _condition(obj, "ACK.ResourceSynced")
    status = (synced or {}).get("status") or "Unknown"
    return {
        "resource": label,
        "synced": status,
        "state": {"True": HEALTHY, "False": DEGRADED}.get(status, UNKNOWN),
        "message": str((synced or {}).get("message") or ""),
    }


def karpenter_rows(
    pools: list[dict[str, Any]], claims: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    rows = []
    for pool in sorted(pools, key=lambda p: p["metadata"]["name"]):
        name = pool["metadata"]["name"]
        mine = [
            c for c in claims if (c["metadata"].get("labels") or {}).get(NODEPOOL_LABEL) == name
        ]
        launched = [c for c in mine if (_condition(c, "Launched") or {}).get("status") == "True"]
        registered = [
            c for c in mine if (_condition(c, "Registered") or {}).get("status") == "True"
        ]
        ready = (_condition(pool, "Ready") or {}).get("status") or "Unknown"
        types = sorted(
            {
                str((c["metadata"].get("labels") or {}).get(INSTANCE_TYPE_LABEL))
                for c in launched
                if (c["metadata"].get("labels") or {}).get(INSTANCE_TYPE_LABEL)
            }
        )
        if ready == "True" and len(registered) == len(mine):
            state = HEALTHY
        elif ready == "False":
            state = DEGRADED
        else:
            state = UNKNOWN  # not Ready yet, or claims still launching/registering
        rows.append(
            {
                "nodePool": name,
                "ready": ready,
                "nodeClaims": len(mine),
                "launched": len(launched),
                "registered": len(registered),
                "instanceTypes": types,
                "state": state,
            }
        )
    return rows


def deployment_row(
    label: str, obj: dict[str, Any] | None, endpoint: dict[str, Any] | None
) -> dict[str, Any]:
    """A Deployment: available replicas against wanted, and its model endpoint when it has one.
    Scaled to 0 on purpose is healthy (it serves nothing, and says so)."""
    if obj is None:
        return {"deployment": label, "state": DEGRADED, "message": "absent", "endpoint": endpoint}
    wanted = int((obj.get("spec") or {}).get("replicas", 1))
    available = int((obj.get("status") or {}).get("availableReplicas") or 0)
    if wanted == 0:
        state, message = HEALTHY, "scaled to 0 (serves nothing)"
    elif available < wanted:
        state, message = DEGRADED, f"{available}/{wanted} available"
    elif endpoint is not None and endpoint["state"] != HEALTHY:
        state, message = endpoint["state"], f"{available}/{wanted} available; endpoint not serving"
    else:
        state, message = HEALTHY, f"{available}/{wanted} available"
    return {
        "deployment": label,
        "replicas": wanted,
        "available": available,
        "state": state,
        "message": message,
        "endpoint": endpoint,
    }


def models_check(
    kube: KubeClient, namespace: str, service: str, port: int, model: str
) -> dict[str, Any]:
    """GET /v1/models through the API server's service proxy; healthy when it lists `model`."""
    path = f"/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy/v1/models"
    return _models(kube, path, model)


def _models(kube: KubeClient, path: str, model: str) -> dict[str, Any]:
    try:
        answer = kube.get_path(path)
    except KubeAccessError:
        raise  # no access is not a plane state: its diagnosis, exit 4
    except EksinfError as exc:
        return {"path": path, "state": UNKNOWN, "models": None, "message": exc.message}
    if answer is None:
        return {"path": path, "state": UNKNOWN, "models": None, "message": "404 from the proxy"}
    models = sorted(str(m.get("id")) for m in answer.get("data") or [] if isinstance(m, dict))
    serving = model in models
    return {
        "path": path,
        "state": HEALTHY if serving else DEGRADED,
        "models": models,
        "message": f"lists {model}" if serving else f"does not list {model}",
    }


def _ready(pod: dict[str, Any]) -> bool:
    return (_condition(pod, "Ready") or {}).get("status") == "True"


def registration_of(obj: dict[str, Any]) -> dict[str, Any]:
    """SageMaker endpoint registration, a sub-status: the CR's endpoints.sagemaker.state and
    its top-level state (DeploymentInProgress until registration completes)."""
    status = obj.get("status") or {}
    sagemaker = (status.get("endpoints") or {}).get("sagemaker") or {}
    state = sagemaker.get("state")
    done = state == "InService" and status.get("state") == COMPLETE
    return {
        "endpoint": (obj.get("spec") or {}).get("endpointName") or None,
        "state": state or "not registered yet",
        "crState": status.get("state") or "Unknown",
        "pending": not done,
    }


def endpoint_config_row(
    label: str, obj: dict[str, Any] | None, pods: list[dict[str, Any]], check: dict[str, Any] | None
) -> dict[str, Any]:
    """An InferenceEndpointConfig: serving from its ready pods and the deployment state the CR
    reports, then `/v1/models` of a ready pod; registration is reported beside, never in the
    state (a pod can serve while the CR's top-level state is still DeploymentInProgress)."""
    if obj is None:
        return {"endpointConfig": label, "state": DEGRADED, "message": "absent"}
    status = obj.get("status") or {}
    deployment = status.get("deploymentStatus") or {}
    overall = deployment.get("deploymentObjectOverallState") or "Unknown"
    wanted = int((obj.get("spec") or {}).get("replicas", 1))
    ready = sum(1 for p in pods if _ready(p))
    registration = registration_of(obj)
    if status.get("state") == "DeploymentFailed" or overall == "DeploymentFailed":
        state = DEGRADED
        message = str(deployment.get("message") or status.get("state"))
    elif ready and overall == COMPLETE:
        state = HEALTHY if check is None else check["state"]
        message = f"{ready}/{wanted} pod(s) ready, deployment {overall}"
        if check is not None and check["state"] != HEALTHY:
            message += "; endpoint not serving"
    else:
        state = UNKNOWN  # still deploying: not serving yet, and not failed
        message = f"{ready}/{wanted} pod(s) ready, deployment {overall}"
    if state == HEALTHY and registration["pending"]:
        message += f"; serving, SageMaker registration pending ({registration['state']})"
    return {
        "endpointConfig": label,
        "replicas": wanted,
        "ready": ready,
        "deployment": overall,
        "state": state,
        "message": message,
        "endpoint": check,
        "registration": registration,
    }


def pod_models_check(
    kube: KubeClient, namespace: str, pod: str, port: int, model: str
) -> dict[str, Any]:
    """GET /v1/models of one pod through the API server's pod proxy."""
    path = f"/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy/v1/models"
    return _models(kube, path, model)


# ---- reading a cluster -----------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What to read, from configs/ (never a fixed list)."""

    applications: tuple[str, ...]  # Application names: the variant spaces bound to the target
    ack: tuple[tuple[str, ResourceRef], ...]  # (label, object)
    # (label, object, namespace, template labels)
    deployments: tuple[tuple[str, ResourceRef, str, dict[str, Any]], ...]
    services: tuple[tuple[str, str, int, dict[str, Any]], ...]  # (namespace, name, port, selector)
    endpoint_configs: tuple[
        tuple[str, ResourceRef, str, int], ...
    ] = ()  # (label, object, ns, port)
    karpenter: bool = True  # a HyperPod target has no Karpenter to read


def plan_for(configs: Path, plane: str, components: list[str], variant: str) -> Plan:
    from ..model.names import variant_space
    from .ack import ack_objects

    apps = tuple(variant_space(c, variant) for c in components)
    ack = (
        tuple((o.label, o.path) for o in ack_objects(configs, components))
        if plane == "mgmt"
        else ()
    )
    deployments, services = [], []
    if plane == "workload" and INFERENCE_COMPONENT in components:
        for r in resources(read_units(configs, [INFERENCE_COMPONENT])):
            if r.kind == "Deployment":
                labels = ((r.spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
                path = resource_path(r.api_version, r.kind, r.namespace, r.name)
                deployments.append((f"{r.namespace}/{r.name}", path, r.namespace or "", labels))
            elif r.kind == "Service" and r.spec.get("ports"):
                port = int(r.spec["ports"][0].get("port"))
                services.append((r.namespace or "", r.name, port, r.spec.get("selector") or {}))
    configs_ = []
    if plane == "workload" and HYPERPOD_COMPONENT in components:
        for r in resources(read_units(configs, [HYPERPOD_COMPONENT])):
            if (r.api_version, r.kind) == ENDPOINT_CONFIG:
                port = int(
                    ((r.spec.get("worker") or {}).get("modelInvocationPort") or {}).get(
                        "containerPort", 8080
                    )
                )
                path = resource_path(r.api_version, r.kind, r.namespace, r.name)
                configs_.append((f"{r.namespace}/{r.name}", path, r.namespace or "", port))
    return Plan(
        apps,
        ack,
        tuple(deployments),
        tuple(services),
        tuple(configs_),
        karpenter="karpenter" in components,
    )


def collect(
    kube: KubeClient, plan: Plan, argocd_namespace: str, model: str, plane: str
) -> dict[str, Any]:
    report: dict[str, Any] = {"plane": plane, "server": kube.server}
    try:
        kube.version()
    except KubeAccessError:
        raise  # no access is not a plane state: its diagnosis, exit 4
    except EksinfError as exc:
        report.update(state=UNKNOWN, error=exc.message)
        return report
    apps = []
    for name in plan.applications:
        try:
            app = kube.get(resource_path(*APPLICATION_API, argocd_namespace, name))
        except KubeAccessError:
            raise  # no access is not a plane state: its diagnosis, exit 4
        except EksinfError:
            app = None
        apps.append(app or {"metadata": {"name": name}})  # absent: Unknown, never Synced
    report["argocd"] = argo_rows(apps)
    if plane == "mgmt":
        rows = []
        for label, path in plan.ack:
            try:
                rows.append(ack_row(label, kube.get(path)))
            except KubeAccessError:
                raise  # no access is not a plane state: its diagnosis, exit 4
            except EksinfError as exc:
                rows.append(ack_row(label, None, exc.message))
        report["ack"] = rows
    elif plan.karpenter:
        try:
            pools, claims = kube.items(NODEPOOLS), kube.items(NODECLAIMS)
            report["karpenter"] = karpenter_rows(pools, claims)
        except KubeAccessError:
            raise  # no access is not a plane state: its diagnosis, exit 4
        except EksinfError as exc:
            report["karpenter"] = [{"state": UNKNOWN, "message": exc.message}]
    if plane == "workload":
        rows = []
        for label, path, namespace, labels in plan.deployments:
            service = next(
                (
                    s
                    for s in plan.services
                    if s[0] == namespace and s[3] and s[3].items() <= labels.items()
                ),
                None,
            )
            try:
                obj = kube.get(path)
            except KubeAccessError:
                raise  # no access is not a plane state: its diagnosis, exit 4
            except EksinfError as exc:
                rows.append({"deployment": label, "state": UNKNOWN, "message": exc.message})
                continue
            endpoint = None
            wanted = int(((obj or {}).get("spec") or {}).get("replicas", 1))
            if service is not None and obj is not None and wanted > 0:
                endpoint = models_check(kube, service[0], service[1], service[2], model)
            rows.append(deployment_row(label, obj, endpoint))
        report["inference"] = rows
        if plan.endpoint_configs:
            report["hyperpod"] = [
                _endpoint_config(kube, label, path, ns, port, model)
                for label, path, ns, port in plan.endpoint_configs
            ]
    states = [
        r["state"]
        for key in ("argocd", "ack", "karpenter", "inference", "hyperpod")
        for r in report.get(key, [])
    ]
    report["state"] = (
        DEGRADED if DEGRADED in states else UNKNOWN if UNKNOWN in states or not states else HEALTHY
    )
    return report


def _endpoint_config(
    kube: KubeClient, label: str, path: ResourceRef, namespace: str, port: int, model: str
) -> dict[str, Any]:
    """Read one InferenceEndpointConfig, its pods (by the selector the CR reports) and, when a
    pod is ready, its `/v1/models`."""

    try:
        obj = kube.get(path)
        selector = str(((obj or {}).get("status") or {}).get("selector") or "")
        pods = kube.items(resource_path("v1", "Pod", namespace), selector) if selector else []
    except KubeAccessError:
        raise  # no access is not a plane state: its diagnosis, exit 4
    except EksinfError as exc:
        return {"endpointConfig": label, "state": UNKNOWN, "message": exc.message}
    ready = [p for p in pods if _ready(p)]
    check = (
        pod_models_check(kube, namespace, ready[0]["metadata"]["name"], port, model)
        if ready
        else None
    )
    return endpoint_config_row(label, obj, pods, check)


def format_text(report: dict[str, Any]) -> list[str]:
    lines = [f"{report['plane']} plane on {report['server']}: {report['state'].upper()}"]
    if report.get("error"):
        lines.append(f"  cluster UNKNOWN: {report['error']}")
        return lines
    for r in report.get("argocd", []):
        lines.append(
            f"  argocd  {r['application']:<34} {r['sync']:<10} {r['health']:<11} {r['state']}"
        )
    for r in report.get("ack", []):
        note = f" ({r['message']})" if r["message"] else ""
        lines.append(f"  ack     {r['resource']:<44} {r['synced'] or '-':<8} {r['state']}{note}")
    for r in report.get("karpenter", []):
        if "nodePool" not in r:
            lines.append(f"  karpenter UNKNOWN: {r['message']}")
            continue
        lines.append(
            f"  karpenter nodepool {r['nodePool']:<16} ready={r['ready']} claims={r['nodeClaims']} "
            f"launched={r['launched']} registered={r['registered']} "
            f"types={','.join(r['instanceTypes']) or '-'} {r['state']}"
        )
    for r in report.get("inference", []):
        ep = r.get("endpoint")
        serving = f"; {ep['path'].split('/proxy')[1]}: {ep['message']}" if ep else ""
        lines.append(f"  model   {r['deployment']:<30} {r['message']}{serving} {r['state']}")
    for r in report.get("hyperpod", []):
        reg = r.get("registration")
        sub = (
            f"; registration {reg['state']} (CR {reg['crState']})"
            if reg and reg["pending"]
            else "; registered"
            if reg
            else ""
        )
        lines.append(f"  model   {r['endpointConfig']:<30} {r['message']}{sub} {r['state']}")
    return lines
