"""The cluster contract's facts: what the stack needs (from configs/) and what AWS and the
cluster say, gathered once with the caller's session. Judging them is rules.py's job."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import EksinfError
from ...kube.client import KubeClient, KubeError, resource_path
from ...links.engine import resolve_units
from ...model.configs import read_units, resources
from ...model.iam import POD_IDENTITY_SERVICE, trusted_actions
from ...model.names import DISCOVERY_KEY
from ...model.placeholder import PLACEHOLDER
from ...model.quantity import whole_gib
from ..scope import StackScope
from ..session import (
    AWS_FAILURES,
    AwsSession,
    Caller,
    error_code,
    paginate,
    tags_of,
    translate,
)

SUPPORTED_VERSIONS = ("1.30", "1.31", "1.32", "1.33", "1.34")
ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
AGENT_ADDON = "eks-pod-identity-agent"
ROOT_OVERHEAD_GIB = (
    30  # OS, container images and logs on a GPU node's root volume, besides the cache
)
ARGOCD_FLOOR = (3, 1)  # older Argo CD cannot resolve oci:// plain-manifest sources


def version_of(image: str) -> tuple[int, int] | None:
    """Argo CD's major.minor from its image tag (`...argocd:v3.4.7`), or None when not there."""
    match = re.search(r":v?(\d+)\.(\d+)", image)
    return (int(match.group(1)), int(match.group(2))) if match else None


@dataclass(frozen=True)
class StackNeeds:
    """What the rendered stack expects of the cluster, read from configs/ (never hard-coded)."""

    pod_identities: tuple[tuple[str, str], ...] = ()  # (namespace, serviceaccount)
    irsa_accounts: tuple[tuple[str, str], ...] = ()
    # ("namespace/name", role name) for each IRSA ServiceAccount whose role ARN is literal
    irsa_roles: tuple[tuple[str, str], ...] = ()
    reserved_pools: tuple[str, ...] = ()  # NodePools that may only use reserved capacity
    addons: tuple[AddonNeed, ...] = ()  # the EKS Addon units, as they ship
    # ("namespace/name", IAM role name) for each association whose ACK Role's name is known
    association_role_names: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class AddonNeed:
    name: str
    version: str | None  # None: unset or still a placeholder
    values: str | None  # configurationValues; None = none


def _known(value: Any) -> str | None:
    return str(value) if value and PLACEHOLDER not in str(value) else None


def stack_needs(
    configs: Path, profile_spec: dict[str, Any] | None = None, bindings: list[Any] | None = None
) -> StackNeeds:
    """What the units in `configs` need of the cluster; with the profile and the bindings, read
    as they ship (linked values resolved by the link engine)."""
    units = read_units(configs)
    if profile_spec is not None:
        units = resolve_units(units, profile_spec, bindings or [])
    pias, irsa, reserved = set(), set(), set()
    roles: set[tuple[str, str]] = set()
    addons: list[AddonNeed] = []
    role_names: set[tuple[str, str]] = set()
    found = resources(units)
    ack_roles = {
        (r.namespace, r.name): r.spec.get("name")
        for r in found
        if r.kind == "Role" and r.api_version.startswith("iam.services.k8s.aws/")
    }
    for r in found:
        if r.kind == "Addon" and r.api_version.startswith("eks.services.k8s.aws/"):
            addons.append(
                AddonNeed(
                    str(r.spec.get("name")),
                    _known(r.spec.get("addonVersion")),
                    r.spec.get("configurationValues") or None,
                )
            )
        if r.kind == "PodIdentityAssociation" and r.spec.get("serviceAccount"):
            pias.add((r.spec.get("namespace", ""), r.spec["serviceAccount"]))
            ref = str(((r.spec.get("roleRef") or {}).get("from") or {}).get("name"))
            role = _known(ack_roles.get((r.namespace, ref)))
            if role:
                role_names.add((f"{r.spec.get('namespace', '')}/{r.spec['serviceAccount']}", role))
        elif r.kind == "ServiceAccount" and "eks.amazonaws.com/role-arn" in r.annotations:
            irsa.add((r.namespace or "", r.name))
            arn = str(r.annotations["eks.amazonaws.com/role-arn"])
            if PLACEHOLDER not in arn:
                roles.add((f"{r.namespace or ''}/{r.name}", arn.rsplit("/", 1)[-1]))
        elif r.kind == "NodePool" and _reserved_only(r.spec):
            reserved.add(r.name)
    return StackNeeds(
        tuple(sorted(pias)),
        tuple(sorted(irsa)),
        tuple(sorted(roles)),
        tuple(sorted(reserved)),
        tuple(sorted(addons, key=lambda a: a.name)),
        tuple(sorted(role_names)),
    )


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


