"""The cluster contract's rules: pure judgements of gathered facts, one registered function each.

A rule takes the facts (`facts.gather`) and returns its Check(s): none when it does not apply
(the stack needs no Pod Identity association, say). RULES is the one table (name, severity,
docs anchor); `eksinf enroll cluster --list-checks` prints it. Each rule is tested directly with
facts, no AWS (tests/test_contract_rules.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ...errors import EksinfError, shell_command
from ...model import iam
from ...model.addons import same_values
from ...model.iam import POD_IDENTITY_ACTIONS, POD_IDENTITY_SERVICE
from ...model.names import DISCOVERY_KEY
from ...model.targets import DEFAULT_KIND, HYPERPOD_EKS, KINDS, TargetKind
from ..scope import StackScope
from .facts import (
    ADMIN_POLICY,
    AGENT_ADDON,
    ARGOCD_FLOOR,
    ROOT_OVERHEAD_GIB,
    SUPPORTED_VERSIONS,
    AddonNeed,
    Facts,
    StackNeeds,
    has_admin,
    version_of,
)
from .hyperpod import HyperPodFacts

ANCHOR = "docs/contract.md#elements"
# Which target kinds a rule judges (model/targets.py names the kinds). A Karpenter-built EKS
# cluster gets the Karpenter elements; a HyperPod cluster gets its own (hyperpod_rules.py).
EKS_KINDS = tuple(k for k in KINDS if k != HYPERPOD_EKS)
EVERY_KIND = tuple(KINDS)


@dataclass(frozen=True)
class Check:
    name: str
    element: str  # what "cluster is missing X" names
    status: str  # pass | fail | warn | unknown | skipped
    detail: str
    call: str
    fix: str = ""
    severity: str = "required"

    @property
    def blocks(self) -> bool:
        return self.severity == "required" and self.status in ("fail", "unknown")

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "element": self.element,
            "status": self.status,
            "severity": self.severity,
            "detail": self.detail,
            "call": self.call,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class Context:
    """What every rule judges."""

    facts: Facts
    scope: StackScope
    needs: StackNeeds
    kube_used: bool  # a kubeconfig was given or generated
    argocd_namespace: str
    install_argocd: bool = False  # enroll installs the pinned Argo CD when it is absent
    kind: TargetKind = KINDS[DEFAULT_KIND]  # what `--kind` says the cluster is
    hyperpod: HyperPodFacts | None = None  # gathered for a hyperpod-eks target only

    @property
    def entry_missing(self) -> bool:
        """The caller has no access entry (False when that could not be read)."""
        principal = self.facts.caller.principal_arn if self.facts.caller else "?"
        entries = self.facts.access_entries
        return entries is not None and principal not in entries

    @property
    def policy_missing(self) -> bool:
        """The caller's entry exists but holds no cluster-admin policy (False when unread)."""
        policies = self.facts.access_policies
        return policies is not None and not has_admin(policies)

    @property
    def access_explains_denial(self) -> bool:
        """A 401/403 from the API is explained by a missing entry or policy."""
        return self.entry_missing or self.policy_missing


RuleFn = Callable[[Context], list[Check]]


@dataclass(frozen=True)
class Rule:
    """One row of the contract: docs/contract.md's table is generated from these (`markdown`)."""

    name: str
    severity: str  # required: a fail or unknown blocks enroll; advisory: reported only
    element: str  # what the cluster must have
    call: str  # the calls that prove it
    fix: str  # what fixes it
    why: str  # why it blocks (or only warns)
    anchor: str
    summary: str
    run: RuleFn
    kinds: tuple[str, ...] = EKS_KINDS  # the target kinds it judges


RULES: list[Rule] = []
SEVERITIES = ("required", "advisory")


def rule(
    name: str,
    *,
    severity: str,
    element: str,
    call: str,
    fix: str,
    why: str,
    anchor: str = ANCHOR,
    kinds: tuple[str, ...] = EKS_KINDS,
) -> Callable[[RuleFn], RuleFn]:
    """Register a rule in the table, in evaluation order."""
    assert severity in SEVERITIES, severity

    def register(fn: RuleFn) -> RuleFn:
        summary = " ".join((fn.__doc__ or "").split("\n\n")[0].split())
        RULES.append(Rule(name, severity, element, call, fix, why, anchor, summary, fn, kinds))
        return fn

    return register


def rules_for(kind: str) -> list[Rule]:
    """The rules that judge a target of `kind`, in table order."""
    return [r for r in RULES if kind in r.kinds]


