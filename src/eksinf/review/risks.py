"""Risk classes: each a small registered function with a stable id, a title and, per finding, a
short reason and the field path it is about. `--fail-on` names these ids; never rename one.

A rule sees one `ResourceChange` and returns findings; it reads only that change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..model.awsobjects import aws_name
from ..model.configs import ACK_GROUP_SUFFIX, SYNC_WAVE
from ..model.placeholder import is_placeholder
from .changes import CRD_KIND, ResourceChange
from .snapshot import BINDING_KIND, CHART_KIND, POLICY_FILE_KIND, Resource
from .structural import FieldChange, join, key_segment


@dataclass(frozen=True)
class Risk:
    cls: str
    reason: str
    path: str = ""
    # what a reader needs beside the reason, as (label, value) pairs: an IAM statement's
    # Resource and Condition, and whether the widening can take effect
    context: tuple[tuple[str, str], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"class": self.cls, "reason": self.reason, "path": self.path}
        if self.context:
            out["context"] = dict(self.context)
        return out


Rule = Callable[[ResourceChange], Iterator[Risk]]


@dataclass(frozen=True)
class RiskClass:
    id: str
    title: str
    marker: str  # one per class, the same in every format, so a finding's class shows at a glance
    rule: Rule


# Registration order is severity order, most severe first: every report lists findings in it.
CLASSES: dict[str, RiskClass] = {}

Found = tuple[str, str] | tuple[str, str, tuple[tuple[str, str], ...]]


def risk_class(
    id: str, title: str, marker: str
) -> Callable[[Callable[[ResourceChange], Iterator[Found]]], Rule]:
    """Register a rule that yields (path, reason) or (path, reason, context) under class `id`."""

    def register(fn: Callable[[ResourceChange], Iterator[Found]]) -> Rule:
        def rule(change: ResourceChange) -> Iterator[Risk]:
            for found in fn(change):
                yield Risk(id, found[1], found[0], found[2] if len(found) == 3 else ())

        assert marker not in {c.marker for c in CLASSES.values()}, f"{id}: marker taken"
        CLASSES[id] = RiskClass(id, title, marker, rule)
        return rule

    return register


def severity(cls: str) -> int:
    """0 for the most severe class; an unknown id sorts last."""
    order = list(CLASSES)
    return order.index(cls) if cls in order else len(order)


def assess(change: ResourceChange) -> list[Risk]:
    """Every finding of every class for one change, deduplicated, in class order."""
    out: list[Risk] = []
    for cls in CLASSES.values():
        for found in cls.rule(change):
            if found not in out:
                out.append(found)
    return out


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
def _aws_resource_deleted(change: ResourceChange) -> Iterator[tuple[str, str]]:
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
    yield "", f"ACK deletes {what} when {r.kind} {r.namespace}/{r.name} is pruned"


# ---- IAM -------------------------------------------------------------------------------------

IAM_GROUP = "iam.services.k8s.aws"
_PASSROLE = re.compile(r"^(\*|iam:\*|iam:pass\*|iam:passrole)$", re.IGNORECASE)


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [] if value is None else [value]


def _parse_policy(value: Any) -> dict | None:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def policies(resource: Resource | None) -> dict[str, tuple[str, dict]]:
    """Policy documents a resource holds: path -> (trust | permissions, document)."""
    if resource is None:
        return {}
    if resource.kind == POLICY_FILE_KIND:
        doc = _parse_policy(resource.doc.get("policy"))
        return {"policy": ("permissions", doc)} if doc else {}
    if resource.group != IAM_GROUP:
        return {}
    spec = resource.doc.get("spec") or {}
    found: dict[str, tuple[str, Any]] = {
        "spec.assumeRolePolicyDocument": ("trust", spec.get("assumeRolePolicyDocument")),
        "spec.policyDocument": ("permissions", spec.get("policyDocument")),
    }
    for name, text in (spec.get("inlinePolicies") or {}).items():
        found[join("spec.inlinePolicies", name)] = ("permissions", text)
    out = {}
    for path, (role, raw) in found.items():
        doc = _parse_policy(raw)
        if doc is not None:
            out[path] = (role, doc)
    return out


def _allow(doc: dict) -> list[dict]:
    return [
        s
        for s in _as_list(doc.get("Statement"))
        if isinstance(s, dict) and s.get("Effect") == "Allow"
    ]


def _grants(docs: dict[str, tuple[str, dict]]) -> dict[str, set]:
    out: dict[str, set] = {
        "actions": set(),
        "any-resource": set(),
        "passrole": set(),
        "principals": set(),
    }
    for path, (role, doc) in docs.items():
        for s in _allow(doc):
            actions = [str(a) for a in _as_list(s.get("Action"))]
            if "NotAction" in s:
                actions.append(f"NotAction {json.dumps(s['NotAction'], sort_keys=True)}")
            if role == "trust":
                principal = s.get("Principal")
                if isinstance(principal, dict):
                    for kind, values in principal.items():
                        out["principals"] |= {f"{kind}: {v}" for v in _as_list(values)}
                elif principal is not None:
                    out["principals"].add(str(principal))
                continue
            out["actions"] |= set(actions)
            if "*" in [str(r) for r in _as_list(s.get("Resource"))] or "NotResource" in s:
                out["any-resource"] |= set(actions)
            if not s.get("Condition"):
                out["passrole"] |= {(path, a) for a in actions if _PASSROLE.match(a)}
    return out


def _statement_path(path: str, index: int, statement: dict) -> str:
    sid = statement.get("Sid")
    return f"{path}(json).Statement[{f'Sid={sid}' if sid else index}]"


def _in_context(
    path: str, index: int, statement: dict, actions: list[str]
) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """A new-actions finding with the statement's Resource and Condition, and whether the actions
    can take effect there: an action none of whose resource ARNs the statement's Resource can
    match does nothing (flagged as a no-op, never hidden)."""
    more = f" (+{len(actions) - 8} more)" if len(actions) > 8 else ""
    reason = f"new action(s) allowed: {', '.join(actions[:8])}{more}"
    if "NotResource" in statement:
        where = f"NotResource {json.dumps(statement['NotResource'], sort_keys=True)}"
        effect = "not checked: the statement uses NotResource"
    else:
        resources = [str(r) for r in _as_list(statement.get("Resource"))]
        where = json.dumps(resources if len(resources) != 1 else resources[0])
        mismatch, why_not = resource_mismatch(actions, resources)
        if why_not:
            effect = f"not checked: {why_not}"
        elif mismatch and set(mismatch) >= set(actions):
            effect = (
                "no: a no-op, "
                + "; ".join(f"{a} acts only on {mismatch[a]}" for a in actions)
                + f", which the Resource cannot match ({ANALYSER})"
            )
            reason += " (a no-op: the statement's Resource cannot match them)"
        elif mismatch:
            effect = (
                "partly: "
                + "; ".join(
                    f"{a} is a no-op (acts only on {mismatch[a]})" for a in sorted(mismatch)
                )
                + f"; the others can ({ANALYSER})"
            )
        else:
            effect = f"yes: the Resource can match every new action ({ANALYSER})"
    condition = statement.get("Condition")
    context = (
        ("Resource", where),
        ("Condition", json.dumps(condition, sort_keys=True) if condition else "none"),
        ("takes effect", effect),
    )
    return _statement_path(path, index, statement), reason, context


ANALYSER = "parliament RESOURCE_MISMATCH"


def _pkg_resources_for_parliament() -> None:
    """parliament 1.6.4 finds its two data files with `pkg_resources.resource_filename`, and
    pkg_resources left setuptools in 81 (Python 3.12 venvs have no setuptools at all). Where it
    cannot be imported, that one function is provided from importlib.resources, which answers the
    same path for a package installed as files; nothing else of pkg_resources is offered."""
    import importlib.util
    import sys

    if sys.modules.get("pkg_resources") is not None:
        return
    try:
        if importlib.util.find_spec("pkg_resources") is not None:
            return
    except (ImportError, ValueError):  # a finder that refuses it: as absent
        pass
    import types
    from importlib import resources

    module = types.ModuleType("pkg_resources")

    def resource_filename(package: str, name: str) -> str:
        return str(resources.files(package).joinpath(name))

    module.resource_filename = resource_filename  # type: ignore[attr-defined]
    sys.modules["pkg_resources"] = module


def resource_mismatch(actions: list[str], resources: list[str]) -> tuple[dict[str, str], str]:
    """action -> the ARN form it acts on, for each action whose resources none of `resources`
    can match; and why nothing was checked ("" when it was). parliament (the IAM linter by
    Duo Labs) holds AWS's action-to-resource-type table; eksinf keeps none of its own."""
    _pkg_resources_for_parliament()
    try:
        import parliament
    except ImportError:
        return {}, "parliament is not installed"
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": actions, "Resource": resources}],
    }
    try:
        analysed = parliament.analyze_policy_string(json.dumps(policy))
    except Exception as exc:  # a linter failure must not stop the review; it is reported
        return {}, f"parliament failed ({type(exc).__name__})"
    out: dict[str, str] = {}
    for finding in analysed.findings:
        if finding.issue != "RESOURCE_MISMATCH":
            continue
        for item in _as_list(finding.detail):
            if isinstance(item, dict) and "action" in item:
                form = item.get("required_format")
                out[str(item["action"])] = (
                    " or ".join(map(str, form)) if isinstance(form, list) else str(form)
                )
    return out, ""


