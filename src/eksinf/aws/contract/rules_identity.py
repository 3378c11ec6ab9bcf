"""The contract rules for workload identity on an EKS-kind cluster: the Pod Identity agent and
associations, the roles behind them and their trust, and IRSA (listed in rules.RULES)."""

from __future__ import annotations

from typing import Any

from ...errors import EksinfError, shell_command
from ...model import iam
from ...model.addons import same_values
from ...model.checks import Finding
from ...model.iam import POD_IDENTITY_ACTIONS, POD_IDENTITY_SERVICE
from ...model.targets import KINDS, TargetKind
from .context import Context, check, rule
from .facts import (
    AGENT_ADDON,
    AddonNeed,
    Facts,
)


def pod_identity_trust_check(facts: Facts) -> Finding:
    actions = " and ".join(POD_IDENTITY_ACTIONS)
    element = f"a role trusting {POD_IDENTITY_SERVICE} ({actions}) behind each association"
    call = (
        f"eks:DescribePodIdentityAssociation clusterName={facts.cluster_name} (roleArn) + "
        "iam:GetRole (AssumeRolePolicyDocument)"
    )
    if facts.associations is None:
        return check(element, "unknown", facts.associations_error, call)
    roles = facts.association_roles
    if not roles:
        return check(
            element, "skipped", "no association to check (see pod-identity-associations)", call
        )
    unread = [r for r in roles if r.granted is None]
    if unread:
        detail = "; ".join(f"{r.service_account}: {r.error}" for r in unread)
        return check(element, "unknown", detail, call)
    broken = []
    for r in roles:
        missing = [a for a in POD_IDENTITY_ACTIONS if a not in (r.granted or ())]
        if r.error:
            broken.append((r, f"{r.service_account} -> {r.role_arn}: {r.error}"))
        elif missing:
            broken.append(
                (
                    r,
                    f"{r.service_account} -> {r.role_arn}: {POD_IDENTITY_SERVICE} is not "
                    f"trusted with {', '.join(missing)}",
                )
            )
    if not broken:
        found = ", ".join(f"{r.service_account} -> {r.role_arn}" for r in roles)
        return check(element, "pass", found, call)
    names = sorted({r.role_arn.rsplit("/", 1)[-1] for r, _ in broken})
    fix = (
        f"allow Service {POD_IDENTITY_SERVICE} the actions {', '.join(POD_IDENTITY_ACTIONS)} "
        f"in the trust policy of {', '.join(names)} (aws iam update-assume-role-policy "
        "--role-name <role> --policy-document file://trust.json), or redeploy the karpenter-aws "
        "component, whose Role carries that trust"
    )
    return check(element, "fail", "; ".join(d for _, d in broken), call, fix)


@rule(
    "pod-identity-agent",
    severity="required",
    element="the `eks-pod-identity-agent` add-on, ACTIVE",
    call="`eks:DescribeAddon`",
    fix="`aws eks create-addon --addon-name eks-pod-identity-agent`",
    why="without the agent, associations hand out no credentials and Karpenter launches no node",
)
def pod_identity_agent(ctx: Context) -> list[Finding]:
    """The pod identity agent add-on is active."""
    facts = ctx.facts
    c, r = facts.cluster_name, facts.region
    checks: list[Finding] = []
    call = f"eks:DescribeAddon clusterName={c} addonName={AGENT_ADDON}"
    fix = shell_command(
        "aws",
        "eks",
        "create-addon",
        "--cluster-name",
        c,
        "--addon-name",
        AGENT_ADDON,
        "--region",
        r,
    )
    unread = facts.addon_error or (
        f"not read: EKS cluster {c} was not read ({facts.cluster_error})"
        if facts.cluster is None
        else ""
    )  # an add-on that was never asked about is unknown, not absent
    if unread:
        checks.append(check(f"the {AGENT_ADDON} add-on", "unknown", unread, call, fix))
    else:
        ok = facts.addon_status == "ACTIVE"
        detail = (
            f"status {facts.addon_status}"
            if facts.addon_status
            else "absent: Pod Identity associations exist but pods get no credentials"
        )
        checks.append(
            check(
                f"the {AGENT_ADDON} add-on",
                "pass" if ok else "fail",
                detail,
                call,
                "" if ok else fix,
            )
        )
    return checks


def associations_fix(kind: TargetKind) -> str:
    """How the missing associations get made, for a cluster of `kind`."""
    byo = next(k for k in KINDS.values() if k.cluster_by_name)
    if kind.cluster_by_name:
        return (
            f"add the management cluster as a {kind.name} target and deploy its plane: "
            f"`eksinf target add mgmt --plane mgmt --kind {kind.name} --kubeconfig FILE`, then "
            "`eksinf deploy --plane mgmt --target mgmt/target` (karpenter-aws's association "
            "names this cluster by clusterName; aws-network and eks-cluster are not deployed)"
        )
    return (
        "deploy the mgmt plane, whose karpenter-aws component creates them (`eksinf deploy "
        "--plane mgmt --target MGMT/target`); for a cluster this stack did not create, enroll "
        f"with `--kind {byo.name}` for the command that works without an ACK Cluster"
    )


