"""Scheduling checks: GPU pools, taints and tolerations, accelerator labels, root-volume storage."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from eksinf.core.types import Doc, Docs
from eksinf.model import paths

from ..model.checks import Finding
from ..model.configs import Resource, of_kind
from ..model.names import FAMILY_KEY, GPU_RESOURCE
from ..model.quantity import gib_text as gib
from ..model.quantity import to_bytes as quantity
from ..model.resources import pod_spec, pod_spec_path
from .core import Context, check, coded, found

POOL_LABEL = "karpenter.sh/nodepool"


GPU_NAME_KEY = "karpenter.k8s.aws/instance-gpu-name"


CAPACITY_KEY = "karpenter.sh/capacity-type"


# The GPU each EC2 instance family carries, as Karpenter's instance-gpu-name label spells it.
FAMILY_GPU = {
    "g4dn": "t4",
    "g5": "a10g",
    "g5g": "t4g",
    "g6": "l4",
    "g6e": "l40s",
    "g6f": "l4",
    "gr6": "l4",
    "p3": "v100",
    "p3dn": "v100",
    "p4d": "a100",
    "p4de": "a100",
    "p5": "h100",
    "p5e": "h200",
    "p5en": "h200",
}


# Families AWS sells only through capacity reservations (ODCRs, Capacity Blocks).
RESERVED_ONLY_FAMILIES = ("p5e", "p5en")


# Root-volume space kept for the OS, the container runtime and images (AL2023 GPU AMI ~ 15 GiB).
ROOT_HEADROOM_GIB = 20


# Karpenter's default root volume for AL2023 when the class declares none.
DEFAULT_ROOT_GIB = 20


WELL_KNOWN_PREFIXES = (
    "karpenter.k8s.aws/",
    "karpenter.sh/",
    "kubernetes.io/",
    "node.kubernetes.io/",
    "topology.kubernetes.io/",
)


@dataclass(frozen=True)
class Pool:
    name: str
    res: Resource | None  # None for the system nodegroup pseudo-pool
    labels: dict[str, str]
    requirements: dict[str, tuple[str, list[str]]]  # key -> (operator, values)
    taints: tuple[Doc, ...]
    node_class: str | None
    gpu: bool
    root_gib: int | None
    root_place: str

    def at(self, path: str) -> str:
        return self.res.at(path) if self.res else path


def _pools(resources: list[Resource]) -> list[Pool]:
    classes = {r.name: r for r in of_kind(resources, "EC2NodeClass")}
    out = []
    for r in of_kind(resources, "NodePool"):
        tmpl = (r.doc.get("spec") or {}).get("template") or {}
        spec = tmpl.get("spec") or {}
        reqs = {
            q.get("key"): (q.get("operator"), [str(v) for v in q.get("values") or []])
            for q in spec.get("requirements") or []
        }
        families = reqs.get(FAMILY_KEY, ("", []))[1]
        gpu = any(k.startswith("karpenter.k8s.aws/instance-gpu") for k in reqs) or any(
            f in FAMILY_GPU for f in families
        )
        nc_name = (spec.get("nodeClassRef") or {}).get("name")
        nc = classes.get(nc_name or "")
        root, root_place = DEFAULT_ROOT_GIB, f"EC2NodeClass {nc_name} (no blockDeviceMappings)"
        if nc is not None:
            for bi, bdm in enumerate((nc.doc.get("spec") or {}).get("blockDeviceMappings") or []):
                if bdm.get("rootVolume") or bdm.get("deviceName") in ("/dev/xvda", "/dev/xvdb"):
                    size = quantity((bdm.get("ebs") or {}).get("volumeSize"))
                    root = size // 2**30 if size else 0
                    root_place = nc.at(f"spec.blockDeviceMappings.{bi}.ebs.volumeSize")
                    break
        out.append(
            Pool(
                r.name,
                r,
                {**((tmpl.get("metadata") or {}).get("labels") or {}), POOL_LABEL: r.name},
                reqs,
                tuple(spec.get("taints") or []),
                nc_name,
                gpu,
                root,
                root_place,
            )
        )
    for ng in of_kind(resources, "Nodegroup", "eks.services.k8s.aws"):
        spec = ng.doc.get("spec") or {}
        out.append(
            Pool(
                f"nodegroup/{ng.name}",
                ng,
                dict(spec.get("labels") or {}),
                {},
                tuple(spec.get("taints") or []),
                None,
                False,
                spec.get("diskSize"),
                ng.at("spec.diskSize"),
            )
        )
    return out


def _selects(pool: Pool, key: str, op: str, values: list[str]) -> bool:
    """Can a node of `pool` satisfy one selector expression?"""
    have: set[str] | None
    if key in pool.labels:
        have = {str(pool.labels[key])}
    elif key in pool.requirements and pool.requirements[key][0] == "In":
        have = set(pool.requirements[key][1])
    elif key.startswith(("karpenter.k8s.aws/instance-gpu", "nvidia.com/")):
        have = set() if not pool.gpu else None  # GPU labels exist only on GPU nodes
    elif (
        key.startswith(WELL_KNOWN_PREFIXES) and pool.res is not None and pool.res.kind == "NodePool"
    ):
        have = None  # unconstrained well-known label: any value may occur
    else:
        have = set()
    if op == "In":
        return have is None or bool(have & set(values))
    if op == "NotIn":
        return have is None or bool(have - set(values))
    if op == "Exists":
        return have is None or bool(have)
    if op == "DoesNotExist":
        return not have
    return True


def _candidates(spec: Doc, pools: list[Pool]) -> list[Pool]:
    exprs = [(k, "In", [str(v)]) for k, v in (spec.get("nodeSelector") or {}).items()]
    terms = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    out = []
    for pool in pools:
        if not all(_selects(pool, k, op, v) for k, op, v in exprs):
            continue
        if terms and not any(
            all(
                _selects(
                    pool, e.get("key"), e.get("operator"), [str(x) for x in e.get("values") or []]
                )
                for e in term.get("matchExpressions") or []
            )
            for term in terms
        ):
            continue
        out.append(pool)
    return out


def _tolerates(tolerations: Docs, taint: Doc) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        if not tol.get("key"):
            if tol.get("operator") == "Exists":
                return True
            continue
        if tol.get("key") != taint.get("key"):
            continue
        if tol.get("operator") == "Exists" or str(tol.get("value")) == str(taint.get("value")):
            return True
    return False


def _wants_gpu(spec: Doc) -> bool:
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        for part in ("limits", "requests"):
            if GPU_RESOURCE in (resources.get(part) or {}):
                return True
    return False


def _taint_str(taint: Doc) -> str:
    return f"{taint.get('key')}={taint.get('value', '')}:{taint.get('effect')}"


@check("taints", "storage")
def check_scheduling(ctx: Context) -> Iterator[Finding]:
    """GPU pool taints are tolerated by the workloads meant for them and by nothing GPU-less;
    each model workload's disk needs fit the root volume of every node it can land on."""
    resources = ctx.resources
    pools = _pools(resources)
    for r in resources:
        if r.plane != "workload" or r.kind not in ("Deployment", "DaemonSet", "StatefulSet"):
            continue
        spec = pod_spec(r.doc)
        if spec is None:
            continue
        base = pod_spec_path(r.doc)
        tolerations = spec.get("tolerations") or []
        candidates = _candidates(spec, pools)
        wants_gpu = _wants_gpu(spec)
        if wants_gpu:
            candidates = [p for p in candidates if p.gpu]
        gpu_bound = wants_gpu or (bool(candidates) and all(p.gpu for p in candidates))
        if gpu_bound:
            yield from _check_gpu_tolerations(r, base, tolerations, candidates)
        else:
            for pool in (p for p in pools if p.gpu):
                for ti, taint in enumerate(pool.taints):
                    if any(t.get("key") == taint.get("key") for t in tolerations) and _tolerates(
                        tolerations, taint
                    ):
                        yield coded(
                            "taint-gpu-less",
                            f"a workload that requests no GPU tolerates {_taint_str(taint)}: it "
                            "can land on (and keep alive) a GPU node",
                            r.at(f"{base}.tolerations"),
                            pool.at(f"spec.template.spec.taints.{ti}"),
                        )
                        break
        yield from _check_storage(r, base, spec, candidates)


