"""Identity checks: who trusts whom (Pod Identity, IRSA, node roles, PassRole, the agent add-on)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from eksinf.core import inside
from eksinf.model import paths
from eksinf.model.profile import ROLE_NAME, UNIT_FILE

from ..model import iam
from ..model.checks import Finding
from ..model.configs import Resource, of_kind
from ..model.names import PROFILE_COMPONENT, name_rule
from ..model.placeholder import PLACEHOLDER
from .core import Context, check, coded, found
from .network import _squash


def _service_accounts(resources: list[Resource]) -> list[Resource]:
    return [r for r in of_kind(resources, "ServiceAccount") if r.plane == "workload"]


IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"


@dataclass
class _RoleUse:
    """One ACK Role with its trust, and the ServiceAccounts that use it."""

    role: Resource
    trust: str
    irsa: list[Resource] = field(default_factory=list)  # ServiceAccounts annotated with it
    pods: list[Resource] = field(default_factory=list)  # PodIdentityAssociations naming it


def _role_uses(resources: list[Resource], accounts: list[Resource]) -> list[_RoleUse]:
    uses: list[_RoleUse] = []
    for r in of_kind(resources, "Role", "iam.services.k8s.aws"):
        trust, name = r.spec.get("assumeRolePolicyDocument"), r.spec.get("name")
        if not isinstance(trust, str) or PLACEHOLDER in trust or not isinstance(name, str):
            continue
        use = _RoleUse(r, trust)
        for sa in accounts:
            arn = str(sa.annotations.get(IRSA_ANNOTATION, ""))
            if arn and PLACEHOLDER not in arn and arn.rsplit("/", 1)[-1] == name:
                use.irsa.append(sa)
        for pia in of_kind(resources, "PodIdentityAssociation"):
            ref = (pia.spec.get("roleRef") or {}).get("from") or {}
            ref_ns = ref.get("namespace") or pia.namespace
            by_ref = ref.get("name") == r.name and ref_ns == r.namespace
            if by_ref or str(pia.spec.get("roleARN", "")).rsplit("/", 1)[-1] == name:
                use.pods.append(pia)
        uses.append(use)
    return uses


@check("identity-trust")
def check_identity(ctx: Context) -> Iterator[Finding]:
    """Identity both ways, as IAM evaluates the trust (model.iam): every Pod Identity
    association and IRSA subject names a ServiceAccount that exists; a role's trust admits
    exactly the ServiceAccounts that use it (IRSA annotation or association), StringEquals and
    StringLike (`*`, `?`) and ForAnyValue forms included; an association's role trusts the Pod
    Identity agent with sts:AssumeRole and sts:TagSession; Karpenter's association uses the
    profile's karpenterRoleName."""
    resources = ctx.resources
    accounts = _service_accounts(resources)
    have = {(r.namespace, r.name): r for r in accounts}
    yield from _external_created(ctx.profile, have)
    external = _external(ctx.profile)

    def missing(ns: Any, name: Any, here: str, what: str) -> Iterator[Finding]:
        if (ns, name) in external:
            return  # declared: created outside the stack
        # The closest real account: same name in another namespace, else one in the namespace.
        near = [r for r in accounts if r.name == name] or [r for r in accounts if r.namespace == ns]
        there = (
            near[0].at("metadata") if near else "no workload-plane unit renders a ServiceAccount"
        )
        hint = f"; the rendered chart creates {near[0].namespace}/{near[0].name}" if near else ""
        yield found(
            f"{what} names ServiceAccount {ns}/{name}, which no workload-plane unit creates"
            f"{hint}: the pod can never assume the role (one created outside the stack is "
            f"declared in the profile's {EXTERNAL_FIELD})",
            here,
            there,
        )

    for r in of_kind(resources, "PodIdentityAssociation"):
        ns, name = r.spec.get("namespace"), r.spec.get("serviceAccount")
        if (ns, name) not in have:
            yield from missing(
                ns, name, r.at("spec.namespace/spec.serviceAccount"), "Pod Identity association"
            )
    for use in _role_uses(resources, accounts):
        yield from _check_irsa(use, accounts, have, missing, external)
        yield from _check_pod_identity(use)
    yield from _check_karpenter_role(resources, ctx.profile.get("karpenterRoleName"))