@rule(
    "addon-drift",
    severity="advisory",
    element="each add-on an `Addon` unit names runs the unit's `addonVersion` and `configurationValues` on the cluster",
    call="`eks:DescribeAddon` (`addonVersion`, `configurationValues`) vs the rendered units, with the profile's values linked in",
    fix="make the cluster match the unit (`aws eks update-addon` with the unit's version and values; for a cluster the stack created, deploying the mgmt plane does it, `resolveConflicts: OVERWRITE`), or pin what runs in the profile's `addonVersions`; the exact difference is given",
    why="advisory: the cluster works on either version, but the stack was checked against its units' (lint validates their values against that version's schema); drift means what runs is not what was reviewed",
)
def addon_drift(ctx: Context) -> list[Finding]:
    """The installed add-ons are the units' versions and values."""
    facts, needs = ctx.facts, ctx.needs
    if not needs.addons:
        return []
    element = "the add-ons at the units' versions and values"
    call = f"eks:DescribeAddon clusterName={facts.cluster_name}"
    if facts.installed_addons is None:
        return [check(element, "unknown", facts.installed_addons_error, call)]
    diffs, fixes, same = [], [], []
    for need in needs.addons:
        installed = facts.installed_addons.get(need.name)
        if installed is None:
            continue  # not installed: pod-identity-agent (for the agent) says so and how
        apart = addon_difference(need, installed)
        if not apart:
            same.append(f"{need.name} {installed.get('addonVersion')}")
            continue
        diffs.append(f"{need.name}: " + "; ".join(apart))
        # values are JSON or YAML text and may hold a quote
        values = ("--configuration-values", need.values) if need.values else ()
        fixes.append(
            "`"
            + shell_command(
                "aws",
                "eks",
                "update-addon",
                "--cluster-name",
                facts.cluster_name,
                "--addon-name",
                need.name,
                "--addon-version",
                need.version or "VERSION",
                *values,
                "--resolve-conflicts",
                "OVERWRITE",
            )
            + "`"
        )
    if not diffs:
        detail = ", ".join(same) or "none of the units' add-ons is installed"
        return [check(element, "pass", detail, call)]
    fix = "; ".join(fixes) + ", or pin what runs in the profile's addonVersions"
    return [check(element, "warn", "; ".join(diffs), call, fix)]


def addon_difference(need: AddonNeed, installed: dict[str, Any]) -> list[str]:
    """How the installed add-on differs from its unit, field by field ([] when it does not)."""
    apart = []
    running = installed.get("addonVersion")
    if need.version is None:
        apart.append(f"addonVersion {running} on the cluster, unpinned in the unit")
    elif running != need.version:
        apart.append(f"addonVersion {running} on the cluster, {need.version} in the unit")
    there = installed.get("configurationValues") or None
    try:
        equal = same_values(there, need.values)
    except EksinfError:  # unparsable on either side: compare the text
        equal = (there or "") == (need.values or "")
    if not equal:
        apart.append(
            f"configurationValues {there or '(none)'} on the cluster, "
            f"{need.values or '(none)'} in the unit"
        )
    return apart


@rule(
    "pod-identity-associations",
    severity="required",
    element="an association for each `namespace/serviceaccount` the rendered stack's `PodIdentityAssociation`s name (today `kube-system/karpenter`)",
    call="`eks:ListPodIdentityAssociations`",
    fix="deploy the mgmt plane (its karpenter-aws component creates them); for a cluster this stack did not create, to a mgmt target added with `--kind eks-byo`, whose association names the cluster by `clusterName`: `eksinf target add mgmt --plane mgmt --kind eks-byo --kubeconfig FILE`, then `eksinf deploy --plane mgmt --target mgmt/target`",
    why="without its association Karpenter's controller has no AWS identity",
)
def pod_identity_associations(ctx: Context) -> list[Finding]:
    """A Pod Identity association for each ServiceAccount the stack needs."""
    facts, needs = ctx.facts, ctx.needs
    c = facts.cluster_name
    checks: list[Finding] = []

    if needs.pod_identities:
        call = f"eks:ListPodIdentityAssociations clusterName={c}"
        wanted = ", ".join(f"{ns}/{sa}" for ns, sa in needs.pod_identities)
        if facts.associations is None:
            checks.append(
                check(
                    f"Pod Identity associations for {wanted}",
                    "unknown",
                    facts.associations_error,
                    call,
                )
            )
        else:
            missing = [
                f"{ns}/{sa}"
                for ns, sa in needs.pod_identities
                if (ns, sa) not in facts.associations
            ]
            checks.append(
                check(
                    f"Pod Identity associations for {', '.join(missing) or wanted}",
                    "fail" if missing else "pass",
                    f"missing {', '.join(missing)}" if missing else f"found {wanted}",
                    call,
                    associations_fix(ctx.kind) if missing else "",
                )
            )
    return checks