@dataclass(frozen=True)
class IrsaTrust:
    """The trust policy of the role an IRSA ServiceAccount names."""

    service_account: str  # namespace/name
    role_name: str
    document: Any = None  # the AssumeRolePolicyDocument; None = unread or absent
    error: str = ""  # why it could not be read ("no such role" when absent)


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
    # (policy ARN, access scope type) associated with the caller's entry; None = unread
    access_policies: list[tuple[str, str]] | None = None
    access_policies_error: str = ""
    granted_entry: bool = False  # --grant-access created the entry now
    granted_policy: bool = False  # --grant-access associated the admin policy now
    addon_status: str | None = None  # None = absent
    addon_error: str = ""
    # eks:DescribeAddon of each add-on the stack's Addon units name (None: not installed);
    # the dict is None when unread, with installed_addons_error saying why
    installed_addons: dict[str, dict[str, Any] | None] | None = None
    installed_addons_error: str = ""
    associations: list[tuple[str, str]] | None = None
    associations_error: str = ""
    association_roles: list[AssociationRole] = field(default_factory=list)
    oidc_providers: list[str] | None = None
    irsa_trusts: list[IrsaTrust] = field(default_factory=list)
    oidc_error: str = ""
    discovery_subnets: list[dict[str, Any]] | None = None
    discovery_sgs: list[dict[str, Any]] | None = None
    discovery_error: str = ""
    # "subnet subnet-1" / "security group sg-1" -> its discovery tag value, for the cluster's
    # own subnets and security groups that carry the key; None = unread
    cluster_discovery: dict[str, str] | None = None
    cluster_discovery_error: str = ""
    node_role: dict[str, Any] | None = None
    node_role_error: str = ""
    instance_profiles: int = 0
    ami_id: str | None = None
    ami_source: str = ""
    ami_error: str = ""
    # True when ami_error says what could not be read (no cluster version, a failed call), so
    # the alias's fate is unknown; False when the alias was looked up and does not resolve
    ami_unread: bool = False
    reservations: list[dict[str, Any]] | None = None
    reservations_error: str = ""
    version: str | None = None
    endpoint_status: int | None = None
    endpoint_error: str = ""
    endpoint_hint: str = ""  # the fix the client gave (a 401/403 diagnosis names one)
    argocd_image: str | None = None
    argocd_error: str = ""
    argocd_status: int | None = None  # the HTTP status when reading Argo CD failed
    live_gpu_volume_gib: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def granted(self) -> bool:
        return self.granted_entry or self.granted_policy


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


def grant_entry(session: AwsSession, cluster: str, principal: str) -> None:
    try:
        session.client("eks").create_access_entry(
            clusterName=cluster, principalArn=principal, type="STANDARD"
        )
    except AWS_FAILURES as exc:
        raise translate(exc, f"creating an access entry for {principal} on {cluster}") from exc


def grant_policy(session: AwsSession, cluster: str, principal: str) -> None:
    try:
        session.client("eks").associate_access_policy(
            clusterName=cluster,
            principalArn=principal,
            policyArn=ADMIN_POLICY,
            accessScope={"type": "cluster"},
        )
    except AWS_FAILURES as exc:
        raise translate(exc, f"associating {ADMIN_POLICY} with {principal} on {cluster}") from exc


def has_admin(policies: list[tuple[str, str]] | None) -> bool:
    return (ADMIN_POLICY, "cluster") in (policies or [])