def table(kind: str = DEFAULT_KIND) -> list[dict[str, str]]:
    return [
        {
            "name": r.name,
            "severity": r.severity,
            "anchor": r.anchor,
            "summary": r.summary,
            "element": r.element,
            "call": r.call,
            "fix": r.fix,
            "why": r.why,
        }
        for r in rules_for(kind)
    ]


def markdown(kind: str = DEFAULT_KIND) -> str:
    """The table docs/contract.md (eks) or docs/hyperpod.md (hyperpod-eks) carries between
    its `checks` markers (tests compare them)."""
    lines = [
        "| check | element | call that proves it | fix | severity | why |",
        "|---|---|---|---|---|---|",
    ]
    for r in rules_for(kind):
        cells = (f"`{r.name}`", r.element, r.call, r.fix, r.severity, r.why)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def evaluate(
    facts: Facts,
    scope: StackScope,
    needs: StackNeeds,
    kube_used: bool,
    argocd_namespace: str,
    install_argocd: bool = False,
    kind: TargetKind = KINDS[DEFAULT_KIND],
    hyperpod: HyperPodFacts | None = None,
) -> list[Check]:
    """Judge the gathered facts with every rule of the target's kind, in table order: pure, so
    every rule is tested without AWS. With no cluster at all, only cluster-active speaks: every
    other element hangs off the cluster."""
    ctx = Context(facts, scope, needs, kube_used, argocd_namespace, install_argocd, kind, hyperpod)
    checks: list[Check] = []
    for entry in rules_for(kind.name):
        # The table's severity is the one documented, so it is the one that blocks (a check
        # that did not apply says so as advisory).
        checks += [
            c if c.status == "skipped" else replace(c, severity=entry.severity)
            for c in entry.run(ctx)
        ]
        if entry.name == "cluster-active" and facts.cluster is None and not facts.cluster_error:
            break
    return checks


def pod_identity_trust_check(facts: Facts) -> Check:
    actions = " and ".join(POD_IDENTITY_ACTIONS)
    element = f"a role trusting {POD_IDENTITY_SERVICE} ({actions}) behind each association"
    call = (
        f"eks:DescribePodIdentityAssociation clusterName={facts.cluster_name} (roleArn) + "
        "iam:GetRole (AssumeRolePolicyDocument)"
    )
    if facts.associations is None:
        return Check("pod-identity-trust", element, "unknown", facts.associations_error, call)
    roles = facts.association_roles
    if not roles:
        return Check(
            "pod-identity-trust",
            element,
            "skipped",
            "no association to check (see pod-identity-associations)",
            call,
            severity="advisory",
        )
    unread = [r for r in roles if r.granted is None]
    if unread:
        detail = "; ".join(f"{r.service_account}: {r.error}" for r in unread)
        return Check("pod-identity-trust", element, "unknown", detail, call)
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
        return Check("pod-identity-trust", element, "pass", found, call)
    names = sorted({r.role_arn.rsplit("/", 1)[-1] for r, _ in broken})
    fix = (
        f"allow Service {POD_IDENTITY_SERVICE} the actions {', '.join(POD_IDENTITY_ACTIONS)} "
        f"in the trust policy of {', '.join(names)} (aws iam update-assume-role-policy "
        "--role-name <role> --policy-document file://trust.json), or redeploy the karpenter-aws "
        "component, whose Role carries that trust"
    )
    return Check("pod-identity-trust", element, "fail", "; ".join(d for _, d in broken), call, fix)


PROFILE_FILE = "render/platform-profile/profile.yaml"


