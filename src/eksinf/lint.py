"""`eksinf lint`: static link validation and cross-component invariants.

Links make values equal; lint proves the rest. It reads the committed configs/, the profile and
the bindings; resolves the placeholders through the bindings (so a linked value is compared as
it will ship); then checks invariants no link can express. Every finding names the two places
that disagree (unit file, resource, path), or the one field that is wrong.

Pure: `lint_stack` reads files and returns a report; it never writes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import links, paths
from .errors import EksinfError
from .model import placeholder
from .model.configs import Resource, of_kind, place, read_units, tag_path
from .model.configs import resources as all_resources
from .model.configs import tags as tag_map
from .model.names import DISCOVERY_KEY, FAMILY_KEY, GPU_RESOURCE
from .model.placeholder import PLACEHOLDER
from .model.quantity import gib_text as gib
from .model.quantity import to_bytes as quantity
from .model.resources import find_resource, pod_spec, pod_spec_path, resource_label
from .profile import ROLE_NAME, STACK_TAG_KEY, load_profile
from .render import PROVENANCE_FILE, inputs_digest, source_files
from .stack import Stack
from .validate import ids
from .yamlio import load_docs

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
class Finding:
    check: str
    message: str
    places: tuple[str, ...] = ()  # "configs/<c>/<u>.yaml Kind ns/name path", one or two

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "message": self.message, "places": list(self.places)}


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    bindings: int = 0
    placeholders: int = 0

    @property
    def ok(self) -> bool:
        return not self.findings

    def add(self, check: str, message: str, *places: str) -> None:
        self.findings.append(Finding(check, message, tuple(places)))

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": self.checks,
            "bindings": self.bindings,
            "placeholders": self.placeholders,
            "findings": [f.as_dict() for f in self.findings],
        }


# ---- places and small helpers -----------------------------------------------------------------


# ---- static link validation -------------------------------------------------------------------


def check_links(
    report: Report, units: dict[str, list[dict]], spec: dict | None, bindings: list[links.Binding]
) -> list[links.Binding]:
    """Validate every binding against the rendered units; return the ones that can resolve."""
    report.checks.append("links")
    valid: list[links.Binding] = []
    covered: dict[tuple[str, int, str], links.Binding] = {}
    for b in bindings:
        where = f"{b.where} ({b.describe()})"
        docs = units.get(b.unit_key)
        if docs is None:
            report.add(
                "binding-unit",
                f"binding names unit {b.unit!r}, but component {b.component} has no such unit",
                where,
                f"configs/{b.component}/",
            )
            continue
        doc = find_resource(docs, b.kind, b.name)
        if doc is None:
            have = ", ".join(resource_label(d) for d in docs) or "nothing"
            report.add(
                "binding-resource",
                f"binding targets {b.kind} {b.name}, which unit {b.unit_key}.yaml does not "
                f"contain (it has: {have})",
                where,
                f"configs/{b.unit_key}.yaml",
            )
            continue
        try:
            target = links.target_path(b, doc)
        except paths.PathError as exc:
            report.add(
                "binding-setter",
                f"setter {b.container}/{b.env}: {exc.message}",
                where,
                place(b.unit_key, doc, pod_spec_path(doc) + ".containers"),
            )
            continue
        if not paths.exists(doc, target):
            suspect = paths.unescaped_dot_suspect(doc, target)
            if suspect:
                report.add(
                    "binding-unescaped-dot",
                    f"path {target} has an unescaped dot inside a key: it addresses a nested "
                    f"key that does not exist (a hub would silently create it). The field "
                    f"exists as {suspect}; write that spelling (`~1` for a literal dot)",
                    where,
                    place(b.unit_key, doc, suspect),
                )
            else:
                report.add(
                    "binding-path",
                    f"path {target} does not exist in {resource_label(doc)}",
                    where,
                    place(b.unit_key, doc),
                )
            continue
        if spec is not None and not paths.exists(spec, b.source):
            report.add(
                "binding-source",
                f"source spec.{b.source} does not exist in the platform profile",
                where,
                "render/platform-profile/profile.yaml spec",
            )
            continue
        if spec is not None:
            try:
                links.profile_value(spec, b.source)
            except paths.PathError as exc:  # a list or map: the engine carries scalars only
                report.add(
                    "binding-source",
                    exc.message,
                    where,
                    "render/platform-profile/profile.yaml spec",
                )
                continue
        current = paths.get(doc, target)
        if not placeholder.is_placeholder(current):
            report.add(
                "binding-literal",
                f"linked field holds the literal {current!r}; every linked field ships as "
                f"{PLACEHOLDER!r}, so a missing link is caught instead of shipping a stale "
                "default",
                where,
                place(b.unit_key, doc, target),
            )
            continue  # not resolved: the invariants below then compare the literal as shipped
        key = (b.unit_key, id(doc), target)
        if key in covered:
            first = covered[key]
            report.add(
                "binding-duplicate",
                f"two bindings write {target} (spec.{first.source} and spec.{b.source})",
                f"{first.where} ({first.describe()})",
                where,
            )
            continue
        covered[key] = b
        valid.append(b)
    report.checks.append("placeholders")
    for key, docs in sorted(units.items()):
        for doc in docs:
            for path in placeholder.scan(doc):
                report.placeholders += 1
                if (key, id(doc), path) not in covered:
                    report.add(
                        "placeholder-unbound",
                        f"placeholder with no binding: nothing will ever resolve {path}",
                        place(key, doc, path),
                        f"render/{key.split('/')[0]}/links/bindings.yaml",
                    )
    return valid


# ---- invariants ---------------------------------------------------------------------------------


def _service_accounts(resources: list[Resource]) -> list[Resource]:
    return [r for r in of_kind(resources, "ServiceAccount") if r.plane == "workload"]


def check_identity(report: Report, resources: list[Resource]) -> None:
    """Pod Identity associations and IRSA `sub` conditions name a ServiceAccount that exists."""
    report.checks.append("identity-trust")
    accounts = _service_accounts(resources)
    have = {(r.namespace, r.name): r for r in accounts}

    def missing(ns: Any, name: Any, here: str, what: str) -> None:
        # The closest real account: same name in another namespace, else one in the namespace.
        near = [r for r in accounts if r.name == name] or [r for r in accounts if r.namespace == ns]
        there = (
            near[0].at("metadata") if near else "no workload-plane unit renders a ServiceAccount"
        )
        hint = f"; the rendered chart creates {near[0].namespace}/{near[0].name}" if near else ""
        report.add(
            "identity-trust",
            f"{what} names ServiceAccount {ns}/{name}, which no workload-plane unit creates"
            f"{hint}: the pod can never assume the role",
            here,
            there,
        )

    for r in of_kind(resources, "PodIdentityAssociation"):
        spec = r.doc.get("spec") or {}
        ns, name = spec.get("namespace"), spec.get("serviceAccount")
        if (ns, name) not in have:
            missing(
                ns, name, r.at("spec.namespace/spec.serviceAccount"), "Pod Identity association"
            )
    for r in of_kind(resources, "Role", "iam.services.k8s.aws"):
        spec = r.doc.get("spec") or {}
        text = spec.get("assumeRolePolicyDocument")
        if not isinstance(text, str) or PLACEHOLDER in text:
            continue
        for subject in _irsa_subjects(text):
            parts = subject.split(":")
            if len(parts) == 4 and (parts[2], parts[3]) not in have:
                missing(parts[2], parts[3], r.at("spec.assumeRolePolicyDocument"), "IRSA trust")


def _irsa_subjects(text: str) -> Iterator[str]:
    try:
        policy = json.loads(text)
    except json.JSONDecodeError:
        return
    for statement in _statements(policy):
        for operator in (statement.get("Condition") or {}).values():
            for key, values in (operator or {}).items():
                if key.endswith(":sub"):
                    for value in values if isinstance(values, list) else [values]:
                        if str(value).startswith("system:serviceaccount:"):
                            yield str(value)


def _statements(policy: Any) -> list[dict]:
    statements = policy.get("Statement", []) if isinstance(policy, dict) else []
    return [s for s in (statements if isinstance(statements, list) else [statements]) if s]


def check_discovery(report: Report, resources: list[Resource]) -> None:
    """Discovery tags on private subnets + SG equal the EC2NodeClass selectors; public: none."""
    report.checks.append("discovery-tags")
    subnets = of_kind(resources, "Subnet", "ec2.services.k8s.aws")
    groups = of_kind(resources, "SecurityGroup", "ec2.services.k8s.aws")
    tagged: dict[str, list[tuple[Resource, Any]]] = {"subnet": [], "sg": []}
    for r in subnets:
        spec = r.doc.get("spec") or {}
        tags = tag_map(spec)
        public = bool(spec.get("mapPublicIPOnLaunch")) or "kubernetes.io/role/elb" in tags
        if public and DISCOVERY_KEY in tags:
            report.add(
                "discovery-public-subnet",
                f"public subnet carries {DISCOVERY_KEY}: Karpenter would launch nodes with "
                "public IPs into it",
                r.at(tag_path(spec, DISCOVERY_KEY)),
            )
        elif not public:
            if DISCOVERY_KEY not in tags:
                report.add(
                    "discovery-missing",
                    f"private subnet has no {DISCOVERY_KEY} tag: Karpenter will not use its zone",
                    r.at("spec.tags"),
                )
            else:
                tagged["subnet"].append((r, tags[DISCOVERY_KEY]))
    for r in groups:
        spec = r.doc.get("spec") or {}
        tags = tag_map(spec)
        if DISCOVERY_KEY in tags:
            tagged["sg"].append((r, tags[DISCOVERY_KEY]))
    for r in of_kind(resources, "EC2NodeClass"):
        spec = r.doc.get("spec") or {}
        for field_name, kind in (
            ("subnetSelectorTerms", "subnet"),
            ("securityGroupSelectorTerms", "sg"),
        ):
            terms = spec.get(field_name) or []
            for index, term in enumerate(terms):
                want = (term.get("tags") or {}).get(DISCOVERY_KEY)
                if want is None or want == PLACEHOLDER:
                    continue  # unresolved: already reported by the link checks
                here = r.at(f"spec.{field_name}.{index}.tags.{paths.escape(DISCOVERY_KEY)}")
                carriers = tagged[kind]
                if not carriers:
                    report.add(
                        "discovery-tag",
                        f"selects {'subnets' if kind == 'subnet' else 'security groups'} by "
                        f"{DISCOVERY_KEY}={want}, but no "
                        f"{'private subnet' if kind == 'subnet' else 'security group'} carries "
                        "that tag: Karpenter launches nothing and names no error",
                        here,
                        *[c.at("spec.tags") for c in (subnets if kind == "subnet" else groups)][:1],
                    )
                for carrier, value in carriers:
                    if value not in (want, PLACEHOLDER):
                        report.add(
                            "discovery-tag",
                            f"{DISCOVERY_KEY} differs: the selector wants {want!r}, the "
                            f"{'subnet' if kind == 'subnet' else 'security group'} carries "
                            f"{value!r}: Karpenter launches nothing and names no error",
                            here,
                            carrier.at(tag_path(carrier.doc.get("spec") or {}, DISCOVERY_KEY)),
                        )


def check_network(report: Report, resources: list[Resource]) -> None:
    """The intra-VPC ingress rule names the VPC CIDR; every network resource has the stack tag."""
    report.checks.append("network")
    vpcs = of_kind(resources, "VPC", "ec2.services.k8s.aws")
    cidrs = {c for v in vpcs for c in (v.doc.get("spec") or {}).get("cidrBlocks") or []}
    if PLACEHOLDER in cidrs:
        cidrs = set()  # unresolved: already reported by the link checks
    for r in of_kind(resources, "SecurityGroup", "ec2.services.k8s.aws"):
        for ri, rule in enumerate((r.doc.get("spec") or {}).get("ingressRules") or []):
            for ni, rng in enumerate(rule.get("ipRanges") or []):
                cidr = rng.get("cidrIP")
                if not cidrs or cidr == PLACEHOLDER:
                    continue
                if rng.get("description") == "intra-VPC" and cidr not in cidrs:
                    report.add(
                        "vpc-cidr",
                        f"intra-VPC ingress allows {rng.get('cidrIP')}, but the VPC is "
                        f"{', '.join(sorted(cidrs)) or 'absent'}: nodes join but cannot talk",
                        r.at(f"spec.ingressRules.{ri}.ipRanges.{ni}.cidrIP"),
                        vpcs[0].at("spec.cidrBlocks.0") if vpcs else "no VPC",
                    )
    for r in resources:
        if r.group == "ec2.services.k8s.aws" and STACK_TAG_KEY not in tag_map(
            r.doc.get("spec") or {}
        ):
            report.add(
                "stack-tag",
                f"network resource has no {STACK_TAG_KEY} tag: status and teardown scope every "
                "AWS query by it",
                r.at("spec.tags"),
            )


def check_node_role(report: Report, resources: list[Resource]) -> None:
    """The nodegroup's role, the EC2NodeClasses' role and the IAM role are one role."""
    report.checks.append("node-role")
    roles = {r.name: r for r in of_kind(resources, "Role", "iam.services.k8s.aws")}
    for ng in of_kind(resources, "Nodegroup", "eks.services.k8s.aws"):
        ref = ((ng.doc.get("spec") or {}).get("nodeRoleRef") or {}).get("from") or {}
        role = roles.get(ref.get("name", ""))
        if role is None:
            report.add(
                "node-role",
                f"nodegroup's nodeRoleRef names Role {ref.get('name')!r}, which no unit defines",
                ng.at("spec.nodeRoleRef.from.name"),
            )
            continue
        role_name = (role.doc.get("spec") or {}).get("name")
        for nc in of_kind(resources, "EC2NodeClass"):
            value = (nc.doc.get("spec") or {}).get("role")
            if PLACEHOLDER in (value, role_name):
                continue
            if value != role_name:
                report.add(
                    "node-role",
                    f"EC2NodeClass role {value!r} differs from the nodegroup's node role "
                    f"{role_name!r}: Karpenter nodes would not join through its access entry",
                    nc.at("spec.role"),
                    role.at("spec.name"),
                )


def check_cluster_name(report: Report, resources: list[Resource]) -> None:
    """Karpenter's CLUSTER_NAME and its cluster-SG selector name the EKS cluster."""
    report.checks.append("cluster-name")
    clusters = of_kind(resources, "Cluster", "eks.services.k8s.aws")
    if not clusters:
        return
    cluster = clusters[0]
    name = (cluster.doc.get("spec") or {}).get("name")
    for r in resources:
        if r.kind != "Deployment" or r.plane != "workload":
            continue
        for path, value in _env_values(r.doc, "CLUSTER_NAME"):
            if value != name and PLACEHOLDER not in (value, name):
                report.add(
                    "cluster-name",
                    f"CLUSTER_NAME is {value!r} but the EKS cluster is {name!r}",
                    r.at(path),
                    cluster.at("spec.name"),
                )
    for nc in of_kind(resources, "EC2NodeClass"):
        for index, term in enumerate(
            (nc.doc.get("spec") or {}).get("securityGroupSelectorTerms") or []
        ):
            value = (term.get("tags") or {}).get("aws:eks:cluster-name")
            if value not in (None, name, PLACEHOLDER) and name != PLACEHOLDER:
                report.add(
                    "cluster-name",
                    f"selects the cluster security group of {value!r}, but the cluster is {name!r}",
                    nc.at(f"spec.securityGroupSelectorTerms.{index}.tags.aws:eks:cluster-name"),
                    cluster.at("spec.name"),
                )


