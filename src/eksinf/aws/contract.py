"""The cluster contract: what a bring-your-own EKS cluster must have before workloads land.

One named check per element. Each records the AWS or Kubernetes call that proves it and the
fix. Severity `required` blocks (a failure is "cluster is missing X", exit 3); `advisory` only
warns. A check whose query failed is `unknown`, never passed (unknown is not zero).
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import EksinfError
from ..model.configs import read_units, resources
from ..model.names import DISCOVERY_KEY
from ..model.quantity import whole_gib
from .kube import KubeClient, KubeError, resource_path
from .scope import StackScope
from .session import AWS_FAILURES, AwsSession, Caller, error_code, paginate, translate

SUPPORTED_VERSIONS = ("1.30", "1.31", "1.32", "1.33", "1.34")
ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
AGENT_ADDON = "eks-pod-identity-agent"
ROOT_OVERHEAD_GIB = (
    30  # OS, container images and logs on a GPU node's root volume, besides the cache
)
ARGOCD_FLOOR = (3, 1)  # older Argo CD cannot resolve oci:// plain-manifest sources
POD_IDENTITY_SERVICE = "pods.eks.amazonaws.com"
# The Pod Identity agent assumes the role and tags the session; a trust without TagSession
# fails at credential time, long after the association looked fine.
POD_IDENTITY_ACTIONS = ("sts:AssumeRole", "sts:TagSession")


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
class StackNeeds:
    """What the rendered stack expects of the cluster, read from configs/ (never hard-coded)."""

    pod_identities: tuple[tuple[str, str], ...] = ()  # (namespace, serviceaccount)
    irsa_accounts: tuple[tuple[str, str], ...] = ()
    reserved_pools: tuple[str, ...] = ()  # NodePools that may only use reserved capacity


def stack_needs(configs: Path) -> StackNeeds:
    pias, irsa, reserved = set(), set(), set()
    for r in resources(read_units(configs)):
        if r.kind == "PodIdentityAssociation" and r.spec.get("serviceAccount"):
            pias.add((r.spec.get("namespace", ""), r.spec["serviceAccount"]))
        elif r.kind == "ServiceAccount" and "eks.amazonaws.com/role-arn" in r.annotations:
            irsa.add((r.namespace or "", r.name))
        elif r.kind == "NodePool" and _reserved_only(r.spec):
            reserved.add(r.name)
    return StackNeeds(tuple(sorted(pias)), tuple(sorted(irsa)), tuple(sorted(reserved)))


def _reserved_only(spec: dict[str, Any]) -> bool:
    reqs = ((spec.get("template") or {}).get("spec") or {}).get("requirements") or []
    for req in reqs:
        if req.get("key") == "karpenter.sh/capacity-type" and req.get("operator") == "In":
            return list(req.get("values") or []) == ["reserved"]
    return False


@dataclass(frozen=True)
class AssociationRole:
    """The role behind one Pod Identity association and what its trust grants the agent."""

    service_account: str  # namespace/name
    role_arn: str
    granted: tuple[str, ...] | None  # actions trusted for POD_IDENTITY_SERVICE; None = unread
    error: str = ""  # why it could not be read ("" when read, "no such role" when absent)


def _statement_list(document: Any) -> list[dict[str, Any]]:
    if isinstance(document, str):  # IAM returns the document URL-encoded
        document = json.loads(urllib.parse.unquote(document))
    statements = (document or {}).get("Statement") or []
    return [statements] if isinstance(statements, dict) else list(statements)


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def trusted_actions(document: Any, service: str) -> tuple[str, ...]:
    """The actions an assume-role policy allows `service` (wildcards expanded to what we need)."""
    granted: set[str] = set()
    for statement in _statement_list(document):
        principal = statement.get("Principal") or {}
        services = _as_list(principal.get("Service")) if isinstance(principal, dict) else []
        if statement.get("Effect") != "Allow" or service not in services:
            continue
        for action in _as_list(statement.get("Action")):
            if action in ("*", "sts:*"):
                granted.update(POD_IDENTITY_ACTIONS)
            else:
                granted.add(action)
    return tuple(sorted(granted))


@dataclass
class Facts:
    """Everything the checks look at, gathered once (I/O in `gather`, judgement in `evaluate`)."""

    region: str
    cluster_name: str
    caller: Caller | None = None
    cluster: dict[str, Any] | None = None
    cluster_error: str = ""
    access_entries: list[str] | None = None
    access_error: str = ""
    granted: bool = False
    addon_status: str | None = None  # None = absent
    addon_error: str = ""
    associations: list[tuple[str, str]] | None = None
    associations_error: str = ""
    association_roles: list[AssociationRole] = field(default_factory=list)
    oidc_providers: list[str] | None = None
    oidc_error: str = ""
    discovery_subnets: list[dict[str, Any]] | None = None
    discovery_sgs: list[dict[str, Any]] | None = None
    discovery_error: str = ""
    node_role: dict[str, Any] | None = None
    node_role_error: str = ""
    instance_profiles: int = 0
    ami_id: str | None = None
    ami_source: str = ""
    ami_error: str = ""
    reservations: list[dict[str, Any]] | None = None
    reservations_error: str = ""
    version: str | None = None
    endpoint_status: int | None = None
    endpoint_error: str = ""
    argocd_image: str | None = None
    argocd_error: str = ""
    live_gpu_volume_gib: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _aws(what: str, fn: Any) -> tuple[Any, str]:
    """(result, "") or (None, reason): a failed query becomes a reason, never an empty answer."""
    try:
        return fn(), ""
    except AWS_FAILURES as exc:
        return None, translate(exc, what).message
    except EksinfError as exc:
        return None, exc.message


def ami_parameter(alias: str, k8s_version: str) -> tuple[str, str] | None:
    """SSM parameter and image name behind a Karpenter al2023@vYYYYMMDD alias (NVIDIA variant)."""
    match = re.fullmatch(r"al2023@(v\d{8})", alias)
    if not match:
        return None
    name = f"amazon-eks-node-al2023-x86_64-nvidia-{k8s_version}-{match.group(1)}"
    return (
        f"/aws/service/eks/optimized-ami/{k8s_version}/amazon-linux-2023/x86_64/nvidia/"
        f"{name}/image_id",
        name,
    )


def grant_access(session: AwsSession, cluster: str, principal: str) -> None:
    eks = session.client("eks")
    try:
        eks.create_access_entry(clusterName=cluster, principalArn=principal, type="STANDARD")
        eks.associate_access_policy(
            clusterName=cluster,
            principalArn=principal,
            policyArn=ADMIN_POLICY,
            accessScope={"type": "cluster"},
        )
    except AWS_FAILURES as exc:
        raise translate(exc, f"granting {principal} access to {cluster}") from exc


def gather(
    session: AwsSession,
    scope: StackScope,
    needs: StackNeeds,
    kube: KubeClient | None,
    grant: bool = False,
    argocd_namespace: str = "argocd",
    grant_polls: int = 18,
    grant_delay: float = 10.0,
    sleep: Any = time.sleep,
) -> Facts:
    name = scope.cluster
    facts = Facts(region=scope.region, cluster_name=name)
    facts.caller, _ = _aws("sts get-caller-identity", lambda: session.caller)
    eks, ec2, iam = session.client("eks"), session.client("ec2"), session.client("iam")
    try:
        facts.cluster = eks.describe_cluster(name=name)["cluster"]
    except AWS_FAILURES as exc:
        if error_code(exc) != "ResourceNotFoundException":
            facts.cluster_error = translate(exc, "eks describe-cluster").message
    if facts.cluster is not None:
        entries, facts.access_error = _aws(
            "eks list-access-entries",
            lambda: paginate(eks, "list_access_entries", "accessEntries", clusterName=name),
        )
        facts.access_entries = entries
        principal = facts.caller.principal_arn if facts.caller else None
        if grant and principal and entries is not None and principal not in entries:
            grant_access(session, name, principal)
            facts.granted = True
            facts.access_entries = [*entries, principal]
        try:
            addon = eks.describe_addon(clusterName=name, addonName=AGENT_ADDON)["addon"]
            facts.addon_status = addon.get("status", "UNKNOWN")
        except AWS_FAILURES as exc:
            if error_code(exc) != "ResourceNotFoundException":
                facts.addon_error = translate(exc, "eks describe-addon").message
        assoc, facts.associations_error = _aws(
            "eks list-pod-identity-associations",
            lambda: paginate(
                eks, "list_pod_identity_associations", "associations", clusterName=name
            ),
        )
        if assoc is not None:
            facts.associations = sorted((a["namespace"], a["serviceAccount"]) for a in assoc)
            wanted = [
                a for a in assoc if (a["namespace"], a["serviceAccount"]) in needs.pod_identities
            ]
            facts.association_roles = [
                _association_role(eks, iam, name, a) for a in sorted(wanted, key=_sa_of)
            ]
    if needs.irsa_accounts:
        providers, facts.oidc_error = _aws(
            "iam list-open-id-connect-providers",
            lambda: iam.list_open_id_connect_providers()["OpenIDConnectProviderList"],
        )
        if providers is not None:
            facts.oidc_providers = [p["Arn"] for p in providers]
    tag = [{"Name": f"tag:{DISCOVERY_KEY}", "Values": [scope.network]}]
    facts.discovery_subnets, facts.discovery_error = _aws(
        "ec2 describe-subnets", lambda: paginate(ec2, "describe_subnets", "Subnets", Filters=tag)
    )
    sgs, err = _aws(
        "ec2 describe-security-groups",
        lambda: paginate(ec2, "describe_security_groups", "SecurityGroups", Filters=tag),
    )
    facts.discovery_sgs, facts.discovery_error = sgs, facts.discovery_error or err
    try:
        facts.node_role = iam.get_role(RoleName=scope.node_role)["Role"]
        facts.instance_profiles = len(
            iam.list_instance_profiles_for_role(RoleName=scope.node_role)["InstanceProfiles"]
        )
    except AWS_FAILURES as exc:
        if error_code(exc) != "NoSuchEntity":
            facts.node_role_error = translate(exc, "iam get-role").message
    _gather_ami(session, scope, facts)
    if needs.reserved_pools:
        found, facts.reservations_error = _aws(
            "ec2 describe-capacity-reservations",
            lambda: session.client("ec2").describe_capacity_reservations(
                Filters=[
                    {"Name": f"tag:{scope.tag_key}", "Values": [scope.stack]},
                    {"Name": "state", "Values": ["active"]},
                ]
            )["CapacityReservations"],
        )
        facts.reservations = found
    if kube is not None:
        # A fresh access entry takes ~30 s to be honoured: poll, bounded, only after a grant.
        for attempt in range(grant_polls if facts.granted else 1):
            if attempt:
                sleep(grant_delay)
            _gather_kube(kube, facts, argocd_namespace)
            if facts.endpoint_status not in (401, 403):
                break
    return facts


def _sa_of(association: dict[str, Any]) -> str:
    return f"{association['namespace']}/{association['serviceAccount']}"


def _association_role(eks: Any, iam: Any, cluster: str, summary: dict[str, Any]) -> AssociationRole:
    """ListPodIdentityAssociations names no role: describe the association, then read the
    role's trust policy."""
    sa = _sa_of(summary)
    try:
        association = eks.describe_pod_identity_association(
            clusterName=cluster, associationId=summary["associationId"]
        )["association"]
    except AWS_FAILURES as exc:
        return AssociationRole(
            sa, "", None, translate(exc, "eks describe-pod-identity-association").message
        )
    role_arn = association.get("roleArn", "")
    try:
        role = iam.get_role(RoleName=role_arn.rsplit("/", 1)[-1])["Role"]
    except AWS_FAILURES as exc:
        if error_code(exc) == "NoSuchEntity":
            return AssociationRole(sa, role_arn, (), "no such role")
        return AssociationRole(sa, role_arn, None, translate(exc, "iam get-role").message)
    return AssociationRole(
        sa, role_arn, trusted_actions(role.get("AssumeRolePolicyDocument"), POD_IDENTITY_SERVICE)
    )