@rule(
    "pod-identity-trust",
    severity="required",
    element="the IAM role behind each of those associations exists and its trust policy lets `pods.eks.amazonaws.com` do both `sts:AssumeRole` and `sts:TagSession` (without TagSession the agent fails to hand out credentials)",
    call="`eks:DescribePodIdentityAssociation` (`roleArn`; the list call names no role), `iam:GetRole` (`AssumeRolePolicyDocument`)",
    fix="add both actions for that service to the role's trust (`aws iam update-assume-role-policy`), or redeploy the karpenter-aws component",
    why="a trust without AssumeRole and TagSession for the agent fails at credential time, long after the association looked fine",
)
def pod_identity_trust(ctx: Context) -> list[Finding]:
    """The role behind each association trusts the Pod Identity agent."""
    facts, needs = ctx.facts, ctx.needs
    checks: list[Finding] = []
    if needs.pod_identities:
        checks.append(pod_identity_trust_check(facts))
    return checks


@rule(
    "pod-identity-role",
    severity="required",
    element="each association's role is the one the stack names for it (the ACK `Role` its `roleRef` points at: for Karpenter, the profile's `karpenterRoleName`)",
    call="`eks:DescribePodIdentityAssociation` (`roleArn`) vs the rendered units, with the profile's values linked in",
    fix="point the association at the stack's role (`aws eks update-pod-identity-association --role-arn`), or set the profile's role name to the one in use (`eksinf render`); both names are given",
    why="an association to another role gives Karpenter that role's permissions, not the ones the stack grants and reviews: it works, or fails, for reasons no unit shows",
)
def pod_identity_role(ctx: Context) -> list[Finding]:
    """The role behind each association is the stack's role for it."""
    facts, needs = ctx.facts, ctx.needs
    if not needs.association_role_names:
        return []
    element = "the stack's role behind each Pod Identity association"
    call = f"eks:DescribePodIdentityAssociation clusterName={facts.cluster_name} (roleArn)"
    if facts.associations is None:
        return [check(element, "unknown", facts.associations_error, call)]
    found = {r.service_account: r for r in facts.association_roles}
    wrong, right, unread = [], [], []
    for sa, role in needs.association_role_names:
        r = found.get(sa)
        if r is None:
            continue  # no association: pod-identity-associations reports it
        if not r.role_arn:
            unread.append(f"{sa}: {r.error}")
        elif r.role_arn.rsplit("/", 1)[-1] != role:
            wrong.append((sa, r.role_arn, role))
        else:
            right.append(f"{sa} -> {r.role_arn}")
    if unread:
        return [check(element, "unknown", "; ".join(unread), call)]
    if not wrong:
        status, detail = ("pass", ", ".join(right)) if right else ("skipped", "no association")
        return [check(element, status, detail, call)]
    detail = "; ".join(
        f"{sa} uses role {arn.rsplit('/', 1)[-1]} ({arn}), the stack names {role}"
        for sa, arn, role in wrong
    )
    fix = "; ".join(
        "`"
        + shell_command(
            "aws",
            "eks",
            "update-pod-identity-association",
            "--cluster-name",
            facts.cluster_name,
            "--association-id",
            "ID",
            "--role-arn",
            f"{arn.rsplit('/', 1)[0]}/{role}",
        )
        + "` (ID: `"
        + shell_command(
            "aws",
            "eks",
            "list-pod-identity-associations",
            "--cluster-name",
            facts.cluster_name,
            "--namespace",
            sa.split("/")[0],
            "--service-account",
            sa.split("/")[1],
        )
        + f"`), or set the profile's role name to {arn.rsplit('/', 1)[-1]} and `eksinf render`"
        for sa, arn, role in wrong
    )
    return [check(element, "fail", detail, call, fix)]


