"""The contract rules every target kind shares: the cluster is the profile's, ACTIVE, and
the caller can reach and administer its API (listed in rules.RULES)."""

from __future__ import annotations

from ...errors import shell_command
from ...model.checks import Finding
from ...model.names import DISCOVERY_KEY
from .context import EVERY_KIND, Context, check, rule
from .facts import (
    ADMIN_POLICY,
    SUPPORTED_VERSIONS,
    has_admin,
)

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
def profile_names(ctx: Context) -> list[Finding]:
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
        return [check(element, "unknown", facts.cluster_discovery_error, call)]
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
        return [check(element, "pass", detail, call)]
    fixes = list(dict.fromkeys(fix for _, fix in problems))
    return [
        check(
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
def cluster_active(ctx: Context) -> list[Finding]:
    """Cluster ACTIVE at a supported version."""
    facts = ctx.facts
    c, r = facts.cluster_name, facts.region
    checks: list[Finding] = []
    call = f"eks:DescribeCluster name={c}"
    if facts.cluster_error:
        checks.append(check(f"EKS cluster {c}", "unknown", facts.cluster_error, call))
    elif facts.cluster is None:
        checks.append(
            check(
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
            check(
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
def access_entry(ctx: Context) -> list[Finding]:
    """Access entry for the caller."""
    facts = ctx.facts
    c, r = facts.cluster_name, facts.region
    checks: list[Finding] = []
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
            check(
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
            check(
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
def access_policy(ctx: Context) -> list[Finding]:
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
        return [check(element, "skipped", detail, call)]
    if facts.access_policies is None:
        return [check(element, "unknown", facts.access_policies_error, call, fix)]
    if has_admin(facts.access_policies):
        detail = "associated now (--grant-access)" if facts.granted_policy else "associated"
        return [check(element, "pass", detail, call)]
    held = ", ".join(f"{arn.rsplit('/', 1)[-1]} ({scope})" for arn, scope in facts.access_policies)
    detail = (
        f"the entry for {principal} holds {held or 'no access policy'}: the API authenticates "
        "the caller and forbids (403) what enroll reads and applies"
    )
    return [check(element, "fail", detail, call, fix)]


@rule(
    "endpoint-reachable",
    kinds=EVERY_KIND,
    severity="required",
    element="a reachable API endpoint",
    call="`GET /version`",
    fix="network path to the endpoint (public access, VPN, bastion)",
    why="enroll reads Argo CD and applies the root Application over the API (skipped without a kubeconfig)",
)
def endpoint_reachable(ctx: Context) -> list[Finding]:
    """Endpoint reachable."""
    facts = ctx.facts
    kube_used = ctx.kube_used
    entry_missing = ctx.entry_missing
    checks: list[Finding] = []
    call = "GET /version on the cluster endpoint"
    if not kube_used:
        checks.append(check("a reachable API endpoint", "skipped", "no kubeconfig", call))
    elif facts.version:
        checks.append(
            check(
                "a reachable API endpoint",
                "pass",
                f"Kubernetes {facts.version}",
                call,
            )
        )
    elif facts.endpoint_status in (401, 403) and ctx.access_explains_denial:
        what = "access entry" if entry_missing else "access policy"
        checks.append(
            check(
                "a reachable API endpoint",
                "skipped",
                f"HTTP {facts.endpoint_status}: explained by the missing {what}",
                call,
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
            check(
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
            check(
                "a reachable API endpoint",
                "fail",
                f"{facts.endpoint_error} (endpoint access: {mode})",
                call,
                "reach the endpoint from here (public access, VPN or a bastion), or fix the kubeconfig",
            )
        )
    return checks
