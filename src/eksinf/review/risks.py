"""Risk classes: each a small registered function with a stable id, a title and, per finding, a
short reason and the field path it is about. `--fail-on` names these ids; never rename one.

A rule sees one `ResourceChange` and yields kernel findings (model/checks.py), each about a field
path; it reads only that change. CLASSES, at the end, is the one table: its order is the
severity order, most severe first, and every report lists findings in it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from eksinf.core.types import Doc

from ..model import checks
from ..model.awsobjects import aws_name
from ..model.checks import Finding, Rule, RuleFn
from ..model.configs import ACK_GROUP_SUFFIX, SYNC_WAVE
from ..model.placeholder import is_placeholder
from .changes import CRD_KIND, ResourceChange
from .policies import (
    IAM_GROUP,
    allow_statements,
    as_list,
    grants,
    in_context,
    policies,
)
from .snapshot import BINDING_KIND, CHART_KIND, Resource
from .structural import FieldChange, join, key_segment

FAMILY = "review"
ANCHOR = "docs/review.md#risk-classes"


def risk_dict(risk: Finding) -> dict[str, Any]:
    """One finding as the JSON prints it: its class, reason, path (and context, if any)."""
    out: dict[str, Any] = {"class": risk.name, "reason": risk.detail, "path": risk.element}
    if risk.context:
        out["context"] = dict(risk.context)
    return out


def found(path: str, reason: str, context: tuple[tuple[str, str], ...] = ()) -> Finding:
    """A finding of the class that yields it, about the field at `path` ("" for the resource);
    `context` is what a reader needs beside the reason, as (label, value) pairs: an IAM
    statement's Resource and Condition, and whether the widening can take effect."""
    return Finding(reason, element=path, context=context)


def risk_class(
    id: str, title: str, marker: str
) -> Callable[[RuleFn[ResourceChange]], Rule[ResourceChange]]:
    """Make a function of one change a risk class: `id` is stable (`--fail-on` names it; never
    rename one), `marker` marks its findings in every format. List it in CLASSES."""
    return checks.rule(
        id, family=FAMILY, severity=checks.ADVISORY, anchor=ANCHOR, title=title, marker=marker
    )


# ---- helpers ---------------------------------------------------------------------------------