def _env_values(doc: dict, env: str) -> Iterator[tuple[str, Any]]:
    spec = pod_spec(doc)
    if spec is None:
        return
    base = pod_spec_path(doc)
    for ci, container in enumerate(spec.get("containers") or []):
        for ei, var in enumerate(container.get("env") or []):
            if var.get("name") == env and "value" in var:
                yield f"{base}.containers.{ci}.env.{ei}.value", var["value"]


def check_model_id(report: Report, resources: list[Resource]) -> None:
    """Every client's VLLM_MODEL equals the model the server loads."""
    report.checks.append("model-id")
    seen = [
        (r, path, value)
        for r in resources
        if r.plane == "workload" and r.kind == "Deployment"
        for path, value in _env_values(r.doc, "VLLM_MODEL")
    ]
    if not seen:
        return
    first, first_path, first_value = seen[0]
    for r, path, value in seen[1:]:
        if value != first_value and PLACEHOLDER not in (value, first_value):
            report.add(
                "model-id",
                f"VLLM_MODEL {value!r} differs from {first_value!r}: the server rejects "
                "requests for a model it did not load",
                r.at(path),
                first.at(first_path),
            )


# ---- scheduling: pools, taints, tolerations, storage ----------------------------------------


@dataclass(frozen=True)
class Pool:
    name: str
    res: Resource | None  # None for the system nodegroup pseudo-pool
    labels: dict[str, str]
    requirements: dict[str, tuple[str, list[str]]]  # key -> (operator, values)
    taints: tuple[dict, ...]
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