@rule(
    "profile-names",
    kinds=EVERY_KIND,
    severity="required",
    element="the cluster is the profile's: `--eks-cluster` equals `clusterName`, `--region` equals "
    f"`region`, and the cluster's own subnets and security groups that carry `{DISCOVERY_KEY}` "
    "carry `networkName` (the name becomes Karpenter's `CLUSTER_NAME`, its security-group selector and the Pod Identity association's cluster)",
    call="the options vs the profile; `eks:DescribeCluster` `resourcesVpcConfig`, `ec2:DescribeSubnets`/`DescribeSecurityGroups` by id",
    fix="change the profile (`eksinf render`), or pass the profile's name/region; both values are named",
    why="the cluster name becomes Karpenter's CLUSTER_NAME, its security-group selector and the association's cluster: a cluster other than the profile's gets Karpenter configured for the wrong cluster, with no error",
)
def profile_names(ctx: Context) -> list[Check]:
    """The enrolled cluster is the profile's: its name, region and discovery tag value (the
    name becomes Karpenter's CLUSTER_NAME, its security-group selector and the Pod Identity
    association's cluster; a mismatch configures Karpenter for another cluster)."""
    facts, scope = ctx.facts, ctx.scope
    element = "the profile's clusterName, region and networkName"
    call = (
        "--eks-cluster/--region vs the profile; eks:DescribeCluster resourcesVpcConfig + "
        f"ec2:DescribeSubnets/DescribeSecurityGroups (tag {DISCOVERY_KEY})"
    )
    problems: list[tuple[str, str]] = []  # (what differs, its fix)
    if scope.profile_cluster and scope.cluster != scope.profile_cluster:
        problems.append(
            (
                f"enrolling EKS cluster {scope.cluster!r} but the profile's clusterName is "
                f"{scope.profile_cluster!r}",
                f"set spec.clusterName: {scope.cluster} in {PROFILE_FILE} (then eksinf "
                f"render), or pass --eks-cluster {scope.profile_cluster}",
            )
        )
    if scope.profile_region and scope.region != scope.profile_region:
        problems.append(
            (
                f"region {scope.region!r} but the profile's region is {scope.profile_region!r}",
                f"set spec.region: {scope.region} in {PROFILE_FILE} (then eksinf render), "
                f"or pass --region {scope.profile_region}",
            )
        )
    unread = facts.cluster is not None and facts.cluster_discovery is None
    if unread and not problems:
        return [Check("profile-names", element, "unknown", facts.cluster_discovery_error, call)]
    for where, value in sorted((facts.cluster_discovery or {}).items()):
        if value != scope.network:
            problems.append(
                (
                    f"the cluster's {where} carries {DISCOVERY_KEY}={value!r} but the "
                    f"profile's networkName is {scope.network!r}",
                    f"set spec.networkName: {value} in {PROFILE_FILE} (then eksinf render), "
                    f"or tag the cluster's subnets and security groups {DISCOVERY_KEY}="
                    f"{scope.network}",
                )
            )
    if not problems:
        detail = f"cluster {scope.cluster}, region {scope.region}, {DISCOVERY_KEY}={scope.network}"
        return [Check("profile-names", element, "pass", detail, call)]
    fixes = list(dict.fromkeys(fix for _, fix in problems))
    return [
        Check(
            "profile-names",
            element,
            "fail",
            "; ".join(what for what, _ in problems),
            call,
            "; ".join(fixes),
        )
    ]


@rule(
    "cluster-active",
    kinds=EVERY_KIND,
    severity="required",
    element="the EKS cluster, ACTIVE, at a supported version (1.30-1.34)",
    call="`eks:DescribeCluster` (`status`, `version`)",
    fix="deploy the eks-cluster component; wait for ACTIVE; upgrade",
    why="every other element hangs off an ACTIVE cluster at a version the stack pins add-ons and AMIs for",
)
def cluster_active(ctx: Context) -> list[Check]:
    """Cluster ACTIVE at a supported version."""
    facts = ctx.facts
    c, r = facts.cluster_name, facts.region
    checks: list[Check] = []
    call = f"eks:DescribeCluster name={c}"
    if facts.cluster_error:
        checks.append(
            Check("cluster-active", f"EKS cluster {c}", "unknown", facts.cluster_error, call)
        )
    elif facts.cluster is None:
        checks.append(
            Check(
                "cluster-active",
                f"EKS cluster {c} in {r}",
                "fail",
                "no such cluster",
                call,
                f"deploy the eks-cluster component (mgmt plane), or check --region ({r})",
            )
        )
        return checks  # every other element hangs off the cluster
    else:
        status, version = facts.cluster.get("status"), facts.cluster.get("version", "")
        ok = status == "ACTIVE" and version in SUPPORTED_VERSIONS
        checks.append(
            Check(
                "cluster-active",
                f"an ACTIVE EKS cluster at a supported version ({', '.join(SUPPORTED_VERSIONS)})",
                "pass" if ok else "fail",
                f"status {status}, version {version}",
                call,
                ""
                if ok
                else "wait for ACTIVE, or upgrade the control plane to a supported version",
            )
        )
    return checks