EXTERNAL_FIELD = "externalServiceAccounts"
PROFILE_FILE = f"render/{PROFILE_COMPONENT}/{UNIT_FILE}"


def _external(profile: dict[str, Any]) -> set[tuple[str, str]]:
    """The ServiceAccounts the profile declares as created outside the stack (`ns/name`), which
    a trust or an association may name (one the stack does create is reported by
    `_external_created`)."""
    return {
        (ns, name)
        for ns, _, name in (str(i).partition("/") for i in profile.get(EXTERNAL_FIELD) or [])
    }


def _external_created(
    profile: dict[str, Any], have: dict[tuple[Any, Any], Resource]
) -> Iterator[Finding]:
    """A ServiceAccount declared external that the stack creates after all."""
    for index, item in enumerate(profile.get(EXTERNAL_FIELD) or []):
        ns, _, name = str(item).partition("/")
        if (ns, name) in have:
            yield found(
                f"ServiceAccount {item} is declared external ({EXTERNAL_FIELD}) but the stack "
                "creates it: drop it from the list",
                f"{PROFILE_FILE} spec.{EXTERNAL_FIELD}.{index}",
                have[(ns, name)].at("metadata"),
            )


def _sa_place(sa: Resource) -> str:
    return sa.at(f"metadata.annotations.{paths.escape(IRSA_ANNOTATION)}")


def _check_irsa(
    use: _RoleUse,
    accounts: list[Resource],
    have: dict[tuple[Any, Any], Resource],
    missing: Callable[[Any, Any, str, str], Iterator[Finding]],
    external: set[tuple[str, str]],
) -> Iterator[Finding]:
    trust_at = use.role.at("spec.assumeRolePolicyDocument")
    role_name = use.role.spec.get("name")
    patterns = iam.subjects(use.trust)
    for pattern in patterns:
        parts = pattern.split(":")
        if len(parts) != 4:
            continue
        if not any(c in pattern for c in "*?"):
            if (parts[2], parts[3]) not in have:
                yield from missing(parts[2], parts[3], trust_at, "IRSA trust")
        elif not any(
            iam.like(pattern, iam.subject(str(ns), str(name)))
            for ns, name in [(a.namespace, a.name) for a in accounts] + sorted(external)
        ):
            yield found(
                f"IRSA trust pattern {pattern!r} matches no ServiceAccount the stack creates",
                trust_at,
            )
    if not patterns and not use.irsa:
        return  # not an IRSA role
    for sa in accounts:
        verdict = iam.admits(use.trust, iam.irsa_request(str(sa.namespace), sa.name))
        sub = iam.subject(str(sa.namespace), sa.name)
        if sa in use.irsa and verdict is False:
            others = ", ".join(f"{a.namespace}/{a.name}" for a in use.irsa if a is not sa)
            fix = f"StringLike {iam.SA_PREFIX}*:{sa.name}" if others else f"StringEquals {sub}"
            also = f" (it is also used by {others})" if others else ""
            yield found(
                f"ServiceAccount {sa.namespace}/{sa.name} uses role {role_name!r} "
                f"({IRSA_ANNOTATION}) but the role's trust does not admit {sub!r}: "
                f"AssumeRoleWithWebIdentity is denied{also}. Admit every user of the role "
                f"({fix}, or list each subject)",
                _sa_place(sa),
                trust_at,
            )
        elif sa not in use.irsa and verdict is True:
            yield found(
                f"the trust of role {role_name!r} admits ServiceAccount {sa.namespace}/{sa.name}, "
                f"which does not use it ({IRSA_ANNOTATION}): narrow the subject to the accounts "
                "that use the role",
                trust_at,
                sa.at("metadata"),
            )