def _candidates(spec: dict, pools: list[Pool]) -> list[Pool]:
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


def _tolerates(tolerations: list[dict], taint: dict) -> bool:
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


def _wants_gpu(spec: dict) -> bool:
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        for part in ("limits", "requests"):
            if GPU_RESOURCE in (resources.get(part) or {}):
                return True
    return False


def _taint_str(taint: dict) -> str:
    return f"{taint.get('key')}={taint.get('value', '')}:{taint.get('effect')}"


def check_scheduling(report: Report, resources: list[Resource]) -> None:
    """GPU pool taints are tolerated by the workloads meant for them and by nothing GPU-less;
    each model workload's disk needs fit the root volume of every node it can land on."""
    report.checks += ["taints", "storage"]
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
            _check_gpu_tolerations(report, r, base, tolerations, candidates)
        else:
            for pool in (p for p in pools if p.gpu):
                for ti, taint in enumerate(pool.taints):
                    if any(t.get("key") == taint.get("key") for t in tolerations) and _tolerates(
                        tolerations, taint
                    ):
                        report.add(
                            "taint-gpu-less",
                            f"a workload that requests no GPU tolerates {_taint_str(taint)}: it "
                            "can land on (and keep alive) a GPU node",
                            r.at(f"{base}.tolerations"),
                            pool.at(f"spec.template.spec.taints.{ti}"),
                        )
                        break
        _check_storage(report, r, base, spec, candidates)