@rule(
    "irsa-issuer",
    severity="required",
    element="the cluster's OIDC issuer registered in IAM, only if a rendered ServiceAccount carries `eks.amazonaws.com/role-arn`",
    call="`eks:DescribeCluster` `identity.oidc.issuer` vs `iam:ListOpenIDConnectProviders`",
    fix="`aws iam create-open-id-connect-provider`",
    why="STS rejects every web identity token from an issuer IAM does not know (skipped when no ServiceAccount uses IRSA)",
)
def irsa_issuer(ctx: Context) -> list[Finding]:
    """IRSA issuer, only where IRSA is used."""
    facts, needs = ctx.facts, ctx.needs
    checks: list[Finding] = []
    call = "eks:DescribeCluster identity.oidc.issuer vs iam:ListOpenIDConnectProviders"
    if not needs.irsa_accounts:
        checks.append(
            check(
                "an IAM OIDC provider for the cluster issuer",
                "skipped",
                "the stack uses Pod Identity, not IRSA",
                call,
            )
        )
    elif facts.oidc_providers is None:
        checks.append(
            check(
                "an IAM OIDC provider for the cluster issuer",
                "unknown",
                facts.oidc_error,
                call,
            )
        )
    else:
        issuer = (facts.cluster or {}).get("identity", {}).get("oidc", {}).get("issuer", "")
        host = issuer.removeprefix("https://")
        ok = bool(host) and any(p.endswith(f"oidc-provider/{host}") for p in facts.oidc_providers)
        checks.append(
            check(
                f"an IAM OIDC provider for {issuer or 'the cluster issuer'}",
                "pass" if ok else "fail",
                "registered" if ok else "issuer not registered in IAM",
                call,
                ""
                if ok
                else shell_command(
                    "aws",
                    "iam",
                    "create-open-id-connect-provider",
                    "--url",
                    issuer,
                    "--client-id-list",
                    "sts.amazonaws.com",
                ),
            )
        )
    return checks


@rule(
    "irsa-trust",
    severity="required",
    element="the role each IRSA ServiceAccount names trusts the cluster's current OIDC issuer for that ServiceAccount (only where a rendered ServiceAccount names a role ARN)",
    call="`eks:DescribeCluster` `identity.oidc.issuer` vs `iam:GetRole` (`AssumeRolePolicyDocument`), conditions evaluated as IAM does (`model/iam.py`)",
    fix="point the role's trust at `oidc-provider/<current issuer>` with `<issuer>:sub` = `system:serviceaccount:<ns>:<name>` (`aws iam update-assume-role-policy`), or redeploy the component that owns the role",
    why="a recreated cluster has a new issuer: a trust naming the old one denies every token, and the pod fails only when it first calls AWS",
)
def irsa_trust(ctx: Context) -> list[Finding]:
    """Each IRSA role's trust admits its ServiceAccount from the cluster's current issuer."""
    facts, needs = ctx.facts, ctx.needs
    if not needs.irsa_roles:
        return []
    issuer = (facts.cluster or {}).get("identity", {}).get("oidc", {}).get("issuer", "")
    host = issuer.removeprefix("https://")
    element = f"IRSA roles trusting the cluster's issuer {host or '(none)'}"
    call = "eks:DescribeCluster identity.oidc.issuer + iam:GetRole (AssumeRolePolicyDocument)"
    unread = [t for t in facts.irsa_trusts if t.document is None and t.error != "no such role"]
    if unread:
        detail = "; ".join(f"{t.service_account} -> {t.role_name}: {t.error}" for t in unread)
        return [check(element, "unknown", detail, call)]
    problems: list[str] = []
    for t in facts.irsa_trusts:
        ns, name = t.service_account.split("/", 1)
        if t.document is None:
            problems.append(f"{t.service_account} -> {t.role_name}: no such role")
            continue
        refusal = irsa_refusal(t.document, ns, name, host, host or "the cluster issuer")
        if refusal:
            problems.append(f"{t.service_account} -> {t.role_name}: {refusal}")
    if not problems:
        found = ", ".join(f"{t.service_account} -> {t.role_name}" for t in facts.irsa_trusts)
        return [check(element, "pass", found, call)]
    fix = (
        f"update each role's trust to Federated arn:aws:iam::<account>:oidc-provider/{host} with "
        f"{host}:sub = system:serviceaccount:<ns>:<name> (aws iam update-assume-role-policy), or "
        "redeploy the component that owns the role"
    )
    return [check(element, "fail", "; ".join(problems), call, fix)]


def irsa_refusal(
    trust: Any, namespace: str, account: str, issuer: str, shown_issuer: str = ""
) -> str | None:
    """Why an IRSA role's `trust` does not admit `namespace/account` from `issuer` (named as
    `shown_issuer` when given), with the OIDC providers it does name; None when it admits it."""
    verdict = iam.admits(trust, iam.irsa_request(namespace, account, issuer))
    if verdict is True:
        return None
    named = ", ".join(iam.providers(trust)) or "no OIDC provider"
    what = (
        "does not admit"
        if verdict is False
        else "may not admit (a condition eksinf cannot evaluate)"
    )
    return (
        f"the trust {what} {iam.subject(namespace, account)} from {shown_issuer or issuer} "
        f"(it names {named})"
    )