@risk_class("iam-widened", "IAM policy widened", "🔓")
def _iam_widened(change: ResourceChange) -> Iterator[Found]:
    before, after = policies(change.before), policies(change.after)
    for path, (role, doc) in after.items():
        old = _grants({path: before[path]} if path in before else {})
        new = _grants({path: (role, doc)})
        added = sorted(new["actions"] - old["actions"])
        wild = [a for a in added if "*" in a or a.startswith("NotAction")]
        if wild:
            yield path, f"wildcard action(s) allowed: {', '.join(wild)}"
        for index, statement in enumerate(_allow(doc) if role == "permissions" else []):
            mine = sorted({str(a) for a in _as_list(statement.get("Action"))} & set(added))
            if mine:
                yield _in_context(path, index, statement, mine)
        anywhere = sorted((new["any-resource"] - old["any-resource"]) - set(added))
        if anywhere:
            yield path, f'now allowed on every resource ("*"): {", ".join(anywhere[:8])}'
        for _, action in sorted(new["passrole"] - old["passrole"]):
            yield path, f"{action} allowed without a Condition: any role can be passed"
        principals = sorted(new["principals"] - old["principals"])
        if principals:
            yield path, f"new trust principal(s): {', '.join(principals)}"
    if change.after is not None and change.after.group == IAM_GROUP:
        arns_before = set(
            _as_list(
                ((change.before.doc if change.before else {}).get("spec") or {}).get("policies")
            )
        )
        arns_after = set(_as_list((change.after.doc.get("spec") or {}).get("policies")))
        attached = sorted(str(a) for a in arns_after - arns_before)
        if attached:
            yield "spec.policies", f"managed polic(y/ies) attached: {', '.join(attached)}"


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
def _secret(change: ResourceChange) -> Iterator[tuple[str, str]]:
    r = change.resource
    if r.kind == "Secret" and not r.group and change.op in ("added", "changed"):
        keys = sorted({*(r.doc.get("data") or {}), *(r.doc.get("stringData") or {})})
        if change.op == "added":
            yield "data", f"Secret added with key(s) {', '.join(keys) or '(none)'}"
        else:
            for f in _fields(change, "added", "changed"):
                if f.path.startswith(("data", "stringData")):
                    yield f.path, "Secret value added or changed"
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
            yield path, "a literal credentials-like value: keep it in a Secret, not in the unit"