def _gather_ami(session: AwsSession, scope: StackScope, facts: Facts) -> None:
    version = (facts.cluster or {}).get("version")
    if not version:
        facts.ami_error = "no cluster version to resolve the alias against"
        return
    target = ami_parameter(scope.gpu_ami_alias, version)
    if target is None:
        facts.ami_error = f"alias {scope.gpu_ami_alias} is not an al2023@vYYYYMMDD alias"
        return
    param, image_name = target
    try:
        facts.ami_id = session.client("ssm").get_parameter(Name=param)["Parameter"]["Value"]
        facts.ami_source = f"ssm {param}"
        return
    except AWS_FAILURES as exc:
        if error_code(exc) != "ParameterNotFound":
            facts.ami_error = translate(exc, "ssm get-parameter").message
            return
    images, err = _aws(
        "ec2 describe-images",
        lambda: session.client("ec2").describe_images(
            Owners=["amazon"], Filters=[{"Name": "name", "Values": [image_name]}]
        )["Images"],
    )
    if images:
        facts.ami_id, facts.ami_source = images[0]["ImageId"], f"image {image_name}"
    else:
        facts.ami_error = err or f"neither SSM {param} nor an Amazon image named {image_name}"


def _gather_kube(kube: KubeClient, facts: Facts, argocd_namespace: str) -> None:
    try:
        facts.version = kube.version().get("gitVersion", "?")
    except KubeError as exc:
        facts.endpoint_status, facts.endpoint_error = exc.status, exc.message
        return
    try:
        deploy = kube.get(resource_path("apps/v1", "Deployment", argocd_namespace, "argocd-server"))
        if deploy is not None:
            containers = deploy.get("spec", {}).get("template", {}).get("spec", {}).get(
                "containers"
            ) or [{}]
            facts.argocd_image = containers[0].get("image", "")
        gpu = kube.get(resource_path("karpenter.k8s.aws/v1", "EC2NodeClass", None, "gpu"))
        if gpu is not None:
            for bdm in gpu.get("spec", {}).get("blockDeviceMappings") or []:
                size = whole_gib(str((bdm.get("ebs") or {}).get("volumeSize", "")))
                if size is not None:
                    facts.live_gpu_volume_gib = size
    except KubeError as exc:
        facts.argocd_error = exc.message