def leaves(path: str, value: Any, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Every scalar under `value` with its path (named lists by name, as the differ spells them)."""
    if depth > 64:
        return
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from leaves(join(path, key), sub, depth + 1)
    elif isinstance(value, list):
        from .structural import list_key

        key = list_key(value)
        for index, item in enumerate(value):
            seg = f"[{key}={item[key]}]" if key else f"[{index}]"
            yield from leaves(f"{path}{seg}", item, depth + 1)
    else:
        yield path, value


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fields(change: ResourceChange, *ops: str) -> Iterator[FieldChange]:
    return (f for f in change.fields if not ops or f.op in ops)


def _is(resource: Resource, group: str, *kinds: str) -> bool:
    return resource.group == group and resource.kind in kinds


# ---- AWS resources deleted -------------------------------------------------------------------

DELETION_POLICY = "services.k8s.aws/deletion-policy"


@risk_class("aws-resource-deleted", "AWS resource deleted (an ACK object removed or renamed)", "⛔")
def _aws_resource_deleted(change: ResourceChange) -> Iterator[Finding]:
    """First of all classes: the one change no rollback undoes. A removed ACK object (a rename
    removes the old one) is pruned by Argo CD, and ACK deletes the AWS resource behind it."""
    r = change.resource
    if change.op != "removed" or not r.group.endswith(ACK_GROUP_SUFFIX):
        return
    annotations = (r.doc.get("metadata") or {}).get("annotations") or {}
    if annotations.get(DELETION_POLICY) == "retain":
        return
    named = aws_name(r.doc)
    what = f"AWS {r.kind} {named}" if named else f"the AWS {r.kind} behind it"
    yield found("", f"ACK deletes {what} when {r.kind} {r.namespace}/{r.name} is pruned")


# ---- IAM -------------------------------------------------------------------------------------


@risk_class("iam-widened", "IAM policy widened", "🔓")
def _iam_widened(change: ResourceChange) -> Iterator[Finding]:
    before, after = policies(change.before), policies(change.after)
    for path, (role, doc) in after.items():
        old = grants({path: before[path]} if path in before else {})
        new = grants({path: (role, doc)})
        added = sorted(new["actions"] - old["actions"])
        wild = [a for a in added if "*" in a or a.startswith("NotAction")]
        if wild:
            yield found(path, f"wildcard action(s) allowed: {', '.join(wild)}")
        for index, statement in enumerate(allow_statements(doc) if role == "permissions" else []):
            mine = sorted({str(a) for a in as_list(statement.get("Action"))} & set(added))
            if mine:
                yield in_context(path, index, statement, mine)
        anywhere = sorted((new["any-resource"] - old["any-resource"]) - set(added))
        if anywhere:
            yield found(path, f'now allowed on every resource ("*"): {", ".join(anywhere[:8])}')
        for _, action in sorted(new["passrole"] - old["passrole"]):
            yield found(path, f"{action} allowed without a Condition: any role can be passed")
        principals = sorted(new["principals"] - old["principals"])
        if principals:
            yield found(path, f"new trust principal(s): {', '.join(principals)}")
    if change.after is not None and change.after.group == IAM_GROUP:
        arns_before = set(
            as_list(
                ((change.before.doc if change.before else {}).get("spec") or {}).get("policies")
            )
        )
        arns_after = set(as_list((change.after.doc.get("spec") or {}).get("policies")))
        attached = sorted(str(a) for a in arns_after - arns_before)
        if attached:
            yield found("spec.policies", f"managed polic(y/ies) attached: {', '.join(attached)}")


# ---- secrets ---------------------------------------------------------------------------------

_CREDENTIAL_WORDS = {"password", "passwd", "secret", "token", "credential", "credentials"}
_CREDENTIAL_PAIRS = {("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key")}
_CREDENTIAL_VALUE = re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b|-----BEGIN [A-Z ]*PRIVATE KEY-----")
_REFERENCE = re.compile(r"secretKeyRef|secretRef|secretName|valueFrom", re.IGNORECASE)


def credential_name(name: str) -> bool:
    """`AWS_SECRET_ACCESS_KEY`, `apiKey`, `db-password`: yes. `httpTokens`, `tokenizer`: no."""
    words = [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", name)]
    return bool(_CREDENTIAL_WORDS & set(words)) or any(
        pair in _CREDENTIAL_PAIRS for pair in zip(words, words[1:], strict=False)
    )


def _credential_leaf(path: str, value: Any) -> bool:
    if not isinstance(value, str) or not value or is_placeholder(value) or _REFERENCE.search(path):
        return False
    if _CREDENTIAL_VALUE.search(value):
        return True
    tail = re.split(r"\.(?=[^.\]]*$)", path)[-1]  # the last key
    if tail == "value":  # env[name=X].value: the name is the key
        named = re.findall(r"\[name=([^\]]+)\]", path)
        tail = named[-1] if named else tail
    return credential_name(tail.strip('[]"'))


@risk_class("secret-added", "Secret or credentials-like value added", "🔑")
def _secret(change: ResourceChange) -> Iterator[Finding]:
    r = change.resource
    if r.kind == "Secret" and not r.group and change.op in ("added", "changed"):
        keys = sorted({*(r.doc.get("data") or {}), *(r.doc.get("stringData") or {})})
        if change.op == "added":
            yield found("data", f"Secret added with key(s) {', '.join(keys) or '(none)'}")
        else:
            for f in _fields(change, "added", "changed"):
                if f.path.startswith(("data", "stringData")):
                    yield found(f.path, "Secret value added or changed")
        return
    if change.op == "removed" or r.kind == CRD_KIND:  # a schema holds no values
        return
    pairs = (
        leaves("", change.after.doc if change.after else None)
        if change.op == "added"
        else ((p, v) for f in _fields(change, "added", "changed") for p, v in leaves(f.path, f.new))
    )
    for path, value in pairs:
        if _credential_leaf(path, value):
            yield found(
                path, "a literal credentials-like value: keep it in a Secret, not in the unit"
            )


# ---- network exposure ------------------------------------------------------------------------

_EXPOSED_TYPES = ("LoadBalancer", "NodePort")
_OPEN_CIDRS = {"0.0.0.0/0", "::/0"}
_SCHEME_KEYS = (
    "service.beta.kubernetes.io/aws-load-balancer-scheme",
    "alb.ingress.kubernetes.io/scheme",
)


def _open_rules(doc: Doc) -> set[str]:
    """A SecurityGroup's ingress rules open to every address, each as its JSON."""
    rules = as_list((doc.get("spec") or {}).get("ingressRules"))
    out = set()
    for rule in rules:
        if not isinstance(rule, dict):
            continue
        cidrs = {str(x.get("cidrIP")) for x in as_list(rule.get("ipRanges")) if isinstance(x, dict)}
        cidrs |= {
            str(x.get("cidrIPv6")) for x in as_list(rule.get("ipv6Ranges")) if isinstance(x, dict)
        }
        if cidrs & _OPEN_CIDRS:
            out.add(json.dumps(rule, sort_keys=True))
    return out


@risk_class("network-exposed", "Network exposure widened", "🌐")
def _network(change: ResourceChange) -> Iterator[Finding]:
    """What becomes reachable from outside: a Service turned LoadBalancer or NodePort, an
    internet-facing load-balancer scheme, an Ingress added, a security group opened to every
    address."""
    if change.after is None:
        return
    r = change.after
    new = r.doc
    old = change.before.doc if change.before is not None else {}
    if r.kind == "Service" and not r.group:
        was = (old.get("spec") or {}).get("type", "ClusterIP") if old else None
        now = (new.get("spec") or {}).get("type", "ClusterIP")
        if now in _EXPOSED_TYPES and now != was:
            yield found(
                "spec.type",
                f"Service type {was or '(new)'} -> {now}: reachable from outside the cluster",
            )
    if r.kind == "Ingress" and r.group == "networking.k8s.io" and change.op == "added":
        yield found("spec", "Ingress added: routes outside traffic into the cluster")
    annotations = (new.get("metadata") or {}).get("annotations") or {}
    old_annotations = (old.get("metadata") or {}).get("annotations") or {}
    for key in _SCHEME_KEYS:
        if (
            annotations.get(key) == "internet-facing"
            and old_annotations.get(key) != "internet-facing"
        ):
            yield found(join("metadata.annotations", key), "load balancer scheme internet-facing")
    if (r.group, r.kind) == ("ec2.services.k8s.aws", "SecurityGroup"):
        for rule in sorted(_open_rules(new) - _open_rules(old)):
            yield found("spec.ingressRules", f"ingress open to every address: {_short(rule, 120)}")


# ---- infrastructure deleted or replaced ------------------------------------------------------

# Fields that cannot change in place. EKS: ACK eks-controller generator.yaml `is_immutable`
# (Cluster name; Nodegroup clusterName, name, nodeRole, diskSize, remoteAccess, subnets, amiType,
# instanceTypes; their *Ref forms resolve to the same fields). EC2 and IAM: the API has no call
# that changes them (botocore ec2 ModifySubnetAttribute, ModifySecurityGroupRules; iam UpdateRole
# takes no name or path).
IMMUTABLE = {
    ("eks.services.k8s.aws", "Cluster"): ("name",),
    ("eks.services.k8s.aws", "Nodegroup"): (
        "clusterName", "clusterRef", "name", "nodeRole", "nodeRoleRef", "diskSize",
        "remoteAccess", "subnets", "subnetRefs", "amiType", "instanceTypes",
    ),
    ("ec2.services.k8s.aws", "VPC"): (),
    ("ec2.services.k8s.aws", "Subnet"): (
        "cidrBlock", "availabilityZone", "availabilityZoneID", "vpcID", "vpcRef",
    ),
    ("ec2.services.k8s.aws", "SecurityGroup"): ("name", "description", "vpcID", "vpcRef"),
    ("iam.services.k8s.aws", "Role"): ("name", "path"),
    ("iam.services.k8s.aws", "Policy"): ("name", "path"),
}  # fmt: skip
KARPENTER_KINDS = {("karpenter.sh", "NodePool"), ("karpenter.k8s.aws", "EC2NodeClass")}


@risk_class("infra-deleted", "Infrastructure deleted or replaced", "💥")
def _infra_deleted(change: ResourceChange) -> Iterator[Finding]:
    r = change.resource
    if change.op == "removed":
        annotations = (r.doc.get("metadata") or {}).get("annotations") or {}
        if r.group.endswith(ACK_GROUP_SUFFIX):
            if annotations.get(DELETION_POLICY) == "retain":
                return
            yield found("", f"ACK deletes the AWS {r.kind} {r.name} when this resource goes")
        elif (r.group, r.kind) in KARPENTER_KINDS:
            yield found("", f"Karpenter drains and terminates the nodes of {r.kind} {r.name}")
        elif r.kind == "Namespace" and not r.group:
            yield found("", f"deleting namespace {r.name} deletes everything in it")
        return
    immutable = IMMUTABLE.get((r.group, r.kind), ())
    for f in _fields(change):
        for name in immutable:
            prefix = f"spec{key_segment(name)}"
            if f.path == prefix or f.path.startswith((f"{prefix}.", f"{prefix}[")):
                yield found(
                    f.path,
                    (
                        f"{r.kind} {prefix} cannot change in place: the {r.kind} must be "
                        "replaced (delete and create)"
                    ),
                )
                break


# ---- CRDs ------------------------------------------------------------------------------------


@risk_class("crd-version-removed", "CRD version removed or storage version changed", "🧩")
def _crd(change: ResourceChange) -> Iterator[Finding]:
    r = change.resource
    if r.kind != CRD_KIND:
        return
    if change.op == "removed":
        yield found("", f"CRD {r.name} removed: the API server deletes every object of it")
        return
    summary = change.crd
    if summary is None:
        return
    if summary.versions_removed:
        yield found(
            "spec.versions",
            (
                f"version(s) {', '.join(summary.versions_removed)} removed: stored objects at "
                "that version can no longer be read"
            ),
        )
    if summary.storage_changed:
        yield found(
            "spec.versions",
            (
                f"storage version {', '.join(summary.storage_before) or '-'} -> "
                f"{', '.join(summary.storage_after) or '-'}: existing objects need a migration"
            ),
        )
    for line in summary.served:
        if line.endswith("False"):
            yield found("spec.versions", f"no longer served: {line}")


# ---- images and models -----------------------------------------------------------------------

_MODEL = re.compile(r"model", re.IGNORECASE)


def _model_arg(args: Any) -> str | None:
    items = [str(a) for a in args] if isinstance(args, list) else []
    for index, arg in enumerate(items):
        if arg == "--model" and index + 1 < len(items):
            return items[index + 1]
        if arg.startswith("--model="):
            return arg.split("=", 1)[1]
    return None


@risk_class("image-changed", "Container image or model changed", "📦")
def _image(change: ResourceChange) -> Iterator[Finding]:
    if change.op != "changed":
        return
    for f in change.fields:
        for path, value in leaves(f.path, f.new) if f.op == "added" else [(f.path, f.new)]:
            last = path.rsplit(".", 1)[-1]
            if last == "image" and f.op in ("changed", "added"):
                old = f.old if f.op == "changed" else None
                yield found(path, f"image {_short(old) if old else '(new)'} -> {_short(value)}")
        if f.op != "changed":
            continue
        named = re.findall(r"\[name=([^\]]+)\]", f.path)
        is_env_value = f.path.endswith(".value") and named and _MODEL.search(named[-1])
        if is_env_value or (
            _MODEL.search(f.path.rsplit(".", 1)[-1]) and not isinstance(f.new, dict | list)
        ):
            yield found(f.path, f"model {_short(f.old)} -> {_short(f.new)}")
        elif f.path.endswith(("args", "command")) and _model_arg(f.old) != _model_arg(f.new):
            yield found(f.path, f"--model {_model_arg(f.old)} -> {_model_arg(f.new)}")


# ---- charts ----------------------------------------------------------------------------------


def version_delta(old: str, new: str) -> str:
    """major | minor | patch | pre-release | downgrade | other, by semantic-version parts."""

    def parts(v: str) -> tuple[tuple[int, ...], str] | None:
        m = re.match(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+.*)?$", v)
        return ((int(m[1]), int(m[2]), int(m[3])), m[4] or "") if m else None

    a, b = parts(old), parts(new)
    if a is None or b is None:
        return "other"
    if b[0] < a[0]:
        return "downgrade"
    for index, name in enumerate(("major", "minor", "patch")):
        if a[0][index] != b[0][index]:
            return name
    return "pre-release"


@risk_class("chart-bumped", "Chart version bump", "⏫")
def _chart(change: ResourceChange) -> Iterator[Finding]:
    r = change.resource
    if r.kind != CHART_KIND:
        return
    old = ((change.before.doc.get("spec") or {}) if change.before else {}).get("version")
    new = ((change.after.doc.get("spec") or {}) if change.after else {}).get("version")
    chart = ((r.doc.get("spec") or {}).get("chart")) or r.name
    if change.op == "changed" and old != new:
        yield found(
            "spec.version", f"chart {chart} {old} -> {new} ({version_delta(str(old), str(new))})"
        )
    elif change.op == "changed":
        yield found(
            "spec.sha256", f"chart {chart} {new}: a different archive under the same version"
        )
    else:
        yield found("spec.version", f"chart {chart} {old or new} {change.op}")


# ---- capacity --------------------------------------------------------------------------------

INSTANCE_KEYS = re.compile(
    r"\[key=(karpenter\.k8s\.aws/instance-[a-z-]+|node\.kubernetes\.io/instance-type|"
    r"karpenter\.sh/capacity-type)\]"
)


@risk_class(
    "capacity-changed",
    "Replicas, GPU requests, NodePool limits or instance families changed",
    "📈",
)
def _capacity(change: ResourceChange) -> Iterator[Finding]:
    r = change.resource
    is_pool = (r.group, r.kind) == ("karpenter.sh", "NodePool")
    if is_pool and change.op != "changed":
        limits = ((r.doc.get("spec") or {}).get("limits")) or {}
        verb = "added" if change.op == "added" else "removed"
        yield found("spec.limits", f"NodePool {verb} (limits {json.dumps(limits, sort_keys=True)})")
        return
    for f in _fields(change):
        what = f"{_short(f.old) if f.op != 'added' else '(none)'} -> {_short(f.new) if f.op != 'removed' else '(none)'}"
        if f.path == "spec.replicas" or f.path.endswith(".replicas"):
            yield found(f.path, f"replicas {what}")
        elif '["nvidia.com/gpu"]' in f.path and ".resources." in f.path:
            yield found(f.path, f"GPU request/limit {what}")
        elif is_pool and f.path.startswith("spec.limits"):
            yield found(f.path, f"NodePool limit {what}")
        elif is_pool and INSTANCE_KEYS.search(f.path):
            yield found(f.path, f"NodePool instance selection {what}")
        elif r.kind == "Nodegroup" and f.path.startswith(
            ("spec.scalingConfig", "spec.instanceTypes")
        ):
            yield found(f.path, f"node group capacity {what}")


# ---- sync waves ------------------------------------------------------------------------------


@risk_class("sync-wave-changed", "Sync-wave order changed", "🔀")
def _wave(change: ResourceChange) -> Iterator[Finding]:
    path = join("metadata.annotations", SYNC_WAVE)
    for f in _fields(change):
        if f.path == path:
            yield found(
                f.path,
                (
                    f"sync wave {f.old if f.op != 'added' else '(none)'} -> "
                    f"{f.new if f.op != 'removed' else '(none)'}: Argo CD applies it in another order"
                ),
            )


# ---- links -----------------------------------------------------------------------------------


@risk_class("link-changed", "Placeholder or profile binding added or removed", "🔗")
def _link(change: ResourceChange) -> Iterator[Finding]:
    r = change.resource
    if r.kind == BINDING_KIND:
        if change.op != "changed":
            yield found("", f"binding {change.op}: {r.name}")
        return
    if change.op != "changed":
        return
    for f in change.fields:
        old = dict(leaves(f.path, f.old)) if f.op != "added" else {}
        new = dict(leaves(f.path, f.new)) if f.op != "removed" else {}
        for path in sorted(set(old) | set(new)):
            was, now = is_placeholder(old.get(path)), is_placeholder(new.get(path))
            if now and not was:
                yield found(path, "placeholder added: the value now comes from a profile link")
            elif was and not now:
                yield found(
                    path,
                    (
                        f"placeholder removed: {_short(new.get(path)) if path in new else 'the field'} "
                        "no longer comes from the profile"
                    ),
                )


# The one table. Its order is severity order, most severe first: every report lists findings in
# it.
TABLE: tuple[Rule[ResourceChange], ...] = (
    _aws_resource_deleted,
    _iam_widened,
    _secret,
    _network,
    _infra_deleted,
    _crd,
    _image,
    _chart,
    _capacity,
    _wave,
    _link,
)
checks.check_table(TABLE)
assert len({c.marker for c in TABLE}) == len(TABLE), "a marker is taken twice"
CLASSES: dict[str, Rule[ResourceChange]] = {c.name: c for c in TABLE}


def severity(cls: str) -> int:
    """0 for the most severe class; an unknown id sorts last."""
    order = list(CLASSES)
    return order.index(cls) if cls in order else len(order)


def assess(change: ResourceChange) -> list[Finding]:
    """Every finding of every class for one change, deduplicated, in class order."""
    out: list[Finding] = []
    for risk in checks.run(TABLE, change):
        if risk not in out:
            out.append(risk)
    return out


COLUMNS: tuple[tuple[str, Any], ...] = (
    ("marker", lambda c: c.marker),
    ("id", lambda c: f"`{c.name}`"),
    ("title", lambda c: c.title),
    ("severity", lambda c: str(severity(c.name))),
)


def markdown() -> str:
    """The table docs/review.md carries between its `checks` markers (a test compares them)."""
    return checks.markdown(TABLE, COLUMNS)