# ---- network exposure ------------------------------------------------------------------------

_EXPOSED_TYPES = ("LoadBalancer", "NodePort")
_OPEN_CIDRS = {"0.0.0.0/0", "::/0"}
_SCHEME_KEYS = (
    "service.beta.kubernetes.io/aws-load-balancer-scheme",
    "alb.ingress.kubernetes.io/scheme",
)


def _open_rules(doc: dict) -> set[str]:
    """A SecurityGroup's ingress rules open to every address, each as its JSON."""
    rules = _as_list((doc.get("spec") or {}).get("ingressRules"))
    out = set()
    for rule in rules:
        if not isinstance(rule, dict):
            continue
        cidrs = {
            str(x.get("cidrIP")) for x in _as_list(rule.get("ipRanges")) if isinstance(x, dict)
        }
        cidrs |= {
            str(x.get("cidrIPv6")) for x in _as_list(rule.get("ipv6Ranges")) if isinstance(x, dict)
        }
        if cidrs & _OPEN_CIDRS:
            out.add(json.dumps(rule, sort_keys=True))
    return out


@risk_class("network-exposed", "Network exposure widened", "🌐")
def _network(change: ResourceChange) -> Iterator[tuple[str, str]]:
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
            yield (
                "spec.type",
                f"Service type {was or '(new)'} -> {now}: reachable from outside the cluster",
            )
    if r.kind == "Ingress" and r.group == "networking.k8s.io" and change.op == "added":
        yield "spec", "Ingress added: routes outside traffic into the cluster"
    annotations = (new.get("metadata") or {}).get("annotations") or {}
    old_annotations = (old.get("metadata") or {}).get("annotations") or {}
    for key in _SCHEME_KEYS:
        if (
            annotations.get(key) == "internet-facing"
            and old_annotations.get(key) != "internet-facing"
        ):
            yield join("metadata.annotations", key), "load balancer scheme internet-facing"
    if (r.group, r.kind) == ("ec2.services.k8s.aws", "SecurityGroup"):
        for rule in sorted(_open_rules(new) - _open_rules(old)):
            yield "spec.ingressRules", f"ingress open to every address: {_short(rule, 120)}"


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
def _infra_deleted(change: ResourceChange) -> Iterator[tuple[str, str]]:
    r = change.resource
    if change.op == "removed":
        annotations = (r.doc.get("metadata") or {}).get("annotations") or {}
        if r.group.endswith(ACK_GROUP_SUFFIX):
            if annotations.get(DELETION_POLICY) == "retain":
                return
            yield "", f"ACK deletes the AWS {r.kind} {r.name} when this resource goes"
        elif (r.group, r.kind) in KARPENTER_KINDS:
            yield "", f"Karpenter drains and terminates the nodes of {r.kind} {r.name}"
        elif r.kind == "Namespace" and not r.group:
            yield "", f"deleting namespace {r.name} deletes everything in it"
        return
    immutable = IMMUTABLE.get((r.group, r.kind), ())
    for f in _fields(change):
        for name in immutable:
            prefix = f"spec{key_segment(name)}"
            if f.path == prefix or f.path.startswith((f"{prefix}.", f"{prefix}[")):
                yield (
                    f.path,
                    (
                        f"{r.kind} {prefix} cannot change in place: the {r.kind} must be "
                        "replaced (delete and create)"
                    ),
                )
                break