def _access(session: AwsSession, eks: Any, facts: Facts, grant: bool) -> None:
    """The caller's access entry, then the policies associated with it: two separate facts,
    since an entry without a policy authenticates the caller and authorizes nothing."""
    name = facts.cluster_name
    entries, facts.access_error = _aws(
        "eks list-access-entries",
        lambda: paginate(eks, "list_access_entries", "accessEntries", clusterName=name),
    )
    facts.access_entries = entries
    principal = facts.caller.principal_arn if facts.caller else None
    if not principal or entries is None:
        return
    if principal not in entries:
        if not grant:
            return
        grant_entry(session, name, principal)
        facts.granted_entry = True
        facts.access_entries = [*entries, principal]
    listed, facts.access_policies_error = _aws(
        "eks list-associated-access-policies",
        lambda: paginate(
            eks,
            "list_associated_access_policies",
            "associatedAccessPolicies",
            clusterName=name,
            principalArn=principal,
        ),
    )
    if listed is None:
        return
    facts.access_policies = sorted(
        (p["policyArn"], (p.get("accessScope") or {}).get("type", "")) for p in listed
    )
    if grant and not has_admin(facts.access_policies):
        grant_policy(session, name, principal)
        facts.granted_policy = True
        facts.access_policies = sorted([*facts.access_policies, (ADMIN_POLICY, "cluster")])


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
    _gather_cluster(session, eks, iam, name, needs, facts, grant)
    if needs.irsa_accounts:
        _gather_irsa(iam, needs, facts)
    _gather_network(ec2, scope, facts)
    _gather_node_role(iam, scope, facts)
    _gather_ami(session, scope, facts)
    if needs.reserved_pools:
        _gather_reservations(session, scope, facts)
    if kube is not None:
        _poll_kube(kube, facts, argocd_namespace, grant_polls, grant_delay, sleep)
    return facts


def _gather_cluster(
    session: AwsSession,
    eks: Any,
    iam: Any,
    name: str,
    needs: StackNeeds,
    facts: Facts,
    grant: bool,
) -> None:
    """The cluster, its access, the agent add-on, installed add-ons and Pod Identity."""
    try:
        facts.cluster = eks.describe_cluster(name=name)["cluster"]
    except AWS_FAILURES as exc:
        if error_code(exc) != "ResourceNotFoundException":
            facts.cluster_error = translate(exc, "eks describe-cluster").message
    if facts.cluster is None:
        return
    _access(session, eks, facts, grant)
    try:
        addon = eks.describe_addon(clusterName=name, addonName=AGENT_ADDON)["addon"]
        facts.addon_status = addon.get("status", "UNKNOWN")
    except AWS_FAILURES as exc:
        if error_code(exc) != "ResourceNotFoundException":
            facts.addon_error = translate(exc, "eks describe-addon").message
    if needs.addons:
        facts.installed_addons, facts.installed_addons_error = _aws(
            "eks describe-addon", lambda: _installed_addons(eks, name, needs.addons)
        )
    assoc, facts.associations_error = _aws(
        "eks list-pod-identity-associations",
        lambda: paginate(eks, "list_pod_identity_associations", "associations", clusterName=name),
    )
    if assoc is not None:
        facts.associations = sorted((a["namespace"], a["serviceAccount"]) for a in assoc)
        wanted = [a for a in assoc if (a["namespace"], a["serviceAccount"]) in needs.pod_identities]
        facts.association_roles = [
            _association_role(eks, iam, name, a) for a in sorted(wanted, key=_sa_of)
        ]


def _gather_irsa(iam: Any, needs: StackNeeds, facts: Facts) -> None:
    """The account's OIDC providers and each IRSA role's trust."""
    providers, facts.oidc_error = _aws(
        "iam list-open-id-connect-providers",
        lambda: iam.list_open_id_connect_providers()["OpenIDConnectProviderList"],
    )
    if providers is not None:
        facts.oidc_providers = [p["Arn"] for p in providers]
    facts.irsa_trusts = [_irsa_trust(iam, sa, role) for sa, role in needs.irsa_roles]


def _gather_network(ec2: Any, scope: StackScope, facts: Facts) -> None:
    """The cluster's own subnets and groups, then those tagged for discovery."""
    if facts.cluster is not None:
        facts.cluster_discovery, facts.cluster_discovery_error = _aws(
            "ec2 describe-subnets/describe-security-groups (the cluster's own)",
            lambda: _cluster_discovery(ec2, facts.cluster or {}),
        )
    tag = [{"Name": f"tag:{DISCOVERY_KEY}", "Values": [scope.network]}]
    facts.discovery_subnets, facts.discovery_error = _aws(
        "ec2 describe-subnets", lambda: paginate(ec2, "describe_subnets", "Subnets", Filters=tag)
    )
    sgs, err = _aws(
        "ec2 describe-security-groups",
        lambda: paginate(ec2, "describe_security_groups", "SecurityGroups", Filters=tag),
    )
    facts.discovery_sgs, facts.discovery_error = sgs, facts.discovery_error or err