@rule(
    "access-entry",
    kinds=EVERY_KIND,
    severity="required",
    element="an access entry for the caller's principal (an assumed-role session is mapped to its IAM role ARN)",
    call="`sts:GetCallerIdentity`, `eks:ListAccessEntries`",
    fix="`--grant-access`, or `aws eks create-access-entry ... --type STANDARD`",
    why="without an entry the API answers 401 to every call enroll makes",
)
def access_entry(ctx: Context) -> list[Check]:
    """Access entry for the caller."""
    facts = ctx.facts
    c, r = facts.cluster_name, facts.region
    checks: list[Check] = []
    principal = facts.caller.principal_arn if facts.caller else "?"
    call = f"eks:ListAccessEntries clusterName={c}"
    fix = (
        "re-run with --grant-access, or: "
        + shell_command(
            "aws",
            "eks",
            "create-access-entry",
            "--cluster-name",
            c,
            "--principal-arn",
            principal,
            "--type",
            "STANDARD",
            "--region",
            r,
        )
        + " (then the access-policy fix)"
    )
    if facts.access_entries is None:
        checks.append(
            Check(
                "access-entry",
                f"an access entry for {principal}",
                "unknown",
                facts.access_error,
                call,
                fix,
            )
        )
        entry_missing = False
    else:
        entry_missing = principal not in facts.access_entries
        detail = (
            "created now (--grant-access)"
            if facts.granted_entry
            else (
                f"no entry for {principal}, so the API answers it 401 Unauthorized. A cluster "
                "made by ACK was created as the controllers' own identity "
                "(bootstrapClusterCreatorAdminPermissions): only that identity is admin"
                if entry_missing
                else f"entry for {principal}"
            )
        )
        checks.append(
            Check(
                "access-entry",
                f"an access entry for {principal}",
                "fail" if entry_missing else "pass",
                detail,
                call,
                fix if entry_missing else "",
            )
        )
    return checks


@rule(
    "access-policy",
    kinds=EVERY_KIND,
    severity="required",
    element="`AmazonEKSClusterAdminPolicy` at cluster scope associated with that entry (an entry alone authenticates and authorizes nothing)",
    call="`eks:ListAssociatedAccessPolicies`",
    fix="`--grant-access`, or `aws eks associate-access-policy ... --access-scope type=cluster --policy-arn ...AmazonEKSClusterAdminPolicy`",
    why="an entry alone authorizes nothing: every read and apply enroll makes is 403",
)
def access_policy(ctx: Context) -> list[Check]:
    """The caller's access entry holds the cluster-admin access policy (an entry alone
    authenticates and authorizes nothing: every call enroll makes is then 403)."""
    facts = ctx.facts
    c, r = facts.cluster_name, facts.region
    principal = facts.caller.principal_arn if facts.caller else "?"
    element = f"the access policy {ADMIN_POLICY.rsplit('/', 1)[-1]} (cluster scope) for {principal}"
    call = f"eks:ListAssociatedAccessPolicies clusterName={c} principalArn={principal}"
    fix = "re-run with --grant-access, or: " + shell_command(
        "aws",
        "eks",
        "associate-access-policy",
        "--cluster-name",
        c,
        "--principal-arn",
        principal,
        "--access-scope",
        "type=cluster",
        "--policy-arn",
        ADMIN_POLICY,
        "--region",
        r,
    )
    if facts.access_entries is None or ctx.entry_missing:
        detail = "no access entry to read (see access-entry)"
        return [Check("access-policy", element, "skipped", detail, call, severity="advisory")]
    if facts.access_policies is None:
        return [Check("access-policy", element, "unknown", facts.access_policies_error, call, fix)]
    if has_admin(facts.access_policies):
        detail = "associated now (--grant-access)" if facts.granted_policy else "associated"
        return [Check("access-policy", element, "pass", detail, call)]
    held = ", ".join(f"{arn.rsplit('/', 1)[-1]} ({scope})" for arn, scope in facts.access_policies)
    detail = (
        f"the entry for {principal} holds {held or 'no access policy'}: the API authenticates "
        "the caller and forbids (403) what enroll reads and applies"
    )
    return [Check("access-policy", element, "fail", detail, call, fix)]