def _check_gpu_tolerations(
    report: Report, r: Resource, base: str, tolerations: list[dict], candidates: list[Pool]
) -> None:
    if not candidates:
        report.add(
            "taint-gpu",
            "a GPU workload selects no GPU pool: it stays Pending and Karpenter launches nothing",
            r.at(f"{base}.nodeSelector"),
        )
        return

    def untolerated(pool: Pool) -> list[tuple[int, dict]]:
        return [(i, t) for i, t in enumerate(pool.taints) if not _tolerates(tolerations, t)]

    # A DaemonSet must run on every GPU node it selects; a Deployment needs one pool it fits.
    failing = [(p, bad) for p in candidates if (bad := untolerated(p))]
    if r.kind != "DaemonSet" and len(failing) < len(candidates):
        return
    for pool, bad in failing:
        index, taint = bad[0]
        report.add(
            "taint-gpu",
            f"GPU workload does not tolerate {_taint_str(taint)} of NodePool {pool.name}: "
            "it stays Pending",
            r.at(f"{base}.tolerations"),
            pool.at(f"spec.template.spec.taints.{index}"),
        )


def _check_storage(
    report: Report, r: Resource, base: str, spec: dict, candidates: list[Pool]
) -> None:
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
            report.add(
                "storage",
                f"needs {gib(need)} of ephemeral storage, but pool {pool.name}'s root volume is "
                f"{pool.root_gib}Gi ({ROOT_HEADROOM_GIB}Gi kept for the OS and images): the pod is "
                "evicted when the cache fills",
                r.at(need_place),
                pool.root_place,
            )