def _gather_node_role(iam: Any, scope: StackScope, facts: Facts) -> None:
    """The node role and how many instance profiles carry it."""
    try:
        facts.node_role = iam.get_role(RoleName=scope.node_role)["Role"]
        facts.instance_profiles = len(
            iam.list_instance_profiles_for_role(RoleName=scope.node_role)["InstanceProfiles"]
        )
    except AWS_FAILURES as exc:
        if error_code(exc) != "NoSuchEntity":
            facts.node_role_error = translate(exc, "iam get-role").message


def _gather_reservations(session: AwsSession, scope: StackScope, facts: Facts) -> None:
    """The stack's active capacity reservations."""
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


def _poll_kube(
    kube: KubeClient,
    facts: Facts,
    argocd_namespace: str,
    grant_polls: int,
    grant_delay: float,
    sleep: Any,
) -> None:
    """Read the cluster's API. A fresh entry or policy takes ~30 s to be honoured: poll,
    bounded, only after a grant."""
    for attempt in range(grant_polls if facts.granted else 1):
        if attempt:
            sleep(grant_delay)
        _gather_kube(kube, facts, argocd_namespace)
        if not {facts.endpoint_status, facts.argocd_status} & {401, 403}:
            break


def _irsa_trust(iam: Any, service_account: str, role_name: str) -> IrsaTrust:
    try:
        role = iam.get_role(RoleName=role_name)["Role"]
    except AWS_FAILURES as exc:
        if error_code(exc) == "NoSuchEntity":
            return IrsaTrust(service_account, role_name, None, "no such role")
        return IrsaTrust(service_account, role_name, None, translate(exc, "iam get-role").message)
    return IrsaTrust(service_account, role_name, role.get("AssumeRolePolicyDocument"))


def _cluster_discovery(ec2: Any, cluster: dict[str, Any]) -> dict[str, str]:
    """The discovery tag value on each of the cluster's own subnets and security groups."""
    vpc = cluster.get("resourcesVpcConfig") or {}
    subnet_ids = list(vpc.get("subnetIds") or [])
    group_ids = sorted(
        {*(vpc.get("securityGroupIds") or []), vpc.get("clusterSecurityGroupId") or ""} - {""}
    )
    found: dict[str, str] = {}
    if subnet_ids:
        for subnet in paginate(ec2, "describe_subnets", "Subnets", SubnetIds=subnet_ids):
            value = tags_of(subnet).get(DISCOVERY_KEY)
            if value is not None:
                found[f"subnet {subnet['SubnetId']}"] = value
    if group_ids:
        groups = paginate(ec2, "describe_security_groups", "SecurityGroups", GroupIds=group_ids)
        for group in groups:
            value = tags_of(group).get(DISCOVERY_KEY)
            if value is not None:
                found[f"security group {group['GroupId']}"] = value
    return found


def _sa_of(association: dict[str, Any]) -> str:
    return f"{association['namespace']}/{association['serviceAccount']}"


def _installed_addons(
    eks: Any, cluster: str, wanted: tuple[AddonNeed, ...]
) -> dict[str, dict[str, Any] | None]:
    """eks:DescribeAddon for each add-on the units name; None for one not installed."""
    out: dict[str, dict[str, Any] | None] = {}
    for need in wanted:
        try:
            out[need.name] = eks.describe_addon(clusterName=cluster, addonName=need.name)["addon"]
        except AWS_FAILURES as exc:
            if error_code(exc) != "ResourceNotFoundException":
                raise
            out[need.name] = None
    return out


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
        facts.ami_error = "not read: no cluster version to resolve the alias against"
        facts.ami_unread = True
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
            facts.ami_unread = True
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
        facts.ami_unread = bool(err)


def _gather_kube(kube: KubeClient, facts: Facts, argocd_namespace: str) -> None:
    facts.endpoint_status = facts.argocd_status = None
    facts.endpoint_error = facts.argocd_error = facts.endpoint_hint = ""
    try:
        facts.version = kube.version().get("gitVersion", "?")
    except KubeError as exc:
        facts.endpoint_status, facts.endpoint_error = exc.status, exc.message
        facts.endpoint_hint = exc.hint
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
        facts.argocd_error, facts.argocd_status = exc.message, exc.status
