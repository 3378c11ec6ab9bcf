"""Identity checks: who trusts whom (Pod Identity, IRSA, node roles, PassRole, the agent add-on)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from .. import inside, paths
from ..model.configs import Resource, of_kind
from ..model.placeholder import PLACEHOLDER
from ..profile import ROLE_NAME
from .core import Context, Report, check
from .network import _squash


def _service_accounts(resources: list[Resource]) -> list[Resource]:
    return [r for r in of_kind(resources, "ServiceAccount") if r.plane == "workload"]


@check("identity-trust")
def check_identity(report: Report, ctx: Context) -> None:
    """Pod Identity associations and IRSA `sub` conditions name a ServiceAccount that exists."""
    resources = ctx.resources
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


@check("node-role")
def check_node_role(report: Report, ctx: Context) -> None:
    """The nodegroup's role, the EC2NodeClasses' role and the IAM role are one role."""
    resources = ctx.resources
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


@check("passrole")
def check_iam_policies(report: Report, ctx: Context) -> None:
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


POD_IDENTITY_ADDON = "eks-pod-identity-agent"  # the EKS add-on name, exact


# Instance profile names: iam:CreateInstanceProfile InstanceProfileName.
_PROFILE_NAME = re.compile(r"^[\w+=,.@-]{1,128}$")


def _cluster_of(r: Resource) -> tuple[Any, Any]:
    ref = ((r.doc.get("spec") or {}).get("clusterRef") or {}).get("from") or {}
    return ref.get("namespace") or r.namespace, ref.get("name")


@check("pod-identity-agent")
def check_pod_identity_agent(report: Report, ctx: Context) -> None:
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
        report.add(
            "pod-identity-agent",
            f"Pod Identity association on Cluster {cluster[0]}/{cluster[1]}, but no Addon with "
            f"spec.name exactly {POD_IDENTITY_ADDON!r} runs on that cluster ({have}): the pod "
            "gets no credentials",
            assoc.at("spec.clusterRef.from.name"),
            there.at("spec.name") if there else "no mgmt-plane unit defines an eks Addon",
        )


@check("node-class-identity")
def check_node_class_identity(report: Report, ctx: Context) -> None:
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