def check_accelerators(report: Report, resources: list[Resource]) -> None:
    """Accelerator labels agree with the instance families; reserved-only families reserve."""
    report.checks += ["accelerators", "reserved-capacity"]
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
        if GPU_NAME_KEY in index:
            names = {str(v) for v in reqs[index[GPU_NAME_KEY]].get("values") or []}
            name_place = r.at(f"spec.template.spec.requirements.{index[GPU_NAME_KEY]}.values")
            for family in families:
                gpu = FAMILY_GPU.get(family)
                if gpu and gpu not in names:
                    report.add(
                        "accelerator-label",
                        f"family {family} carries {gpu}, which the pool's {GPU_NAME_KEY} "
                        f"requirement ({', '.join(sorted(names))}) excludes: it never launches",
                        name_place,
                        fam_place,
                    )
            produced = {FAMILY_GPU.get(f) for f in families}
            for name in sorted(names - produced):
                if families:
                    report.add(
                        "accelerator-label",
                        f"{GPU_NAME_KEY} {name} comes from none of the pool's families "
                        f"({', '.join(families)})",
                        name_place,
                        fam_place,
                    )
        labels = (tmpl.get("metadata") or {}).get("labels") or {}
        gpus = sorted({FAMILY_GPU[f] for f in families if f in FAMILY_GPU})
        for key, value in labels.items():
            about_gpu = "accelerator" in key or key.endswith("gpu-name")
            if about_gpu and gpus and (len(gpus) > 1 or gpus[0] not in str(value)):
                report.add(
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
            report.add(
                "reserved-capacity",
                f"{'/'.join(reserved_only)} are sold only through capacity reservations, but the "
                f"pool's capacity types are {capacity or 'unrestricted'}; use only 'reserved'",
                cap_place,
                fam_place,
            )
        nc_name = (spec.get("nodeClassRef") or {}).get("name")
        nc = classes.get(nc_name or "")
        if nc is None or not (nc.doc.get("spec") or {}).get("capacityReservationSelectorTerms"):
            report.add(
                "reserved-capacity",
                f"{'/'.join(reserved_only)} need a capacityReservationSelectorTerms on the node "
                f"class {nc_name}, or the paid reservation sits idle",
                nc.at("spec") if nc else f"EC2NodeClass {nc_name} (missing)",
                fam_place,
            )


# The kind an ACK reference field points at (the field name without Ref/Refs decides).
REF_KINDS = {
    "vpc": "VPC",
    "subnet": "Subnet",
    "routeTable": "RouteTable",
    "gateway": "InternetGateway",
    "natGateway": "NATGateway",
    "allocation": "ElasticIPAddress",
    "securityGroup": "SecurityGroup",
    "group": "SecurityGroup",
    "role": "Role",
    "nodeRole": "Role",
    "targetRole": "Role",
    "serviceAccountRole": "Role",
    "cluster": "Cluster",
    "policy": "Policy",
}


def _refs(node: Any, prefix: str = "") -> Iterator[tuple[str, str, dict]]:
    """(path, field stem, from-block) of every ACK `*Ref`/`*Refs` in a spec."""
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{paths.escape(str(key))}" if prefix else paths.escape(str(key))
            stem = str(key).removesuffix("s").removesuffix("Ref")
            if str(key).endswith(("Ref", "Refs")):
                items = value if isinstance(value, list) else [value]
                for index, item in enumerate(items):
                    where = f"{path}.{index}" if isinstance(value, list) else path
                    block = (item or {}).get("from") if isinstance(item, dict) else None
                    if isinstance(block, dict):
                        yield f"{where}.from.name", stem, block
            else:
                yield from _refs(value, path)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _refs(value, f"{prefix}.{index}")


def check_ack_refs(report: Report, resources: list[Resource]) -> None:
    """Every ACK reference names a resource some mgmt-plane unit defines, of the right kind.

    A dangling reference is not an apply error: ACK waits for it forever, and the cluster (or
    nodegroup, or identity) that depends on it never appears.
    """
    report.checks.append("ack-refs")
    mgmt = [r for r in resources if r.plane == "mgmt" and r.group.endswith("services.k8s.aws")]
    index = {(r.namespace, r.name, r.kind) for r in mgmt}
    for r in mgmt:
        for path, stem, block in _refs(r.doc.get("spec") or {}, "spec"):
            name = block.get("name")
            ns = block.get("namespace") or r.namespace
            kind = REF_KINDS.get(stem)
            if kind is None or (ns, name, kind) in index:
                continue
            same = [x for x in mgmt if x.kind == kind and x.namespace == ns]
            report.add(
                "ack-ref",
                f"references {kind} {ns}/{name}, which no mgmt-plane unit defines: ACK waits for "
                f"it forever (the namespace defines {kind}: {', '.join(x.name for x in same) or 'none'})",
                r.at(path),
                same[0].at("metadata.name") if same else f"no {kind} in namespace {ns}",
            )


def check_iam_policies(report: Report, resources: list[Resource], iam_dir: Path) -> None:
    """No IAM policy allows iam:PassRole without an iam:PassedToService condition."""
    report.checks.append("passrole")
    documents: list[tuple[str, Any]] = []
    for path in sorted(iam_dir.glob("*.json")) if iam_dir.is_dir() else []:
        try:
            documents.append((f"iam/{path.name}", json.loads(path.read_text(encoding="utf-8"))))
        except json.JSONDecodeError as exc:
            report.add("iam-policy", f"not valid JSON: {exc}", f"iam/{path.name}")
    for r in of_kind(resources, "Role", "iam.services.k8s.aws"):
        for name, text in ((r.doc.get("spec") or {}).get("inlinePolicies") or {}).items():
            where = r.at(f"spec.inlinePolicies.{paths.escape(str(name))}")
            try:
                documents.append((where, json.loads(text)))
            except (TypeError, json.JSONDecodeError) as exc:
                report.add("iam-policy", f"inline policy is not valid JSON: {exc}", where)
    for r in of_kind(resources, "Policy", "iam.services.k8s.aws"):
        text = (r.doc.get("spec") or {}).get("policyDocument")
        if isinstance(text, str):
            try:
                documents.append((r.at("spec.policyDocument"), json.loads(text)))
            except json.JSONDecodeError as exc:
                report.add("iam-policy", f"not valid JSON: {exc}", r.at("spec.policyDocument"))
    for where, policy in documents:
        for index, statement in enumerate(_statements(policy)):
            if statement.get("Effect") != "Allow":
                continue
            actions = statement.get("Action", [])
            actions = actions if isinstance(actions, list) else [actions]
            if not any(a in ("iam:PassRole", "iam:*", "*") for a in actions):
                continue
            keys = {
                k.lower() for op in (statement.get("Condition") or {}).values() for k in (op or {})
            }
            if "iam:passedtoservice" not in keys:
                sid = statement.get("Sid", f"#{index}")
                report.add(
                    "passrole",
                    f"statement {sid} allows iam:PassRole with no iam:PassedToService condition: "
                    "the holder can hand any role to any service",
                    f"{where} Statement.{index}",
                )


# ---- control-plane naming conventions -------------------------------------------------------
#
# AWS and its controllers find some resources by an exact name or tag key, and say nothing when
# the spelling is off: Karpenter selects zero subnets, pods find no Pod Identity agent to hand out
# credentials, teardown misses a resource. These checks hold our units to those spellings.

CLUSTER_SG_KEY = "aws:eks:cluster-name"  # EKS tags the cluster security group it creates
POD_IDENTITY_ADDON = "eks-pod-identity-agent"  # the EKS add-on name, exact
ACK_GROUP_SUFFIX = ".services.k8s.aws"
# Instance profile names: iam:CreateInstanceProfile InstanceProfileName.
_PROFILE_NAME = re.compile(r"^[\w+=,.@-]{1,128}$")


def _squash(text: Any) -> str:
    """Letters only, lowercased: `Karpenter.sh/Discovery` and `karpenter_sh/discovery` agree."""
    return re.sub(r"[^a-z]", "", str(text).lower())


def _near_discovery(key: str) -> bool:
    squashed = _squash(key)
    return key != DISCOVERY_KEY and "karpenter" in squashed and "discover" in squashed


def _near_cluster_sg(key: str) -> bool:
    return key != CLUSTER_SG_KEY and "eksclustername" in _squash(key)


def _tag_items(spec: dict) -> Iterator[tuple[str, Any, str, str]]:
    """(key, value, key path, value path) of each tag, list- or map-shaped."""
    tags = spec.get("tags")
    if isinstance(tags, list):
        for index, tag in enumerate(tags):
            if isinstance(tag, dict):
                at = f"spec.tags.{index}"
                yield str(tag.get("key")), tag.get("value"), f"{at}.key", f"{at}.value"
    elif isinstance(tags, dict):
        for key, value in tags.items():
            at = f"spec.tags.{paths.escape(str(key))}"
            yield str(key), value, at, at


def check_tag_keys(report: Report, resources: list[Resource]) -> None:
    """Discovery and cluster-SG tag keys are spelled exactly; no tag key uses AWS's `aws:`."""
    report.checks.append("tag-key-spelling")
    discovery_why = (
        f"Karpenter matches the exact key {DISCOVERY_KEY} (value: the network name), so this "
        "tag selects and marks nothing"
    )
    for r in resources:
        if not r.group.endswith(ACK_GROUP_SUFFIX):
            continue
        for key, value, key_path, value_path in _tag_items(r.doc.get("spec") or {}):
            if _near_discovery(key):
                report.add(
                    "tag-key-spelling",
                    f"tag key {key!r} is not {DISCOVERY_KEY}: {discovery_why}",
                    r.at(key_path),
                )
            elif value == DISCOVERY_KEY:
                report.add(
                    "tag-key-spelling",
                    f"{DISCOVERY_KEY} is the tag's value (key {key!r}); it must be the key: "
                    f"{discovery_why}",
                    r.at(value_path),
                )
            if key.lower().startswith("aws:"):
                report.add(
                    "tag-key-spelling",
                    f"tag key {key!r} starts with 'aws:', which AWS reserves for its own tags: "
                    "the create call is rejected and ACK retries forever",
                    r.at(key_path),
                )
    for nc in of_kind(resources, "EC2NodeClass"):
        spec = nc.doc.get("spec") or {}
        for field_name in ("subnetSelectorTerms", "securityGroupSelectorTerms"):
            for index, term in enumerate(spec.get(field_name) or []):
                for key, value in (term.get("tags") or {}).items():
                    here = nc.at(f"spec.{field_name}.{index}.tags.{paths.escape(str(key))}")
                    if _near_discovery(str(key)) or value == DISCOVERY_KEY:
                        report.add(
                            "tag-key-spelling",
                            f"selector tag {key}={value} is not keyed {DISCOVERY_KEY}: "
                            f"{discovery_why}",
                            here,
                        )
                    elif _near_cluster_sg(str(key)):
                        report.add(
                            "tag-key-spelling",
                            f"selector tag key {key!r} is not {CLUSTER_SG_KEY}, the key EKS puts "
                            "on the cluster security group it creates: the term selects nothing "
                            "and nodes cannot reach CoreDNS on the managed nodes",
                            here,
                        )


def _cluster_of(r: Resource) -> tuple[Any, Any]:
    ref = ((r.doc.get("spec") or {}).get("clusterRef") or {}).get("from") or {}
    return ref.get("namespace") or r.namespace, ref.get("name")


def check_pod_identity_agent(report: Report, resources: list[Resource]) -> None:
    """A cluster with Pod Identity associations runs the add-on named eks-pod-identity-agent."""
    report.checks.append("pod-identity-agent")
    addons = of_kind(resources, "Addon", "eks.services.k8s.aws")
    agents = {
        _cluster_of(a)
        for a in addons
        if (a.doc.get("spec") or {}).get("name") == POD_IDENTITY_ADDON
    }
    for assoc in of_kind(resources, "PodIdentityAssociation", "eks.services.k8s.aws"):
        cluster = _cluster_of(assoc)
        if cluster in agents:
            continue
        near = [
            a for a in addons if "podidentity" in _squash((a.doc.get("spec") or {}).get("name"))
        ]
        there = (near or addons)[0] if addons else None
        have = (
            f"the add-on here is named {(there.doc.get('spec') or {}).get('name')!r}"
            if there
            else "no unit defines an eks Addon"
        )
        report.add(
            "pod-identity-agent",
            f"Pod Identity association on Cluster {cluster[0]}/{cluster[1]}, but no Addon with "
            f"spec.name exactly {POD_IDENTITY_ADDON!r} runs on that cluster ({have}): the pod "
            "gets no credentials",
            assoc.at("spec.clusterRef.from.name"),
            there.at("spec.name") if there else "no mgmt-plane unit defines an eks Addon",
        )


def check_node_class_identity(report: Report, resources: list[Resource]) -> None:
    """Each EC2NodeClass sets exactly one of role and instanceProfile, each a name, not an ARN."""
    report.checks.append("node-class-identity")
    roles = {
        (r.doc.get("spec") or {}).get("name"): r
        for r in of_kind(resources, "Role", "iam.services.k8s.aws")
    }
    for nc in of_kind(resources, "EC2NodeClass"):
        spec = nc.doc.get("spec") or {}
        has_role, has_profile = "role" in spec, "instanceProfile" in spec
        if has_role == has_profile:
            report.add(
                "node-class-identity",
                f"sets {'both' if has_role else 'neither of'} spec.role and spec.instanceProfile: "
                "Karpenter requires exactly one (this stack uses role, the node role's name, and "
                "lets Karpenter manage the instance profile)",
                nc.at("spec.role"),
                nc.at("spec.instanceProfile"),
            )
        for field_name, pattern, what in (
            ("role", ROLE_NAME, "IAM role name (1-64 of letters, digits and +=,.@_-)"),
            (
                "instanceProfile",
                _PROFILE_NAME,
                "instance profile name (1-128 of +=,.@_- and alphanumerics)",
            ),
        ):
            value = spec.get(field_name)
            if value is None or value == PLACEHOLDER or pattern.match(str(value)):
                continue
            named = str(value).rsplit("/", 1)[-1]
            hint = f"; write {named!r}" if str(value).startswith("arn:") else ""
            report.add(
                "node-class-identity",
                f"spec.{field_name} is {value!r}, but Karpenter wants an {what}, not an ARN or a "
                f"path{hint}",
                nc.at(f"spec.{field_name}"),
                *(
                    [roles[named].at("spec.name")]
                    if field_name == "role" and named in roles
                    else []
                ),
            )


def check_role_names(report: Report, resources: list[Resource]) -> None:
    """Every IAM role name, as it ships (resolved through the profile), is a valid role name."""
    report.checks.append("iam-role-name")
    for r in of_kind(resources, "Role", "iam.services.k8s.aws"):
        name = (r.doc.get("spec") or {}).get("name")
        if name is None or name == PLACEHOLDER or ROLE_NAME.match(str(name)):
            continue
        report.add(
            "iam-role-name",
            f"role name {name!r} ({len(str(name))} characters) is not a valid IAM role name: at "
            "most 64 of letters, digits and +=,.@_-; iam:CreateRole rejects it and ACK retries "
            "forever. Shorten the profile's role name (or the stack name it derives from)",
            r.at("spec.name"),
        )


def _taggable_kinds(resources: list[Resource]) -> set[tuple[str, str]]:
    """(group, kind) of every ACK kind whose CRD (as rendered) has spec.tags."""
    out = set()
    for crd in of_kind(resources, "CustomResourceDefinition"):
        spec = crd.doc.get("spec") or {}
        group, kind = spec.get("group", ""), (spec.get("names") or {}).get("kind")
        if not str(group).endswith(ACK_GROUP_SUFFIX):
            continue
        for version in spec.get("versions") or []:
            schema = (version.get("schema") or {}).get("openAPIV3Schema") or {}
            fields = ((schema.get("properties") or {}).get("spec") or {}).get("properties") or {}
            if "tags" in fields:
                out.add((group, kind))
    return out


def check_ack_stack_tag(report: Report, resources: list[Resource], stack_name: Any) -> None:
    """Every ACK resource whose kind supports tags carries eksinf.dev/stack=<stackName>.

    Network resources missing the key are reported by `stack-tag` already; this adds the other
    ACK kinds (EKS, IAM) and checks the value on all of them.
    """
    report.checks.append("stack-tag-ack")
    taggable = _taggable_kinds(resources)
    for r in resources:
        if (r.group, r.kind) not in taggable:
            continue
        spec = r.doc.get("spec") or {}
        tags = tag_map(spec)
        if STACK_TAG_KEY not in tags:
            if r.group != "ec2.services.k8s.aws":
                report.add(
                    "stack-tag",
                    f"{r.kind} supports tags (its CRD has spec.tags) but carries no "
                    f"{STACK_TAG_KEY} tag: status and teardown scope every AWS query by it",
                    r.at("spec.tags"),
                )
            continue
        value = tags[STACK_TAG_KEY]
        if value != stack_name and PLACEHOLDER not in (value, stack_name):
            report.add(
                "stack-tag",
                f"{STACK_TAG_KEY} is {value!r}, but the stack is {stack_name!r}: teardown and "
                "status would miss this resource or claim it for another stack",
                r.at(tag_path(spec, STACK_TAG_KEY)),
                "render/platform-profile/profile.yaml spec.stackName",
            )


# ---- freshness ---------------------------------------------------------------------------------


def check_fresh(report: Report, stack: Stack) -> dict[str, tuple[str, list[dict]]]:
    """Flag configs/ rendered from other sources; return the handwritten units whose source differs.

    Handwritten units are copied byte for byte, so a differing source means configs/ is stale.
    The caller lints those sources too, so the real problem is reported, not only "run render".
    Returns `component/unit` -> (source file, documents).
    """
    report.checks.append("fresh")
    sources: dict[str, tuple[str, list[dict]]] = {}
    stale = False
    for comp in stack.components:
        for path in source_files(stack, comp):
            committed = stack.configs_dir / comp.name / path.name
            text = path.read_text(encoding="utf-8")
            if committed.is_file() and committed.read_text(encoding="utf-8") == text:
                continue
            stale = True
            source = str(path.relative_to(stack.root))
            report.add(
                "configs-stale",
                "the source differs from the committed unit (configs/ ships the old text; "
                "findings below are about the source): run `eksinf render` and commit configs/",
                source,
                str(committed.relative_to(stack.root)),
            )
            try:
                docs = load_docs(text)
            except yaml.YAMLError as exc:
                report.add("configs-stale", f"not valid YAML: {str(exc).splitlines()[0]}", source)
                continue
            key = f"{comp.name}/{path.stem}"
            sources[key] = (source, [d for d in docs if isinstance(d, dict)])
    provenance = stack.configs_dir / PROVENANCE_FILE
    if stale or not provenance.is_file():
        return sources
    try:
        recorded = json.loads(provenance.read_text(encoding="utf-8")).get("inputsSha256")
    except json.JSONDecodeError:
        recorded = None
    if recorded != inputs_digest(stack):
        report.add(
            "configs-stale",
            "render inputs (chart values, versions or components) changed since "
            "configs/ was rendered: run `eksinf render` (`eksinf verify` shows the difference)",
            f"configs/{PROVENANCE_FILE} inputsSha256",
        )
    return sources


# ---- entry point -----------------------------------------------------------------------------


def _lint_units(
    report: Report,
    stack: Stack,
    units: dict[str, list[dict]],
    spec: dict | None,
    bindings: list[links.Binding],
) -> None:
    valid = check_links(report, units, spec, bindings)
    if spec is None:
        return  # nothing to resolve with: invariants would compare placeholders
    planes = {c.name: c.plane for c in stack.components}
    resources = all_resources(links.resolve_units(units, spec, valid), planes)
    check_identity(report, resources)
    check_discovery(report, resources)
    check_network(report, resources)
    check_node_role(report, resources)
    check_cluster_name(report, resources)
    check_model_id(report, resources)
    check_scheduling(report, resources)
    check_accelerators(report, resources)
    check_iam_policies(report, resources, stack.root / "iam")
    check_ack_refs(report, resources)
    check_tag_keys(report, resources)
    check_pod_identity_agent(report, resources)
    check_node_class_identity(report, resources)
    check_role_names(report, resources)
    check_ack_stack_tag(report, resources, spec.get("stackName"))
    check_unique_ids(report, resources)


def check_unique_ids(report: Report, resources: list[Resource]) -> None:
    """No resource id (group, kind, namespace, name) twice in one plane (validate.ids)."""
    report.checks.append("unique-ids")
    for d in ids.duplicates((r.plane, r.at(), r.doc) for r in resources):
        report.add(
            "unique-ids", f"{d.id} appears {len(d.places)} times in plane {d.plane}", *d.places
        )


def lint_stack(stack: Stack) -> Report:
    report = Report()
    spec: dict | None = None
    try:
        spec = load_profile(stack).spec
    except EksinfError as exc:
        report.add("profile", exc.message + (f" ({exc.hint})" if exc.hint else ""))
    report.checks.append("profile")
    try:
        bindings = links.load_bindings(stack)
    except EksinfError as exc:
        report.add("bindings", exc.message)
        return report
    report.bindings = len(bindings)
    try:
        units = read_units(stack.configs_dir)
    except EksinfError as exc:
        report.add("configs-yaml", exc.message)
        return report
    sources = check_fresh(report, stack)
    _lint_units(report, stack, units, spec, bindings)  # what ships: the committed configs/
    if not sources:
        return report
    # Stale handwritten units: lint their sources as well, and add what only they break.
    second = Report()
    _lint_units(second, stack, {**units, **{k: d for k, (_, d) in sources.items()}}, spec, bindings)
    seen = {(f.check, f.message, f.places) for f in report.findings}
    renames = {f"configs/{key}.yaml": label for key, (label, _) in sources.items()}
    for finding in second.findings:
        if (finding.check, finding.message, finding.places) in seen:
            continue
        places = tuple(_rename(p, renames) for p in finding.places)
        report.findings.append(Finding(finding.check, finding.message, places))
    return report


def _rename(where: str, renames: dict[str, str]) -> str:
    head, sep, rest = where.partition(" ")
    return renames.get(head, head) + sep + rest
