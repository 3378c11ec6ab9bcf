"""The contract rules for nodes and delivery: discovery tags, the node role, the GPU AMI, root
volume and capacity reservation, and Argo CD (listed in rules.RULES)."""

from __future__ import annotations

from ...model.checks import Finding
from ...model.names import DISCOVERY_KEY
from .context import EVERY_KIND, Context, check, rule
from .facts import (
    ARGOCD_FLOOR,
    ROOT_OVERHEAD_GIB,
    version_of,
)


@rule(
    "discovery-tags",
    severity="required",
    element=f"`{DISCOVERY_KEY}=<networkName>` on at least one private subnet and one security group, and on no public subnet",
    call="`ec2:DescribeSubnets`, `ec2:DescribeSecurityGroups` filtered by the tag",
    fix="tag them (the aws-network component does)",
    why="Karpenter finds no subnet or security group and launches nothing; a tagged public subnet gives GPU nodes public IPs",
)
def discovery_tags(ctx: Context) -> list[Finding]:
    """Discovery tags on private subnets and a security group."""
    facts, scope = ctx.facts, ctx.scope
    checks: list[Finding] = []
    call = f"ec2:DescribeSubnets + ec2:DescribeSecurityGroups tag:{DISCOVERY_KEY}={scope.network}"
    element = f"the {DISCOVERY_KEY}={scope.network} tag on its private subnets and security group"
    if facts.discovery_subnets is None or facts.discovery_sgs is None:
        checks.append(check(element, "unknown", facts.discovery_error, call))
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
            check(
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
def node_role(ctx: Context) -> list[Finding]:
    """Node role with an instance-profile path."""
    facts, scope = ctx.facts, ctx.scope
    checks: list[Finding] = []
    call = f"iam:GetRole {scope.node_role} + iam:ListInstanceProfilesForRole"
    if facts.node_role_error:
        checks.append(
            check(
                f"the node role {scope.node_role}",
                "unknown",
                facts.node_role_error,
                call,
            )
        )
    elif facts.node_role is None:
        checks.append(
            check(
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
            check(
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
def gpu_ami(ctx: Context) -> list[Finding]:
    """GPU AMI alias resolvable."""
    facts, scope = ctx.facts, ctx.scope
    checks: list[Finding] = []
    call = "ssm:GetParameter (EKS optimized AMI) or ec2:DescribeImages owner amazon"
    element = f"a resolvable GPU AMI for alias {scope.gpu_ami_alias}"
    if facts.ami_id:
        checks.append(check(element, "pass", f"{facts.ami_id} ({facts.ami_source})", call))
    else:
        checks.append(
            check(
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
def root_volume(ctx: Context) -> list[Finding]:
    """Root volume fits the model cache."""
    facts, scope = ctx.facts, ctx.scope
    checks: list[Finding] = []
    volume = facts.live_gpu_volume_gib or scope.gpu_root_volume_gib
    cache = scope.model_cache_gib
    call = "EC2NodeClass gpu spec.blockDeviceMappings (cluster, else profile) vs profile modelCacheSize"
    if volume is None or cache is None:
        checks.append(
            check(
                "a GPU root volume that fits the model cache",
                "skipped",
                "sizes not in the profile",
                call,
            )
        )
    else:
        ok = volume >= cache + ROOT_OVERHEAD_GIB
        checks.append(
            check(
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
def capacity_reservation(ctx: Context) -> list[Finding]:
    """Capacity reservation for reserved-only pools (advisory: the pool simply never launches)."""
    facts, scope, needs = ctx.facts, ctx.scope, ctx.needs
    checks: list[Finding] = []
    if needs.reserved_pools:
        pools = ", ".join(needs.reserved_pools)
        call = f"ec2:DescribeCapacityReservations tag:{scope.tag_key}={scope.stack} state=active"
        element = (
            f"an active capacity reservation tagged {scope.tag_key}={scope.stack} (pool {pools})"
        )
        fix = f"tag an ODCR or Capacity Block {scope.tag_key}={scope.stack}, or leave pool {pools} idle"
        if facts.reservations is None:
            checks.append(check(element, "unknown", facts.reservations_error, call, fix))
        else:
            found = [cr["CapacityReservationId"] for cr in facts.reservations]
            checks.append(
                check(
                    element,
                    "pass" if found else "warn",
                    ", ".join(found) or f"none: pool {pools} will not launch nodes",
                    call,
                    "" if found else fix,
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
def argocd(ctx: Context) -> list[Finding]:
    """Argo CD present at the floor version (enroll wires it; it does not install it)."""
    facts = ctx.facts
    kube_used, argocd_namespace = ctx.kube_used, ctx.argocd_namespace
    checks: list[Finding] = []
    if kube_used and facts.version:
        call = f"GET deployments/argocd-server in {argocd_namespace}"
        element = f"Argo CD {ARGOCD_FLOOR[0]}.{ARGOCD_FLOOR[1]}+ in namespace {argocd_namespace}"
        fix = f"install Argo CD {ARGOCD_FLOOR[0]}.{ARGOCD_FLOOR[1]} or later in {argocd_namespace}"
        denied = facts.argocd_status in (401, 403)
        if denied and ctx.access_explains_denial:
            # Not a missing Argo CD: the caller may not look (see access-entry/access-policy).
            what = "access entry" if ctx.entry_missing else "access policy"
            detail = f"HTTP {facts.argocd_status}: explained by the missing {what}; not checked"
            checks.append(check(element, "skipped", detail, call))
        elif denied:
            access_fix = (
                f"give the caller read access to deployments in {argocd_namespace} (its "
                "Kubernetes groups or access policy); Argo CD may well be installed"
            )
            checks.append(check(element, "unknown", facts.argocd_error, call, access_fix))
        elif facts.argocd_error:
            checks.append(check(element, "unknown", facts.argocd_error, call, fix))
        elif facts.argocd_image is None and ctx.install_argocd:
            checks.append(
                check(
                    element,
                    "warn",
                    "argocd-server not found: enroll installs the pinned Argo CD (configs/argocd)",
                    call,
                )
            )
        elif facts.argocd_image is None:
            checks.append(check(element, "fail", "argocd-server not found", call, fix))
        else:
            version = version_of(facts.argocd_image)
            ok = version is None or version >= ARGOCD_FLOOR
            detail = facts.argocd_image + (
                "" if version else " (version not in the tag; not checked)"
            )
            checks.append(check(element, "pass" if ok else "fail", detail, call, "" if ok else fix))
    return checks