# ---- CRDs ------------------------------------------------------------------------------------


@risk_class("crd-version-removed", "CRD version removed or storage version changed", "🧩")
def _crd(change: ResourceChange) -> Iterator[tuple[str, str]]:
    r = change.resource
    if r.kind != CRD_KIND:
        return
    if change.op == "removed":
        yield "", f"CRD {r.name} removed: the API server deletes every object of it"
        return
    summary = change.crd
    if summary is None:
        return
    if summary.versions_removed:
        yield (
            "spec.versions",
            (
                f"version(s) {', '.join(summary.versions_removed)} removed: stored objects at "
                "that version can no longer be read"
            ),
        )
    if summary.storage_changed:
        yield (
            "spec.versions",
            (
                f"storage version {', '.join(summary.storage_before) or '-'} -> "
                f"{', '.join(summary.storage_after) or '-'}: existing objects need a migration"
            ),
        )
    for line in summary.served:
        if line.endswith("False"):
            yield "spec.versions", f"no longer served: {line}"


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
def _image(change: ResourceChange) -> Iterator[tuple[str, str]]:
    if change.op != "changed":
        return
    for f in change.fields:
        for path, value in leaves(f.path, f.new) if f.op == "added" else [(f.path, f.new)]:
            last = path.rsplit(".", 1)[-1]
            if last == "image" and f.op in ("changed", "added"):
                old = f.old if f.op == "changed" else None
                yield path, f"image {_short(old) if old else '(new)'} -> {_short(value)}"
        if f.op != "changed":
            continue
        named = re.findall(r"\[name=([^\]]+)\]", f.path)
        is_env_value = f.path.endswith(".value") and named and _MODEL.search(named[-1])
        if is_env_value or (
            _MODEL.search(f.path.rsplit(".", 1)[-1]) and not isinstance(f.new, dict | list)
        ):
            yield f.path, f"model {_short(f.old)} -> {_short(f.new)}"
        elif f.path.endswith(("args", "command")) and _model_arg(f.old) != _model_arg(f.new):
            yield f.path, f"--model {_model_arg(f.old)} -> {_model_arg(f.new)}"


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
def _chart(change: ResourceChange) -> Iterator[tuple[str, str]]:
    r = change.resource
    if r.kind != CHART_KIND:
        return
    old = ((change.before.doc.get("spec") or {}) if change.before else {}).get("version")
    new = ((change.after.doc.get("spec") or {}) if change.after else {}).get("version")
    chart = ((r.doc.get("spec") or {}).get("chart")) or r.name
    if change.op == "changed" and old != new:
        yield "spec.version", f"chart {chart} {old} -> {new} ({version_delta(str(old), str(new))})"
    elif change.op == "changed":
        yield "spec.sha256", f"chart {chart} {new}: a different archive under the same version"
    else:
        yield "spec.version", f"chart {chart} {old or new} {change.op}"


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
def _capacity(change: ResourceChange) -> Iterator[tuple[str, str]]:
    r = change.resource
    is_pool = (r.group, r.kind) == ("karpenter.sh", "NodePool")
    if is_pool and change.op != "changed":
        limits = ((r.doc.get("spec") or {}).get("limits")) or {}
        verb = "added" if change.op == "added" else "removed"
        yield "spec.limits", f"NodePool {verb} (limits {json.dumps(limits, sort_keys=True)})"
        return
    for f in _fields(change):
        what = f"{_short(f.old) if f.op != 'added' else '(none)'} -> {_short(f.new) if f.op != 'removed' else '(none)'}"
        if f.path == "spec.replicas" or f.path.endswith(".replicas"):
            yield f.path, f"replicas {what}"
        elif '["nvidia.com/gpu"]' in f.path and ".resources." in f.path:
            yield f.path, f"GPU request/limit {what}"
        elif is_pool and f.path.startswith("spec.limits"):
            yield f.path, f"NodePool limit {what}"
        elif is_pool and INSTANCE_KEYS.search(f.path):
            yield f.path, f"NodePool instance selection {what}"
        elif r.kind == "Nodegroup" and f.path.startswith(
            ("spec.scalingConfig", "spec.instanceTypes")
        ):
            yield f.path, f"node group capacity {what}"