@rule(
    "endpoint-reachable",
    kinds=EVERY_KIND,
    severity="required",
    element="a reachable API endpoint",
    call="`GET /version`",
    fix="network path to the endpoint (public access, VPN, bastion)",
    why="enroll reads Argo CD and applies the root Application over the API (skipped without a kubeconfig)",
)
def endpoint_reachable(ctx: Context) -> list[Check]:
    """Endpoint reachable."""
    facts = ctx.facts
    kube_used = ctx.kube_used
    entry_missing = ctx.entry_missing
    checks: list[Check] = []
    call = "GET /version on the cluster endpoint"
    if not kube_used:
        checks.append(
            Check(
                "endpoint-reachable",
                "a reachable API endpoint",
                "skipped",
                "no kubeconfig",
                call,
                severity="advisory",
            )
        )
    elif facts.version:
        checks.append(
            Check(
                "endpoint-reachable",
                "a reachable API endpoint",
                "pass",
                f"Kubernetes {facts.version}",
                call,
            )
        )
    elif facts.endpoint_status in (401, 403) and ctx.access_explains_denial:
        what = "access entry" if entry_missing else "access policy"
        checks.append(
            Check(
                "endpoint-reachable",
                "a reachable API endpoint",
                "skipped",
                f"HTTP {facts.endpoint_status}: explained by the missing {what}",
                call,
                severity="advisory",
            )
        )
    elif facts.endpoint_status in (401, 403):
        # The endpoint answered: it is reachable. It refused this identity, which the access
        # checks above do not explain, so what lies behind it was not read: unknown, not missing.
        refused = (
            "the kubeconfig's credentials"
            if facts.endpoint_status == 401
            else "this identity, which it knows but grants nothing"
        )
        checks.append(
            Check(
                "endpoint-reachable",
                "a reachable API endpoint",
                "unknown",
                f"{facts.endpoint_error} (the endpoint answered: it refused {refused})",
                call,
                facts.endpoint_hint
                or "use a kubeconfig whose user this cluster accepts (token, client certificate "
                "or exec plugin for this cluster), or see the access entry checks",
            )
        )
    else:
        access = (facts.cluster or {}).get("resourcesVpcConfig", {})
        mode = f"public={access.get('endpointPublicAccess')}, private={access.get('endpointPrivateAccess')}"
        checks.append(
            Check(
                "endpoint-reachable",
                "a reachable API endpoint",
                "fail",
                f"{facts.endpoint_error} (endpoint access: {mode})",
                call,
                "reach the endpoint from here (public access, VPN or a bastion), or fix the kubeconfig",
            )
        )
    return checks