def _check_gpu_tolerations(
    r: Resource, base: str, tolerations: Docs, candidates: list[Pool]
) -> Iterator[Finding]:
    if not candidates:
        yield coded(
            "taint-gpu",
            "a GPU workload selects no GPU pool: it stays Pending and Karpenter launches nothing",
            r.at(f"{base}.nodeSelector"),
        )
        return

    def untolerated(pool: Pool) -> list[tuple[int, Doc]]:
        return [(i, t) for i, t in enumerate(pool.taints) if not _tolerates(tolerations, t)]

    # A DaemonSet must run on every GPU node it selects; a Deployment needs one pool it fits.
    failing = [(p, bad) for p in candidates if (bad := untolerated(p))]
    if r.kind != "DaemonSet" and len(failing) < len(candidates):
        return
    for pool, bad in failing:
        index, taint = bad[0]
        yield coded(
            "taint-gpu",
            f"GPU workload does not tolerate {_taint_str(taint)} of NodePool {pool.name}: "
            "it stays Pending",
            r.at(f"{base}.tolerations"),
            pool.at(f"spec.template.spec.taints.{index}"),
        )


def _check_storage(r: Resource, base: str, spec: Doc, candidates: list[Pool]) -> Iterator[Finding]:
    need, need_place = 0, ""
    for ci, container in enumerate(spec.get("containers") or []):
        request = ((container.get("resources") or {}).get("requests") or {}).get(
            "ephemeral-storage"
        )
        size = quantity(request) if request is not None else None
        if size and size > need:
            need = size
            need_place = f"{base}.containers.{ci}.resources.requests.ephemeral-storage"
    for vi, volume in enumerate(spec.get("volumes") or []):
        empty = volume.get("emptyDir")
        if isinstance(empty, dict) and empty.get("medium") != "Memory":
            size = quantity(empty.get("sizeLimit")) if empty.get("sizeLimit") else None
            if size and size > need:
                need, need_place = size, f"{base}.volumes.{vi}.emptyDir.sizeLimit"
    if not need:
        return
    for pool in candidates:
        if pool.root_gib is None:
            continue
        room = (pool.root_gib - ROOT_HEADROOM_GIB) * 2**30
        if need > room:
            yield coded(
                "storage",
                f"needs {gib(need)} of ephemeral storage, but pool {pool.name}'s root volume is "
                f"{pool.root_gib}Gi ({ROOT_HEADROOM_GIB}Gi kept for the OS and images): the pod is "
                "evicted when the cache fills",
                r.at(need_place),
                pool.root_place,
            )