def _pod_identity_trust(facts: Facts) -> Check:
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


def _argocd_version(image: str) -> tuple[int, int] | None:
    match = re.search(r":v?(\d+)\.(\d+)", image)
    return (int(match.group(1)), int(match.group(2))) if match else None


def evaluate(
    facts: Facts, scope: StackScope, needs: StackNeeds, kube_used: bool, argocd_namespace: str
) -> list[Check]:
    """Judge the gathered facts: pure, so every rule is tested without AWS."""
    c, r = facts.cluster_name, facts.region
    checks: list[Check] = []

    # 1. cluster ACTIVE at a supported version
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

    # 2. access entry for the caller
    principal = facts.caller.principal_arn if facts.caller else "?"
    call = f"eks:ListAccessEntries clusterName={c}"
    fix = (
        f"re-run with --grant-access, or: aws eks create-access-entry --cluster-name {c} "
        f"--principal-arn {principal} --type STANDARD --region {r} && aws eks "
        f"associate-access-policy --cluster-name {c} --principal-arn {principal} "
        f"--access-scope type=cluster --policy-arn {ADMIN_POLICY} --region {r}"
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
            "granted now (--grant-access)"
            if facts.granted
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

    # 3. endpoint reachable
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
    elif facts.endpoint_status in (401, 403) and entry_missing:
        checks.append(
            Check(
                "endpoint-reachable",
                "a reachable API endpoint",
                "skipped",
                f"HTTP {facts.endpoint_status}: explained by the missing access entry",
                call,
                severity="advisory",
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

    # 4. pod identity: the agent add-on and the associations the stack needs
    call = f"eks:DescribeAddon clusterName={c} addonName={AGENT_ADDON}"
    fix = f"aws eks create-addon --cluster-name {c} --addon-name {AGENT_ADDON} --region {r}"
    if facts.addon_error:
        checks.append(
            Check(
                "pod-identity-agent",
                f"the {AGENT_ADDON} add-on",
                "unknown",
                facts.addon_error,
                call,
                fix,
            )
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
                    "deploy the karpenter-aws component (mgmt plane), which creates them"
                    if missing
                    else "",
                )
            )

    # 4b. the role behind each association trusts the Pod Identity agent
    if needs.pod_identities:
        checks.append(_pod_identity_trust(facts))

    # 5. IRSA issuer, only where IRSA is used
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
                else f"aws iam create-open-id-connect-provider --url {issuer} --client-id-list sts.amazonaws.com",
            )
        )

    # 6. discovery tags on private subnets and a security group
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

    # 7. node role with an instance-profile path
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

    # 8. GPU AMI alias resolvable
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
                "fail",
                facts.ami_error,
                call,
                "pin gpuAMIAlias in the profile to a released al2023 version for this Kubernetes version",
            )
        )

    # 9. root volume fits the model cache (advisory: the profile check already refuses a bad plan)
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
                "pass" if ok else "fail",
                f"{volume}Gi root volume, {cache}Gi model cache + {ROOT_OVERHEAD_GIB}Gi for OS and images",
                call,
                ""
                if ok
                else "raise gpuRootVolumeSize in the profile (pods are evicted on ephemeral-storage otherwise)",
            )
        )

    # 10. capacity reservation for reserved-only pools (advisory: the pool simply never launches)
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

    # 11. Argo CD present at the floor version (enroll wires it; it does not install it)
    if kube_used and facts.version:
        call = f"GET deployments/argocd-server in {argocd_namespace}"
        element = f"Argo CD {ARGOCD_FLOOR[0]}.{ARGOCD_FLOOR[1]}+ in namespace {argocd_namespace}"
        fix = f"install Argo CD {ARGOCD_FLOOR[0]}.{ARGOCD_FLOOR[1]} or later in {argocd_namespace}"
        if facts.argocd_error:
            checks.append(Check("argocd", element, "unknown", facts.argocd_error, call, fix))
        elif facts.argocd_image is None:
            checks.append(Check("argocd", element, "fail", "argocd-server not found", call, fix))
        else:
            version = _argocd_version(facts.argocd_image)
            ok = version is None or version >= ARGOCD_FLOOR
            detail = facts.argocd_image + (
                "" if version else " (version not in the tag; not checked)"
            )
            checks.append(
                Check("argocd", element, "pass" if ok else "fail", detail, call, "" if ok else fix)
            )
    return checks


