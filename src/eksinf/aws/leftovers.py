"""What of a stack is left in AWS, and what in its VPC is not the stack's.

Ownership is decided by exact tags (and EKS's exact description of its control-plane
interfaces), never by a name prefix. `leftovers` is teardown's final check and its plan's
"now billing"; `sweep_orphans` deletes only what `orphans` says is the stack's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .scope import StackScope
from .session import AWS_FAILURES, AwsSession, aws_errors, paginate, tags_of, translate
from .status import describe_cluster, stack_instances, stack_nat_gateways, stack_vpc_ids

# ---- ownership ---------------------------------------------------------------


# How AWS and Kubernetes mark what belongs to one EKS cluster. EKS tags the security group it
# makes for a cluster with both cluster tags (`aws:` keys cannot be set by users); Karpenter and
# EKS tag instances and their interfaces `eks:cluster-name`; the VPC CNI tags each interface it
# makes `cluster.k8s.amazonaws.com/name`; EKS describes its control-plane interfaces
# `Amazon EKS <cluster>`. Only the exact cluster name matches: `<cluster>-blue` is another cluster.
EKS_CLUSTER_NAME_TAG = "aws:eks:cluster-name"
EKS_NAME_TAGS = (EKS_CLUSTER_NAME_TAG, "eks:cluster-name", "cluster.k8s.amazonaws.com/name")
CLUSTER_TAG_PREFIX = "kubernetes.io/cluster/"
DESCRIPTION_SHOWN = 80  # characters of a foreign interface's description quoted in its "why"


def eks_control_plane_description(scope: StackScope) -> str:
    return f"Amazon EKS {scope.cluster}"


@dataclass(frozen=True)
class NotOurs:
    """Something in the stack's VPC that teardown leaves alone, and why it is not the stack's."""

    kind: str  # "ENI" or "security group"
    id: str
    why: str

    @property
    def line(self) -> str:
        return f"{self.kind} {self.id} ({self.why})"

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "id": self.id, "why": self.why}


def cluster_owned(tags: dict[str, str], scope: StackScope, name_tags: tuple[str, ...]) -> bool:
    """Whether a resource's tags say it was made for exactly the stack's cluster.
    `kubernetes.io/cluster/<cluster>=shared` means shared with the cluster, not owned by it."""
    return tags.get(scope.cluster_tag) == "owned" or any(
        tags.get(key) == scope.cluster for key in name_tags
    )


def is_stack_eni(eni: dict[str, Any], scope: StackScope) -> bool:
    """Tagged by the stack, or made by its cluster (its tags or EKS's description say so)."""
    tags = tags_of(eni)
    named = scope.stack_tag_value(tags)
    if named is not None:  # another stack's tag outweighs a cluster of the same name
        return named == scope.stack
    return cluster_owned(tags, scope, EKS_NAME_TAGS) or eni.get(
        "Description"
    ) == eks_control_plane_description(scope)


def shown(text: str) -> str:
    """Text from AWS as it may go on one line of output: quoted when it is not plain."""
    text = text[:DESCRIPTION_SHOWN]
    return text if text.isprintable() and text.strip() == text and text else repr(text)


def not_ours_why(resource: dict[str, Any], scope: StackScope) -> str:
    """One line a reviewer can act on: the other stack or cluster the resource's tags name, or
    that nothing ties it to this stack (with its description and requester, when it has them)."""
    tags = tags_of(resource)
    keys = [k for k in scope.tag_keys if k in tags][:1]
    keys += sorted(k for k in tags if k.startswith(CLUSTER_TAG_PREFIX))
    keys += [k for k in EKS_NAME_TAGS if k in tags]
    if keys:
        return f"tagged {shown(keys[0])}={shown(tags[keys[0]])}"
    why = f"nothing ties it to stack {scope.stack} or cluster {scope.cluster}"
    if resource.get("Description"):
        why += f"; description {shown(str(resource['Description']))}"
    if resource.get("RequesterId"):
        why += f"; requester {shown(str(resource['RequesterId']))}"
    return why


@dataclass(frozen=True)
class Orphans:
    """What blocks a delete of the stack's VPC: the stack's (swept) and the rest (left)."""

    enis: tuple[str, ...]
    security_groups: tuple[str, ...]
    not_ours: tuple[NotOurs, ...]


@dataclass(frozen=True)
class Leftovers:
    instances: tuple[str, ...]
    nat_gateways: tuple[str, ...]
    cluster: str | None
    vpcs: tuple[str, ...]
    detached_enis: tuple[str, ...]
    cluster_sgs: tuple[str, ...]
    idle_eips: tuple[dict[str, Any], ...]
    not_ours: tuple[NotOurs, ...] = ()

    @property
    def billing(self) -> list[str]:
        items = [f"instance {i}" for i in self.instances]
        items += [f"NAT gateway {n}" for n in self.nat_gateways]
        if self.cluster:
            items.append(f"EKS cluster {self.cluster}")
        return items

    @property
    def blockers(self) -> list[str]:
        return [f"detached ENI {e}" for e in self.detached_enis] + [
            f"security group {g}" for g in self.cluster_sgs
        ]

    @property
    def clean(self) -> bool:
        """Nothing of the stack's bills or blocks. What is not the stack's never makes a
        teardown unclean: it is listed, and never deleted."""
        return not self.billing and not self.blockers

    def as_json(self) -> dict[str, Any]:
        return {
            "clean": self.clean,
            "billing": self.billing,
            "blockers": self.blockers,
            "vpcs": list(self.vpcs),
            "idleElasticIPs": list(self.idle_eips),
            "notTheStacks": [n.as_json() for n in self.not_ours],
        }


def orphans(session: AwsSession, scope: StackScope, vpcs: list[str]) -> Orphans:
    """Every detached ENI and security group inside the stack's VPCs, split by ownership.

    A security group is the stack's cluster's only by EKS's exact cluster tags (never by its
    name: `eks-cluster-sg-<cluster>-` is also the prefix of cluster `<cluster>-blue`'s group).
    A group the stack tagged is an ACK object (ACK deletes it), and `default` goes with the VPC:
    neither is listed. An interface is the stack's only if `is_stack_eni` says so."""
    if not vpcs:
        return Orphans((), (), ())
    ec2 = session.client("ec2")
    in_vpc = {"Name": "vpc-id", "Values": vpcs}
    with aws_errors(
        "listing orphans in the stack VPC (ec2 describe-network-interfaces/-security-groups)"
    ):
        enis = paginate(
            ec2,
            "describe_network_interfaces",
            "NetworkInterfaces",
            Filters=[in_vpc, {"Name": "status", "Values": ["available"]}],
        )
        groups = paginate(ec2, "describe_security_groups", "SecurityGroups", Filters=[in_vpc])
    ours_enis, ours_sgs, left = [], [], []
    for eni in enis:
        eni_id = eni.get("NetworkInterfaceId")
        if not isinstance(eni_id, str) or eni.get("VpcId") not in vpcs:
            continue
        if is_stack_eni(eni, scope):
            ours_enis.append(eni_id)
        else:
            left.append(NotOurs("ENI", eni_id, not_ours_why(eni, scope)))
    for group in groups:
        group_id = group.get("GroupId")
        if not isinstance(group_id, str) or group.get("VpcId") not in vpcs:
            continue
        tags = tags_of(group)
        if scope.tagged_ours(tags) or group.get("GroupName") == "default":
            continue
        # EKS tags the group it makes for a cluster with exactly these; the other name tags
        # mark instances and their interfaces.
        if cluster_owned(tags, scope, (EKS_CLUSTER_NAME_TAG,)) and not scope.stack_tag_value(tags):
            ours_sgs.append(group_id)
        else:
            left.append(NotOurs("security group", group_id, not_ours_why(group, scope)))
    return Orphans(
        enis=tuple(sorted(ours_enis)),
        security_groups=tuple(sorted(ours_sgs)),
        not_ours=tuple(sorted(left, key=lambda n: (n.kind, n.id))),
    )


def idle_eips(session: AwsSession, scope: StackScope) -> list[dict[str, Any]]:
    with aws_errors("listing Elastic IPs (ec2 describe-addresses)"):
        addresses = session.client("ec2").describe_addresses().get("Addresses") or []
    return [
        {
            "allocationId": a.get("AllocationId"),
            "publicIp": a.get("PublicIp"),
            "stack": scope.tagged_ours(tags_of(a)),
        }
        for a in sorted(
            (a for a in addresses if isinstance(a, dict)),
            key=lambda a: str(a.get("AllocationId", "")),
        )
        if not a.get("AssociationId")
    ]


def leftovers(session: AwsSession, scope: StackScope) -> Leftovers:
    """What remains of the stack. Any failed query raises: unknown is not clean."""
    vpcs = stack_vpc_ids(session, scope)
    found = orphans(session, scope, vpcs)
    cluster = describe_cluster(session, scope.cluster)
    return Leftovers(
        instances=tuple(i["InstanceId"] for i in stack_instances(session, scope)),
        nat_gateways=tuple(n["NatGatewayId"] for n in stack_nat_gateways(session, scope)),
        cluster=scope.cluster if cluster and cluster.get("status") != "DELETING" else None,
        vpcs=tuple(vpcs),
        detached_enis=found.enis,
        cluster_sgs=found.security_groups,
        idle_eips=tuple(idle_eips(session, scope)),
        not_ours=found.not_ours,
    )


def sweep_orphans(session: AwsSession, scope: StackScope) -> tuple[list[str], list[str]]:
    """Delete the stack's detached ENIs and its cluster's EKS security group in the stack's VPC
    (`orphans` decides what is the stack's; the rest is left). Returns (done, failed)."""
    found = orphans(session, scope, stack_vpc_ids(session, scope))
    ec2 = session.client("ec2")
    done, failed = [], []
    for eni in found.enis:
        try:
            ec2.delete_network_interface(NetworkInterfaceId=eni)
            done.append(f"ENI {eni}")
        except AWS_FAILURES as exc:
            failed.append(f"ENI {eni}: {translate(exc, 'delete').message}")
    for sg in found.security_groups:
        try:
            ec2.delete_security_group(GroupId=sg)
            done.append(f"security group {sg}")
        except AWS_FAILURES as exc:  # retried at the next sweep
            failed.append(f"security group {sg}: {translate(exc, 'delete').message}")
    return done, failed