def _gpu_names(
    r: Resource, reqs: Docs, index: dict[str, int], families: list[str], fam_place: str
) -> Iterator[Finding]:
    """The pool's instance-gpu-name requirement agrees with its instance families."""
    if GPU_NAME_KEY not in index:
        return
    names = {str(v) for v in reqs[index[GPU_NAME_KEY]].get("values") or []}
    name_place = r.at(f"spec.template.spec.requirements.{index[GPU_NAME_KEY]}.values")
    for family in families:
        gpu = FAMILY_GPU.get(family)
        if gpu and gpu not in names:
            yield coded(
                "accelerator-label",
                f"family {family} carries {gpu}, which the pool's {GPU_NAME_KEY} "
                f"requirement ({', '.join(sorted(names))}) excludes: it never launches",
                name_place,
                fam_place,
            )
    produced = {FAMILY_GPU.get(f) for f in families}
    for name in sorted(names - produced):
        if families:
            yield coded(
                "accelerator-label",
                f"{GPU_NAME_KEY} {name} comes from none of the pool's families "
                f"({', '.join(families)})",
                name_place,
                fam_place,
            )


@check("accelerators", "reserved-capacity")
def check_accelerators(ctx: Context) -> Iterator[Finding]:
    """Accelerator labels agree with the instance families; reserved-only families reserve."""
    resources = ctx.resources
    classes = {r.name: r for r in of_kind(resources, "EC2NodeClass")}
    for r in of_kind(resources, "NodePool"):
        tmpl = (r.doc.get("spec") or {}).get("template") or {}
        spec = tmpl.get("spec") or {}
        reqs = list(spec.get("requirements") or [])
        index = {q.get("key"): i for i, q in enumerate(reqs)}
        families = (
            [str(v) for v in reqs[index[FAMILY_KEY]].get("values") or []]
            if FAMILY_KEY in index
            else []
        )
        fam_place = r.at(f"spec.template.spec.requirements.{index.get(FAMILY_KEY)}.values")
        yield from _gpu_names(r, reqs, index, families, fam_place)
        labels = (tmpl.get("metadata") or {}).get("labels") or {}
        gpus = sorted({FAMILY_GPU[f] for f in families if f in FAMILY_GPU})
        for key, value in labels.items():
            about_gpu = "accelerator" in key or key.endswith("gpu-name")
            if about_gpu and gpus and (len(gpus) > 1 or gpus[0] not in str(value)):
                yield coded(
                    "accelerator-label",
                    f"label {key}={value} is applied to every node of the pool, but its "
                    f"families carry {', '.join(gpus)}",
                    r.at(f"spec.template.metadata.labels.{paths.escape(key)}"),
                    fam_place,
                )
        reserved_only = [f for f in families if f in RESERVED_ONLY_FAMILIES]
        if not reserved_only:
            continue
        capacity = (
            [str(v) for v in reqs[index[CAPACITY_KEY]].get("values") or []]
            if CAPACITY_KEY in index
            else []
        )
        cap_place = r.at(
            f"spec.template.spec.requirements.{index[CAPACITY_KEY]}.values"
            if CAPACITY_KEY in index
            else "spec.template.spec.requirements"
        )
        if capacity != ["reserved"]:
            yield coded(
                "reserved-capacity",
                f"{'/'.join(reserved_only)} are sold only through capacity reservations, but the "
                f"pool's capacity types are {capacity or 'unrestricted'}; use only 'reserved'",
                cap_place,
                fam_place,
            )
        nc_name = (spec.get("nodeClassRef") or {}).get("name")
        nc = classes.get(nc_name or "")
        if nc is None or not (nc.doc.get("spec") or {}).get("capacityReservationSelectorTerms"):
            yield coded(
                "reserved-capacity",
                f"{'/'.join(reserved_only)} need a capacityReservationSelectorTerms on the node "
                f"class {nc_name}, or the paid reservation sits idle",
                nc.at("spec") if nc else f"EC2NodeClass {nc_name} (missing)",
                fam_place,
            )