def _check_pod_identity(use: _RoleUse) -> Iterator[Finding]:
    trust_at = use.role.at("spec.assumeRolePolicyDocument")
    role_name = use.role.spec.get("name")
    granted = iam.trusted_actions(use.trust, iam.POD_IDENTITY_SERVICE)
    for pia in use.pods:
        ns, name = str(pia.spec.get("namespace")), str(pia.spec.get("serviceAccount"))
        lacking = [a for a in iam.POD_IDENTITY_ACTIONS if a not in granted]
        if lacking:
            yield found(
                f"the association for {ns}/{name} uses role {role_name!r}, whose trust does not "
                f"allow {iam.POD_IDENTITY_SERVICE} {', '.join(lacking)}: the agent hands out "
                "no credentials",
                pia.at("spec.roleRef"),
                trust_at,
            )
            continue
        request = iam.pod_identity_request(ns, name, "sts:AssumeRole")
        if iam.admits(use.trust, request) is False:
            yield found(
                f"the trust of role {role_name!r} does not admit the Pod Identity session of "
                f"{ns}/{name} (its conditions on kubernetes-namespace/kubernetes-service-account)",
                pia.at("spec.namespace/spec.serviceAccount"),
                trust_at,
            )


def _check_karpenter_role(resources: list[Resource], wanted: Any) -> Iterator[Finding]:
    """Karpenter's ServiceAccount (the pod spec carrying CLUSTER_NAME) gets the profile's role."""
    if not isinstance(wanted, str) or wanted == PLACEHOLDER:
        return
    roles: dict[tuple[Any, Any], Resource] = {
        (r.namespace, r.name): r for r in of_kind(resources, "Role", "iam.services.k8s.aws")
    }
    karpenter = set()
    for r in resources:
        spec = r.pod_spec
        if spec and any(
            v.get("name") == "CLUSTER_NAME"
            for c in spec.get("containers") or []
            for v in c.get("env") or []
        ):
            karpenter.add((r.namespace, spec.get("serviceAccountName") or "default"))
    for pia in of_kind(resources, "PodIdentityAssociation"):
        if (pia.spec.get("namespace"), pia.spec.get("serviceAccount")) not in karpenter:
            continue
        ref = (pia.spec.get("roleRef") or {}).get("from") or {}
        role = roles.get((ref.get("namespace") or pia.namespace, ref.get("name")))
        arn = str(pia.spec.get("roleARN", ""))
        name = role.spec.get("name") if role else arn.rsplit("/", 1)[-1]
        if name and name not in (wanted, PLACEHOLDER):
            yield found(
                f"Karpenter's association uses role {name!r} but the profile's "
                f"karpenterRoleName is {wanted!r}",
                pia.at("spec.roleRef"),
                "render/platform-profile/profile.yaml spec.karpenterRoleName",
            )


def _statements(policy: Any) -> list[Any]:  # items as written: not checked to be maps
    statements = policy.get("Statement", []) if isinstance(policy, dict) else []
    return [s for s in (statements if isinstance(statements, list) else [statements]) if s]