@dataclass(frozen=True)
class ContractReport:
    cluster: str
    region: str
    checks: tuple[Check, ...]

    @property
    def violations(self) -> list[Check]:
        return [c for c in self.checks if c.blocks]

    @property
    def warnings(self) -> list[Check]:
        return [c for c in self.checks if not c.blocks and c.status in ("warn", "unknown", "fail")]

    def as_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "region": self.region,
            "conforms": not self.violations,
            "checks": [c.as_json() for c in self.checks],
            "violations": [c.name for c in self.violations],
            "warnings": [c.name for c in self.warnings],
        }


def missing_lines(report: ContractReport) -> list[str]:
    lines = []
    for check in report.violations:
        verb = "is missing" if check.status == "fail" else "may be missing (could not check)"
        lines.append(f"cluster {verb} {check.element}: {check.detail}")
        if check.fix:
            lines.append(f"  fix: {check.fix}")
    return lines


def check_cluster(
    session: AwsSession,
    scope: StackScope,
    needs: StackNeeds,
    kube: KubeClient | None,
    grant: bool = False,
    argocd_namespace: str = "argocd",
) -> ContractReport:
    facts = gather(session, scope, needs, kube, grant, argocd_namespace)
    checks = evaluate(facts, scope, needs, kube is not None, argocd_namespace)
    return ContractReport(scope.cluster, scope.region, tuple(checks))


def with_cluster(scope: StackScope, cluster: str | None, region: str | None) -> StackScope:
    return replace(scope, cluster=cluster or scope.cluster, region=region or scope.region)