# The CRD's pattern for a HyperPod model's single instanceType; the list's items carry none.
ML_TYPE_PREFIX = "ml."


@check("hyperpod-instance-types")
def check_hyperpod_instance_types(ctx: Context) -> Iterator[Finding]:
    """A HyperPod model sets `instanceType` or `instanceTypes`, never both (the CRD says they are
    mutually exclusive), and every listed type is an ml.* type, each once."""
    for r in of_kind(ctx.resources, "InferenceEndpointConfig"):
        spec = r.doc.get("spec") or {}
        if "instanceType" in spec and "instanceTypes" in spec:
            yield found(
                "sets both instanceType and instanceTypes, which the operator's CRD says are "
                "mutually exclusive: keep the list (the first type, then the fallbacks)",
                r.at("spec.instanceType"),
                r.at("spec.instanceTypes"),
            )
        listed = spec.get("instanceTypes")
        if not isinstance(listed, list):
            continue
        for index, kind in enumerate(listed):
            if not str(kind).startswith(ML_TYPE_PREFIX):
                yield found(
                    f"{kind!r} is not an ml.* type (the CRD's instanceType pattern ^ml\\..*): "
                    "HyperPod instance groups use ml.* types",
                    r.at(f"spec.instanceTypes.{index}"),
                )
            elif kind in listed[:index]:
                yield found(
                    f"{kind!r} is listed twice: the operator tries each type once, in order",
                    r.at(f"spec.instanceTypes.{index}"),
                )