@check("node-role")
def check_node_role(ctx: Context) -> Iterator[Finding]:
    """The nodegroup's role, the EC2NodeClasses' role and the IAM role are one role."""
    resources = ctx.resources
    roles = {r.name: r for r in of_kind(resources, "Role", "iam.services.k8s.aws")}
    for ng in of_kind(resources, "Nodegroup", "eks.services.k8s.aws"):
        ref = ((ng.doc.get("spec") or {}).get("nodeRoleRef") or {}).get("from") or {}
        role = roles.get(ref.get("name", ""))
        if role is None:
            yield found(
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
                yield found(
                    f"EC2NodeClass role {value!r} differs from the nodegroup's node role "
                    f"{role_name!r}: Karpenter nodes would not join through its access entry",
                    nc.at("spec.role"),
                    role.at("spec.name"),
                )


@check("passrole")
def check_iam_policies(ctx: Context) -> Iterator[Finding]:
    """No IAM policy allows iam:PassRole without an iam:PassedToService condition."""
    resources, iam_dir = ctx.resources, ctx.iam_dir
    documents: list[tuple[str, Any]] = []
    for path in inside.files_under(iam_dir, iam_dir.parent, recursive=False):
        if path.suffix != ".json":
            continue
        try:
            raw = inside.read_bytes(path, iam_dir).decode("utf-8")
            documents.append((f"iam/{path.name}", json.loads(raw)))
        except json.JSONDecodeError as exc:
            yield coded("iam-policy", f"not valid JSON: {exc}", f"iam/{path.name}")
    for r in of_kind(resources, "Role", "iam.services.k8s.aws"):
        for name, text in ((r.doc.get("spec") or {}).get("inlinePolicies") or {}).items():
            where = r.at(f"spec.inlinePolicies.{paths.escape(str(name))}")
            try:
                documents.append((where, json.loads(text)))
            except (TypeError, json.JSONDecodeError) as exc:
                yield coded("iam-policy", f"inline policy is not valid JSON: {exc}", where)
    for r in of_kind(resources, "Policy", "iam.services.k8s.aws"):
        text = (r.doc.get("spec") or {}).get("policyDocument")
        if isinstance(text, str):
            try:
                documents.append((r.at("spec.policyDocument"), json.loads(text)))
            except json.JSONDecodeError as exc:
                yield coded("iam-policy", f"not valid JSON: {exc}", r.at("spec.policyDocument"))
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
                yield found(
                    f"statement {sid} allows iam:PassRole with no iam:PassedToService condition: "
                    "the holder can hand any role to any service",
                    f"{where} Statement.{index}",
                )


POD_IDENTITY_ADDON = "eks-pod-identity-agent"  # the EKS add-on name, exact


# Instance profile names: iam:CreateInstanceProfile InstanceProfileName.
_PROFILE_NAME = name_rule(r"[\w+=,.@-]{1,128}")


def _cluster_of(r: Resource) -> tuple[Any, Any]:
    ref = ((r.doc.get("spec") or {}).get("clusterRef") or {}).get("from") or {}
    return ref.get("namespace") or r.namespace, ref.get("name")


@check("pod-identity-agent")
def check_pod_identity_agent(ctx: Context) -> Iterator[Finding]:
    """A cluster with Pod Identity associations runs the add-on named eks-pod-identity-agent."""
    resources = ctx.resources
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
        yield found(
            f"Pod Identity association on Cluster {cluster[0]}/{cluster[1]}, but no Addon with "
            f"spec.name exactly {POD_IDENTITY_ADDON!r} runs on that cluster ({have}): the pod "
            "gets no credentials",
            assoc.at("spec.clusterRef.from.name"),
            there.at("spec.name") if there else "no mgmt-plane unit defines an eks Addon",
        )


@check("node-class-identity")
def check_node_class_identity(ctx: Context) -> Iterator[Finding]:
    """Each EC2NodeClass sets exactly one of role and instanceProfile, each a name, not an ARN."""
    resources = ctx.resources
    roles = {
        (r.doc.get("spec") or {}).get("name"): r
        for r in of_kind(resources, "Role", "iam.services.k8s.aws")
    }
    for nc in of_kind(resources, "EC2NodeClass"):
        spec = nc.doc.get("spec") or {}
        has_role, has_profile = "role" in spec, "instanceProfile" in spec
        if has_role == has_profile:
            yield found(
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
            yield found(
                f"spec.{field_name} is {value!r}, but Karpenter wants an {what}, not an ARN or a "
                f"path{hint}",
                nc.at(f"spec.{field_name}"),
                *(
                    [roles[named].at("spec.name")]
                    if field_name == "role" and named in roles
                    else []
                ),
            )