@rule(
    "pod-identity-agent",
    severity="required",
    element="the `eks-pod-identity-agent` add-on, ACTIVE",
    call="`eks:DescribeAddon`",
    fix="`aws eks create-addon --addon-name eks-pod-identity-agent`",
    why="without the agent, associations hand out no credentials and Karpenter launches no node",
)
def pod_identity_agent(ctx: Context) -> list[Check]:
    """The pod identity agent add-on is active."""
    facts = ctx.facts
    c, r = facts.cluster_name, facts.region
    checks: list[Check] = []
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
        checks.append(
            Check("pod-identity-agent", f"the {AGENT_ADDON} add-on", "unknown", unread, call, fix)
        )
    else:
        ok = facts.addon_status == "ACTIVE"
        detail = (
            f"status {facts.addon_status}"
            if facts.addon_status
            else "absent: Pod Identity associations exist but pods get no credentials"
        )
        checks.append(
            Check(
                "pod-identity-agent",
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
def addon_drift(ctx: Context) -> list[Check]:
    """The installed add-ons are the units' versions and values."""
    facts, needs = ctx.facts, ctx.needs
    if not needs.addons:
        return []
    element = "the add-ons at the units' versions and values"
    call = f"eks:DescribeAddon clusterName={facts.cluster_name}"
    if facts.installed_addons is None:
        return [Check("addon-drift", element, "unknown", facts.installed_addons_error, call)]
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
        return [Check("addon-drift", element, "pass", detail, call)]
    fix = "; ".join(fixes) + ", or pin what runs in the profile's addonVersions"
    return [Check("addon-drift", element, "warn", "; ".join(diffs), call, fix)]


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
def pod_identity_associations(ctx: Context) -> list[Check]:
    """A Pod Identity association for each ServiceAccount the stack needs."""
    facts, needs = ctx.facts, ctx.needs
    c = facts.cluster_name
    checks: list[Check] = []

    if needs.pod_identities:
        call = f"eks:ListPodIdentityAssociations clusterName={c}"
        wanted = ", ".join(f"{ns}/{sa}" for ns, sa in needs.pod_identities)
        if facts.associations is None:
            checks.append(
                Check(
                    "pod-identity-associations",
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
                Check(
                    "pod-identity-associations",
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
def pod_identity_trust(ctx: Context) -> list[Check]:
    """The role behind each association trusts the Pod Identity agent."""
    facts, needs = ctx.facts, ctx.needs
    checks: list[Check] = []
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
def pod_identity_role(ctx: Context) -> list[Check]:
    """The role behind each association is the stack's role for it."""
    facts, needs = ctx.facts, ctx.needs
    if not needs.association_role_names:
        return []
    element = "the stack's role behind each Pod Identity association"
    call = f"eks:DescribePodIdentityAssociation clusterName={facts.cluster_name} (roleArn)"
    if facts.associations is None:
        return [Check("pod-identity-role", element, "unknown", facts.associations_error, call)]
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
        return [Check("pod-identity-role", element, "unknown", "; ".join(unread), call)]
    if not wrong:
        status, detail = ("pass", ", ".join(right)) if right else ("skipped", "no association")
        return [Check("pod-identity-role", element, status, detail, call)]
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
    return [Check("pod-identity-role", element, "fail", detail, call, fix)]


@rule(
    "irsa-issuer",
    severity="required",
    element="the cluster's OIDC issuer registered in IAM, only if a rendered ServiceAccount carries `eks.amazonaws.com/role-arn`",
    call="`eks:DescribeCluster` `identity.oidc.issuer` vs `iam:ListOpenIDConnectProviders`",
    fix="`aws iam create-open-id-connect-provider`",
    why="STS rejects every web identity token from an issuer IAM does not know (skipped when no ServiceAccount uses IRSA)",
)
def irsa_issuer(ctx: Context) -> list[Check]:
    """IRSA issuer, only where IRSA is used."""
    facts, needs = ctx.facts, ctx.needs
    checks: list[Check] = []
    call = "eks:DescribeCluster identity.oidc.issuer vs iam:ListOpenIDConnectProviders"
    if not needs.irsa_accounts:
        checks.append(
            Check(
                "irsa-issuer",
                "an IAM OIDC provider for the cluster issuer",
                "skipped",
                "the stack uses Pod Identity, not IRSA",
                call,
                severity="advisory",
            )
        )
    elif facts.oidc_providers is None:
        checks.append(
            Check(
                "irsa-issuer",
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
            Check(
                "irsa-issuer",
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
def irsa_trust(ctx: Context) -> list[Check]:
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
        return [Check("irsa-trust", element, "unknown", detail, call)]
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
        return [Check("irsa-trust", element, "pass", found, call)]
    fix = (
        f"update each role's trust to Federated arn:aws:iam::<account>:oidc-provider/{host} with "
        f"{host}:sub = system:serviceaccount:<ns>:<name> (aws iam update-assume-role-policy), or "
        "redeploy the component that owns the role"
    )
    return [Check("irsa-trust", element, "fail", "; ".join(problems), call, fix)]


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


@rule(
    "discovery-tags",
    severity="required",
    element=f"`{DISCOVERY_KEY}=<networkName>` on at least one private subnet and one security group, and on no public subnet",
    call="`ec2:DescribeSubnets`, `ec2:DescribeSecurityGroups` filtered by the tag",
    fix="tag them (the aws-network component does)",
    why="Karpenter finds no subnet or security group and launches nothing; a tagged public subnet gives GPU nodes public IPs",
)
def discovery_tags(ctx: Context) -> list[Check]:
    """Discovery tags on private subnets and a security group."""
    facts, scope = ctx.facts, ctx.scope
    checks: list[Check] = []
    call = f"ec2:DescribeSubnets + ec2:DescribeSecurityGroups tag:{DISCOVERY_KEY}={scope.network}"
    element = f"the {DISCOVERY_KEY}={scope.network} tag on its private subnets and security group"
    if facts.discovery_subnets is None or facts.discovery_sgs is None:
        checks.append(Check("discovery-tags", element, "unknown", facts.discovery_error, call))
    else:
        private = [s for s in facts.discovery_subnets if not s.get("MapPublicIpOnLaunch")]
        public = [s["SubnetId"] for s in facts.discovery_subnets if s.get("MapPublicIpOnLaunch")]
        problems = []
        if not private:
            problems.append("no private subnet carries it")
        if not facts.discovery_sgs:
            problems.append("no security group carries it")
        detail = "; ".join(problems) or (
            f"{len(private)} private subnet(s), {len(facts.discovery_sgs)} security group(s)"
        )
        if public:
            detail += f"; public subnets {', '.join(public)} carry it too (GPU nodes would get public IPs)"
        checks.append(
            Check(
                "discovery-tags",
                element,
                "fail" if problems or public else "pass",
                detail,
                call,
                f"tag the private subnets and the cluster security group {DISCOVERY_KEY}={scope.network} "
                "(the aws-network component does), and only those"
                if problems or public
                else "",
            )
        )
    return checks


@rule(
    "node-role",
    severity="required",
    element="the profile's `nodeRoleName` exists and trusts `ec2.amazonaws.com` (Karpenter creates its instance profiles from it)",
    call="`iam:GetRole`, `iam:ListInstanceProfilesForRole`",
    fix="deploy the eks-cluster component",
    why="Karpenter makes its instance profiles from this role; without it no node joins",
)
def node_role(ctx: Context) -> list[Check]:
    """Node role with an instance-profile path."""
    facts, scope = ctx.facts, ctx.scope
    checks: list[Check] = []
    call = f"iam:GetRole {scope.node_role} + iam:ListInstanceProfilesForRole"
    if facts.node_role_error:
        checks.append(
            Check(
                "node-role",
                f"the node role {scope.node_role}",
                "unknown",
                facts.node_role_error,
                call,
            )
        )
    elif facts.node_role is None:
        checks.append(
            Check(
                "node-role",
                f"the node role {scope.node_role}",
                "fail",
                "no such role",
                call,
                "deploy the eks-cluster component (mgmt plane), which creates it",
            )
        )
    else:
        trust = str(facts.node_role.get("AssumeRolePolicyDocument", ""))
        ok = "ec2.amazonaws.com" in trust
        checks.append(
            Check(
                "node-role",
                f"the node role {scope.node_role} trusted by ec2.amazonaws.com",
                "pass" if ok else "fail",
                f"path {facts.node_role.get('Path', '/')}, {facts.instance_profiles} instance profile(s); Karpenter makes its own"
                if ok
                else "the role does not trust ec2.amazonaws.com, so no instance profile can use it",
                call,
                "" if ok else "trust ec2.amazonaws.com in the node role",
            )
        )
    return checks


@rule(
    "gpu-ami",
    severity="required",
    element="the pinned `gpuAMIAlias` resolves for the cluster's Kubernetes version",
    call="`ssm:GetParameter /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/x86_64/nvidia/amazon-eks-node-al2023-x86_64-nvidia-<k8s>-<v>/image_id`, else `ec2:DescribeImages` owner amazon",
    fix="pin a released alias in the profile",
    why="an alias that does not resolve leaves the GPU EC2NodeClass not ready: no GPU node launches",
)
def gpu_ami(ctx: Context) -> list[Check]:
    """GPU AMI alias resolvable."""
    facts, scope = ctx.facts, ctx.scope
    checks: list[Check] = []
    call = "ssm:GetParameter (EKS optimized AMI) or ec2:DescribeImages owner amazon"
    element = f"a resolvable GPU AMI for alias {scope.gpu_ami_alias}"
    if facts.ami_id:
        checks.append(
            Check("gpu-ami", element, "pass", f"{facts.ami_id} ({facts.ami_source})", call)
        )
    else:
        checks.append(
            Check(
                "gpu-ami",
                element,
                "unknown" if facts.ami_unread else "fail",  # unread is not unresolvable
                facts.ami_error,
                call,
                "pin gpuAMIAlias in the profile to a released al2023 version for this Kubernetes version",
            )
        )
    return checks


@rule(
    "root-volume",
    severity="advisory",
    element="GPU root volume >= model cache + 30 GiB (OS and images)",
    call="live `EC2NodeClass gpu` `blockDeviceMappings`, else the profile's `gpuRootVolumeSize`, vs `modelCacheSize`",
    fix="raise `gpuRootVolumeSize`",
    why="advisory: `eksinf lint` and the profile's own rules already refuse a plan whose volume cannot hold the cache; a live undersized volume evicts model pods but breaks nothing enroll wires",
)
def root_volume(ctx: Context) -> list[Check]:
    """Root volume fits the model cache."""
    facts, scope = ctx.facts, ctx.scope
    checks: list[Check] = []
    volume = facts.live_gpu_volume_gib or scope.gpu_root_volume_gib
    cache = scope.model_cache_gib
    call = "EC2NodeClass gpu spec.blockDeviceMappings (cluster, else profile) vs profile modelCacheSize"
    if volume is None or cache is None:
        checks.append(
            Check(
                "root-volume",
                "a GPU root volume that fits the model cache",
                "skipped",
                "sizes not in the profile",
                call,
                severity="advisory",
            )
        )
    else:
        ok = volume >= cache + ROOT_OVERHEAD_GIB
        checks.append(
            Check(
                "root-volume",
                f"a GPU root volume of at least {cache + ROOT_OVERHEAD_GIB}Gi",
                "pass" if ok else "warn",
                f"{volume}Gi root volume, {cache}Gi model cache + {ROOT_OVERHEAD_GIB}Gi for OS and images",
                call,
                ""
                if ok
                else "raise gpuRootVolumeSize in the profile (pods are evicted on ephemeral-storage otherwise)",
            )
        )
    return checks


@rule(
    "capacity-reservation",
    severity="advisory",
    element="an active capacity reservation tagged with the stack tag, when a NodePool is reserved-only (the `h200` pool)",
    call="`ec2:DescribeCapacityReservations`",
    fix="tag an ODCR or Capacity Block, or leave the pool idle",
    why="advisory: without a reservation the reserved-only pool never launches; everything else works",
)
def capacity_reservation(ctx: Context) -> list[Check]:
    """Capacity reservation for reserved-only pools (advisory: the pool simply never launches)."""
    facts, scope, needs = ctx.facts, ctx.scope, ctx.needs
    checks: list[Check] = []
    if needs.reserved_pools:
        pools = ", ".join(needs.reserved_pools)
        call = f"ec2:DescribeCapacityReservations tag:{scope.tag_key}={scope.stack} state=active"
        element = (
            f"an active capacity reservation tagged {scope.tag_key}={scope.stack} (pool {pools})"
        )
        fix = f"tag an ODCR or Capacity Block {scope.tag_key}={scope.stack}, or leave pool {pools} idle"
        if facts.reservations is None:
            checks.append(
                Check(
                    "capacity-reservation",
                    element,
                    "unknown",
                    facts.reservations_error,
                    call,
                    fix,
                    severity="advisory",
                )
            )
        else:
            found = [cr["CapacityReservationId"] for cr in facts.reservations]
            checks.append(
                Check(
                    "capacity-reservation",
                    element,
                    "pass" if found else "warn",
                    ", ".join(found) or f"none: pool {pools} will not launch nodes",
                    call,
                    "" if found else fix,
                    severity="advisory",
                )
            )
    return checks


@rule(
    "argocd",
    kinds=EVERY_KIND,
    severity="required",
    element="Argo CD 3.1+ (`argocd-server`) in the Argo CD namespace (older versions cannot read `oci://` plain manifests)",
    call="`GET deployments/argocd-server`",
    fix="absent: enroll installs the pinned Argo CD (configs/argocd) unless --no-argocd; older than 3.1: upgrade it",
    why="enroll wires an Argo CD root Application; Argo CD before 3.1 cannot read oci:// plain manifests (checked only when the API answers)",
)
def argocd(ctx: Context) -> list[Check]:
    """Argo CD present at the floor version (enroll wires it; it does not install it)."""
    facts = ctx.facts
    kube_used, argocd_namespace = ctx.kube_used, ctx.argocd_namespace
    checks: list[Check] = []
    if kube_used and facts.version:
        call = f"GET deployments/argocd-server in {argocd_namespace}"
        element = f"Argo CD {ARGOCD_FLOOR[0]}.{ARGOCD_FLOOR[1]}+ in namespace {argocd_namespace}"
        fix = f"install Argo CD {ARGOCD_FLOOR[0]}.{ARGOCD_FLOOR[1]} or later in {argocd_namespace}"
        denied = facts.argocd_status in (401, 403)
        if denied and ctx.access_explains_denial:
            # Not a missing Argo CD: the caller may not look (see access-entry/access-policy).
            what = "access entry" if ctx.entry_missing else "access policy"
            detail = f"HTTP {facts.argocd_status}: explained by the missing {what}; not checked"
            checks.append(Check("argocd", element, "skipped", detail, call, severity="advisory"))
        elif denied:
            access_fix = (
                f"give the caller read access to deployments in {argocd_namespace} (its "
                "Kubernetes groups or access policy); Argo CD may well be installed"
            )
            checks.append(Check("argocd", element, "unknown", facts.argocd_error, call, access_fix))
        elif facts.argocd_error:
            checks.append(Check("argocd", element, "unknown", facts.argocd_error, call, fix))
        elif facts.argocd_image is None and ctx.install_argocd:
            checks.append(
                Check(
                    "argocd",
                    element,
                    "warn",
                    "argocd-server not found: enroll installs the pinned Argo CD (configs/argocd)",
                    call,
                )
            )
        elif facts.argocd_image is None:
            checks.append(Check("argocd", element, "fail", "argocd-server not found", call, fix))
        else:
            version = version_of(facts.argocd_image)
            ok = version is None or version >= ARGOCD_FLOOR
            detail = facts.argocd_image + (
                "" if version else " (version not in the tag; not checked)"
            )
            checks.append(
                Check("argocd", element, "pass" if ok else "fail", detail, call, "" if ok else fix)
            )
    return checks