# ---- sync waves ------------------------------------------------------------------------------


@risk_class("sync-wave-changed", "Sync-wave order changed", "🔀")
def _wave(change: ResourceChange) -> Iterator[tuple[str, str]]:
    path = join("metadata.annotations", SYNC_WAVE)
    for f in _fields(change):
        if f.path == path:
            yield (
                f.path,
                (
                    f"sync wave {f.old if f.op != 'added' else '(none)'} -> "
                    f"{f.new if f.op != 'removed' else '(none)'}: Argo CD applies it in another order"
                ),
            )


# ---- links -----------------------------------------------------------------------------------


@risk_class("link-changed", "Placeholder or profile binding added or removed", "🔗")
def _link(change: ResourceChange) -> Iterator[tuple[str, str]]:
    r = change.resource
    if r.kind == BINDING_KIND:
        if change.op != "changed":
            yield "", f"binding {change.op}: {r.name}"
        return
    if change.op != "changed":
        return
    for f in change.fields:
        old = dict(leaves(f.path, f.old)) if f.op != "added" else {}
        new = dict(leaves(f.path, f.new)) if f.op != "removed" else {}
        for path in sorted(set(old) | set(new)):
            was, now = is_placeholder(old.get(path)), is_placeholder(new.get(path))
            if now and not was:
                yield path, "placeholder added: the value now comes from a profile link"
            elif was and not now:
                yield (
                    path,
                    (
                        f"placeholder removed: {_short(new.get(path)) if path in new else 'the field'} "
                        "no longer comes from the profile"
                    ),
                )
