"""Tear a stack down so that nothing billing is left, and prove it against EC2.

Order: workload (drain Karpenter through config: zero its NodePool limits, scale the other
workloads to 0, then wait until EC2 shows no instance of the stack),
then mgmt (preflights that protect data, stop Argo CD from recreating things, authorise and
delete the ACK objects in reverse sync-wave order, release Karpenter's instance profiles, sweep
the orphans that block a VPC delete inside the stack's VPC only, verify, restore Argo CD).

`plan_*` functions are pure: they describe what would happen from the configs and the scope.
Everything that touches AWS or a cluster takes the session or the client explicitly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import botocore.exceptions as bce

from eksinf.model.stack import Stack

from ..errors import CONTRACT, ENVIRONMENT, FAILURE, EksinfError
from ..kube.client import KubeClient, ResourceRef, resource_path
from ..model.configs import of_kind, read_units, resources
from ..model.names import profile_space, variant_space
from . import creds as creds_mod
from .ack import AckObject, ack_accounts, ack_objects
from .scope import StackScope
from .session import (
    AWS_FAILURES,
    AwsSession,
    answer_field,
    aws_errors,
    error_code,
    paginate,
    tags_of,
    translate,
)
from .status import describe_cluster, stack_instances, stack_nat_gateways, stack_vpc_ids

DELETION_POLICY = "services.k8s.aws/deletion-policy"
ARGO_CONTROLLER = ("apps/v1", "StatefulSet", "argocd-application-controller")
# A zero cpu limit stops Karpenter launching any node from the pool; the controller keeps
# running, so the nodes the scaled-down workloads leave empty are consolidated away.
ZERO_LIMITS = ("set-string-path", ["karpenter.sh/v1/NodePool", "spec.limits.cpu", "0"])
Say = Callable[[str], None]


def _quiet(_msg: str) -> None:
    pass


# ---- what the mgmt plane owns (from configs/, never a fixed list) -----------------------------


# ---- checks scoped to the stack ---------------------------------------------------------------


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


# ---- may the caller tear down? ----------------------------------------------------------------

# The AWS calls teardown makes itself, per plane (the ACK controllers delete the rest with their
# own key). One list: the permission preflight simulates exactly these.
TEARDOWN_ACTIONS: dict[str, tuple[str, ...]] = {
    "workload": ("ec2:DescribeInstances",),
    "mgmt": (
        "ec2:DescribeInstances",
        "ec2:DescribeVpcs",
        "ec2:DescribeNatGateways",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeSecurityGroups",
        "ec2:DescribeAddresses",
        "eks:DescribeCluster",
        "iam:ListInstanceProfilesForRole",
        "iam:ListInstanceProfileTags",
        "iam:RemoveRoleFromInstanceProfile",
        "iam:DeleteInstanceProfile",
        "ec2:DeleteNetworkInterface",
        "ec2:DeleteSecurityGroup",
    ),
}


def teardown_actions(planes: tuple[str, ...] | list[str]) -> list[str]:
    return sorted({a for p in planes for a in TEARDOWN_ACTIONS[p]})


def simulation_arn(session: AwsSession) -> str | None:
    """The principal iam:SimulatePrincipalPolicy takes for the caller: a user's ARN as is, an
    assumed-role session's role ARN (with its real path, from iam:GetRole). None for the
    account root, which no policy restricts."""
    caller = session.caller
    if caller.is_root:
        return None
    parts = caller.arn.split(":", 5)
    if len(parts) == 6 and parts[2] == "sts" and parts[5].startswith("assumed-role/"):
        role = parts[5].split("/")[1]
        with aws_errors(f"reading the caller's role {role} (iam get-role)"):
            return answer_field(
                session.client("iam").get_role(RoleName=role), "Role.Arn", "iam get-role"
            )
    if len(parts) == 6 and parts[2] == "iam" and parts[5].startswith(("user/", "role/")):
        return caller.arn
    raise EksinfError(
        f"cannot check what caller {caller.arn} may delete: iam:SimulatePrincipalPolicy "
        "takes an IAM user or role",
        hint="Run teardown as an IAM user or an assumed role (e.g. an SSO permission set).",
        exit_code=CONTRACT,
    )


SIMULATE = "iam simulate-principal-policy"
LIST_PROFILES = "iam list-instance-profiles-for-role"


def denied_actions(session: AwsSession, actions: list[str]) -> dict[str, str]:
    """Action -> decision for each action the caller may not perform (empty: all allowed)."""
    arn = simulation_arn(session)
    if arn is None:
        return {}
    iam = session.client("iam")
    denied: dict[str, str] = {}
    marker: dict[str, str] = {}
    with aws_errors(f"checking what {arn} may do (iam simulate-principal-policy)"):
        for _page in range(100):  # bounded: a few actions fit in one page
            answer = iam.simulate_principal_policy(
                PolicySourceArn=arn, ActionNames=actions, **marker
            )
            for result in answer.get("EvaluationResults", []):
                decision = answer_field(result, "EvalDecision", SIMULATE)
                if decision != "allowed":
                    denied[answer_field(result, "EvalActionName", SIMULATE)] = decision
            if not answer.get("IsTruncated"):
                break
            marker = {"Marker": answer_field(answer, "Marker", SIMULATE)}
    return dict(sorted(denied.items()))


def check_permissions(session: AwsSession, planes: tuple[str, ...]) -> str:
    """Raise a contract violation naming every action teardown needs and may not perform."""
    actions = teardown_actions(planes)
    denied = denied_actions(session, actions)
    if denied:
        raise EksinfError(
            f"caller {session.caller.arn} may not perform {len(denied)} action(s) teardown "
            "needs: " + ", ".join(f"{a} ({d})" for a, d in denied.items()),
            hint="Nothing was deleted. Grant these actions (an identity that could provision "
            "may still be unable to tear down), or run teardown as one that has them.",
            exit_code=CONTRACT,
        )
    return f"caller may perform the {len(actions)} action(s) teardown calls itself"


# ---- steps ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    plane: str
    steps: list[dict[str, str]] = field(default_factory=list)
    final: Leftovers | None = None

    def record(self, step: str, status: str, detail: str, say: Say) -> None:
        self.steps.append({"step": step, "status": status, "detail": detail})
        say(f"[{self.plane}] {step}: {status}: {detail}")

    def as_json(self) -> dict[str, Any]:
        return {
            "plane": self.plane,
            "steps": self.steps,
            "final": self.final.as_json() if self.final else None,
        }


def preflight(
    session: AwsSession,
    scope: StackScope,
    kube: KubeClient | None,
    namespace: str,
    objects: list[AckObject] | None = None,
) -> list[str]:
    """Data-protecting checks, run before anything is deleted. Raises on any failure."""
    notes = [f"caller {session.caller.arn} (account {session.caller.account})"]
    if kube is not None:
        kube.version()
        info = creds_mod.read_secret(kube, namespace)
        if not info.present:
            raise EksinfError(
                f"the ACK controllers have no credentials (Secret {namespace}/"
                f"{creds_mod.SECRET_NAME} missing): deleting now would strand every AWS resource",
                hint="Run `eksinf creds use-existing` (or create-user) first.",
                exit_code=ENVIRONMENT,
            )
        if info.expired:
            raise EksinfError(
                f"the ACK controllers' credentials expired at {info.expires_at}",
                hint="Run `aws sso login && eksinf creds refresh`, then re-run teardown.",
                exit_code=ENVIRONMENT,
            )
        notes.append(f"controllers' key {info.access_key_id} present, not expired")
        accounts = ack_accounts(kube, objects or [])
        other = {a: labels for a, labels in accounts.items() if a != session.caller.account}
        if other:
            account, labels = sorted(other.items())[0]
            raise EksinfError(
                f"account mismatch: ACK built {', '.join(labels[:3])} in account {account}, "
                f"but these credentials are account {session.caller.account}",
                hint="Use the identity of the stack's account (--aws-profile or AWS_PROFILE); "
                "a teardown from another account deletes nothing there and would report clean.",
                exit_code=CONTRACT,
            )
        if accounts:
            notes.append(f"ACK objects built in account {session.caller.account}, as the caller")
    return notes


def wait_for_no_instances(
    session: AwsSession,
    scope: StackScope,
    timeout: float,
    poll: float,
    say: Say,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    deadline = clock() + timeout
    while True:
        left = [i["InstanceId"] for i in stack_instances(session, scope)]
        if not left:
            return
        if clock() >= deadline:
            raise EksinfError(
                f"{len(left)} instance(s) of stack {scope.stack} still running after "
                f"{int(timeout)} s: {', '.join(left)}",
                hint="Deleting the cluster now would orphan them: check the NodePools and "
                "workloads are scaled to 0 through config, then re-run.",
                exit_code=FAILURE,
            )
        say(f"waiting for {len(left)} instance(s) of the stack to terminate: {', '.join(left)}")
        sleep(poll)


def karpenter_profile_path(scope: StackScope) -> str:
    """Karpenter (1.x) creates each EC2NodeClass's instance profile under this IAM path."""
    return f"/karpenter/{scope.region}/{scope.cluster}/"


def is_karpenter_profile(profile: dict[str, Any], tags: dict[str, str], scope: StackScope) -> bool:
    """Karpenter's own profile for this cluster: its path, or the tags it puts on the profile
    (kubernetes.io/cluster/<cluster>, eks:eks-cluster-name) or the stack tag from the
    EC2NodeClass's spec.tags. A profile on the node role without any of these (one a person
    made by hand) is not ours to delete."""
    return (
        str(profile.get("Path", "")).startswith(karpenter_profile_path(scope))
        or scope.tagged_ours(tags)
        or scope.cluster_tag in tags
        or tags.get("eks:eks-cluster-name") == scope.cluster
    )


def node_role_profiles(session: AwsSession, scope: StackScope) -> list[dict[str, Any]]:
    """Karpenter's instance profiles holding the stack's node role.

    Found through iam:ListInstanceProfilesForRole on the node role, never by tags in a list
    answer: AWS documents that ListInstanceProfiles returns no tags (it names GetInstanceProfile
    and ListInstanceProfileTags for them), so a tag filter on it matches nothing on AWS.
    Tags are read per profile with iam:ListInstanceProfileTags, and only when the path alone
    does not say it is Karpenter's. A node role that is already gone holds nothing.
    """
    iam = session.client("iam")
    found = []
    with aws_errors(f"listing the instance profiles of node role {scope.node_role} (iam)"):
        try:
            profiles = paginate(
                iam, "list_instance_profiles_for_role", "InstanceProfiles", RoleName=scope.node_role
            )
        except bce.ClientError as exc:
            if error_code(exc) == "NoSuchEntity":
                return []
            raise
        for profile in profiles:
            tags: dict[str, str] = {}
            if not str(profile.get("Path", "")).startswith(karpenter_profile_path(scope)):
                tags = tags_of(
                    iam.list_instance_profile_tags(
                        InstanceProfileName=answer_field(
                            profile, "InstanceProfileName", LIST_PROFILES
                        )
                    )
                )
            if is_karpenter_profile(profile, tags, scope):
                found.append(profile)
    return sorted(found, key=lambda p: answer_field(p, "InstanceProfileName", LIST_PROFILES))


def release_instance_profiles(session: AwsSession, scope: StackScope) -> list[str]:
    """Karpenter's instance profiles for this cluster hold the node role (its delete fails with
    DeleteConflict until they are gone): remove the role from each, then delete the profile."""
    iam = session.client("iam")
    released = []
    for profile in node_role_profiles(session, scope):
        name = answer_field(profile, "InstanceProfileName", LIST_PROFILES)
        with aws_errors(f"releasing instance profile {name} (iam)"):
            for role in profile.get("Roles", []):
                iam.remove_role_from_instance_profile(
                    InstanceProfileName=name, RoleName=answer_field(role, "RoleName", LIST_PROFILES)
                )
            iam.delete_instance_profile(InstanceProfileName=name)
        released.append(name)
    return released


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


@dataclass
class ArgoHalt:
    """Scale Argo CD's application controller to 0 and remember how to put it back."""

    kube: KubeClient
    namespace: str
    replicas: int | None = None

    @property
    def path(self) -> ResourceRef:
        api, kind, name = ARGO_CONTROLLER
        return resource_path(api, kind, self.namespace, name)

    def stop(self) -> bool:
        current = self.kube.get(self.path)
        if current is None:
            return False
        self.replicas = int(current.get("spec", {}).get("replicas", 1))
        self.kube.patch(self.path, {"spec": {"replicas": 0}})
        return True

    def wait_stopped(
        self,
        timeout: float,
        poll: float,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Scaling to 0 is a request: wait until no controller pod remains (bounded)."""
        pods = resource_path("v1", "Pod", self.namespace)
        selector = f"app.kubernetes.io/name={ARGO_CONTROLLER[2]}"
        deadline = clock() + timeout
        while self.kube.items(pods, selector):
            if clock() >= deadline:
                raise EksinfError(
                    f"Argo CD's application controller still has pods after {int(timeout)} s",
                    hint="Nothing was deleted. Check the StatefulSet, then re-run.",
                    exit_code=FAILURE,
                )
            sleep(poll)

    def restore(self) -> None:
        if self.replicas is not None:
            self.kube.patch(self.path, {"spec": {"replicas": self.replicas}})


def delete_ack_objects(
    kube: KubeClient,
    objects: list[AckObject],
    session: AwsSession,
    scope: StackScope,
    timeout: float,
    poll: float,
    say: Say,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> list[str]:
    """Authorise (deletion-policy annotation), delete in order, and wait for the controllers
    to finish; when the count stalls, sweep the orphans that block the VPC."""
    for obj in objects:
        kube.patch(obj.path, {"metadata": {"annotations": {DELETION_POLICY: "delete"}}})
    for obj in objects:
        kube.delete(obj.path)
    deadline = clock() + timeout
    previous, stalled = -1, 0
    swept: list[str] = []
    while True:
        remaining = [o.label for o in objects if kube.get(o.path) is not None]
        if not remaining:
            return swept
        if clock() >= deadline:
            raise EksinfError(
                f"{len(remaining)} ACK object(s) still present after {int(timeout)} s: "
                + ", ".join(remaining),
                hint="Inspect their status conditions (ACK.Terminal, ACK.Recoverable).",
                exit_code=FAILURE,
            )
        stalled = stalled + 1 if len(remaining) == previous else 0
        previous = len(remaining)
        if stalled and stalled % 6 == 0:
            # Karpenter's profiles hold the node role: its Role object cannot finish before.
            swept += [f"instance profile {p}" for p in release_instance_profiles(session, scope)]
            done, failed = sweep_orphans(session, scope)
            swept += done
            for item in failed:
                say(f"sweep: could not delete {item} (retried at the next sweep)")
        say(f"waiting for {len(remaining)} ACK object(s) to be deleted")
        sleep(poll)


# ---- through config (the hub), when the stack's variant spaces exist ---------------------------


def owns_nodepools(configs: Path, component: str) -> bool:
    """The component that runs Karpenter must keep running while it drains its nodes."""
    return bool(of_kind(resources(read_units(configs, [component])), "NodePool"))


class ConfigPlane(Protocol):
    """What teardown asks of the config hub. flows/teardown.py supplies it from the Hub, so this
    module never imports the hub; None when the stack has no hub."""

    def through(
        self, spaces: list[str], function: str, args: list[str]
    ) -> tuple[list[str], list[str]]:
        """Run a hub function on each existing space and publish. Returns (changed, absent)."""
        ...

    def delete_spaces(self, spaces: list[str]) -> list[str]:
        """Delete the spaces that exist (recursively); return those deleted."""
        ...

    def existing(self, spaces: list[str]) -> list[str]:
        """The spaces of `spaces` that exist."""
        ...


# ---- the whole run -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TeardownPlan:
    planes: tuple[str, ...]
    variant: str
    components: dict[str, tuple[str, ...]]  # plane -> component names
    objects: tuple[AckObject, ...]  # the mgmt plane's ACK objects, in deletion order
    spaces: dict[str, tuple[str, ...]]  # plane -> variant spaces the config steps act on
    nodepool_spaces: tuple[str, ...]  # the workload spaces holding Karpenter's NodePools
    kube_path: Path
    argocd_namespace: str
    ack_namespace: str
    # every deployable component: once none has a space of this variant left, the profile
    # variant sandbox up / hub create-variant made for it goes too (--delete-config)
    deployable: tuple[str, ...] = ()


@dataclass(frozen=True)
class Timing:
    wait_timeout: float  # instances; ACK objects get 2.3x (the control plane takes longest)
    poll: float


def make_plan(
    stack: Stack,
    planes: list[str],
    variant: str,
    kube_path: Path,
    argocd_namespace: str,
    ack_namespace: str,
) -> TeardownPlan:
    configs = stack.configs_dir
    components = {p: tuple(c.name for c in stack.select(plane=p)) for p in planes}
    mgmt = list(components.get("mgmt", ()))
    return TeardownPlan(
        planes=tuple(planes),
        variant=variant,
        components=components,
        objects=tuple(ack_objects(configs, mgmt)),
        spaces={
            # Karpenter's own space keeps running: it is what removes the nodes.
            "workload": tuple(
                variant_space(c, variant)
                for c in components.get("workload", ())
                if not owns_nodepools(configs, c)
            ),
            "mgmt": tuple(variant_space(c, variant) for c in mgmt if ack_objects(configs, [c])),
        },
        nodepool_spaces=tuple(
            variant_space(c, variant)
            for c in components.get("workload", ())
            if owns_nodepools(configs, c)
        ),
        kube_path=kube_path,
        argocd_namespace=argocd_namespace,
        ack_namespace=ack_namespace,
        deployable=tuple(c.name for c in stack.components if c.plane != "hub"),
    )


def plan_lines(plan: TeardownPlan, scope: StackScope) -> list[str]:
    lines: list[str] = [
        "preflight: iam:SimulatePrincipalPolicy on the caller for "
        + ", ".join(teardown_actions(plan.planes))
        + " (anything not allowed stops the teardown before it starts, exit 3)"
    ]
    if "workload" in plan.planes:
        lines += [
            "workload: preflight: caller identity",
            "workload: stop Karpenter launching through config: set-string-path "
            f"{' '.join(ZERO_LIMITS[1])} and publish on "
            f"{', '.join(plan.nodepool_spaces) or '(no NodePool spaces)'}",
            "workload: drain through config: set-replicas 0 and publish on "
            f"{', '.join(plan.spaces['workload']) or '(no workload spaces)'} "
            "(the space running Karpenter keeps running so it can remove the emptied nodes)",
            "workload: wait until EC2 shows no pending/running instance tagged "
            f"{scope.tag_text}, {scope.cluster_tag} or eks:cluster-name={scope.cluster}",
        ]
    if "mgmt" in plan.planes:
        lines += [
            "mgmt: preflight: caller identity, the account ACK built the stack in (from the "
            "ACK objects' status), no Karpenter node left, and the "
            f"controllers' Secret on {plan.kube_path} (present, not expired) before anything "
            "is deleted",
            "mgmt: authorise deletion through config: set-annotation "
            f"{DELETION_POLICY}=delete on {', '.join(plan.spaces['mgmt']) or '(no mgmt spaces)'}",
            "mgmt: stop Argo CD's application controller (scale to 0) so nothing is recreated",
            f"mgmt: delete {len(plan.objects)} ACK object(s), dependents first:",
            *[f"  wave {o.wave:>3}: {o.label}" for o in plan.objects],
            f"mgmt: release Karpenter's instance profiles on node role {scope.node_role} "
            "(iam:ListInstanceProfilesForRole; path "
            f"{karpenter_profile_path(scope)}* or tagged {scope.tag_text}, "
            f"{scope.cluster_tag} or eks:eks-cluster-name={scope.cluster}), also whenever the "
            "ACK deletion stalls",
            f"mgmt: sweep, only inside VPCs tagged {scope.tag_text}: detached ENIs "
            f"tagged {scope.tag_text}, {scope.cluster_tag}=owned or "
            f"{'/'.join(EKS_NAME_TAGS)}={scope.cluster}, or described "
            f"'{eks_control_plane_description(scope)}'; security groups tagged "
            f"{scope.cluster_tag}=owned or {EKS_CLUSTER_NAME_TAG}={scope.cluster} (never by "
            "name); anything else is left and listed as not the stack's",
            "mgmt: verify against EC2 (scoped to the stack) that nothing billing is left; "
            "list idle Elastic IPs",
        ]
    return lines


def karpenter_nodes(session: AwsSession, scope: StackScope) -> list[str]:
    return [
        i["InstanceId"]
        for i in stack_instances(session, scope)
        if "karpenter.sh/nodepool" in tags_of(i)
    ]


def run(
    plan: TeardownPlan,
    session: AwsSession,
    scope: StackScope,
    kube: KubeClient | None,
    config: ConfigPlane | None,
    timing: Timing,
    delete_config: bool,
    say: Say = _quiet,
) -> list[Outcome]:
    say(f"preflight: {check_permissions(session, plan.planes)}")
    for note in preflight(session, scope, kube, plan.ack_namespace, list(plan.objects)):
        say(f"preflight: {note}")
    if plan.planes == ("mgmt",):
        nodes = karpenter_nodes(session, scope)
        if nodes:
            raise EksinfError(
                f"Karpenter nodes of stack {scope.stack} are still running: {', '.join(nodes)}",
                hint="Tear the workload plane down first (eksinf teardown --plane workload "
                "--yes): deleting the cluster does not terminate them.",
                exit_code=CONTRACT,
            )
    outcomes = []
    for plane in plan.planes:
        out = Outcome(plane)
        outcomes.append(out)
        if plane == "workload":
            _drain(plan, session, scope, config, timing, out, say)
        else:
            _mgmt(plan, session, scope, kube, config, timing, out, say)
    if delete_config:
        for out in outcomes:
            if config is None:
                out.record("config", "skipped", "no hub in this stack", say)
                continue
            removed = config.delete_spaces(
                [variant_space(comp, plan.variant) for comp in plan.components[out.plane]]
            )
            if not config.existing([variant_space(c, plan.variant) for c in plan.deployable]):
                removed += [
                    f"{space} (no {plan.variant} variant uses it any more)"
                    for space in config.delete_spaces([profile_space(plan.variant)])
                ]
            out.record("config", "done", f"deleted {', '.join(removed) or 'no spaces'}", say)
    return outcomes


def _drain(plan, session, scope, config, timing, out: Outcome, say: Say) -> None:
    if config is None:
        out.record(
            "drain",
            "skipped",
            "no hub in this stack: zero the NodePool limits and scale the workloads to 0 in "
            "your config",
            say,
        )
    else:
        function, args = ZERO_LIMITS
        done, absent = config.through(list(plan.nodepool_spaces), function, args)
        missing = f"; absent: {', '.join(absent)}" if absent else ""
        out.record(
            "limits",
            "done",
            f"NodePool spec.limits.cpu=0 published on {', '.join(done) or 'none'}{missing}",
            say,
        )
        done, absent = config.through(list(plan.spaces["workload"]), "set-replicas", ["0"])
        missing = f"; absent: {', '.join(absent)}" if absent else ""
        out.record(
            "drain",
            "done",
            f"set-replicas 0 published on {', '.join(done) or 'none'}{missing}",
            say,
        )
    wait_for_no_instances(session, scope, timing.wait_timeout, timing.poll, say)
    out.record("instances", "done", "EC2 shows no instance of the stack", say)


def _mgmt(plan, session, scope, kube, config, timing, out: Outcome, say: Say) -> None:
    if kube is None:
        out.record(
            "ack-objects",
            "skipped",
            f"no management cluster ({plan.kube_path} not found): ACK objects were not "
            "deleted; only what this run can see in AWS is cleaned",
            say,
        )
    else:
        _delete_through_ack(plan, session, scope, kube, config, timing, out, say)
    profiles = release_instance_profiles(session, scope)
    out.record("instance-profiles", "done", ", ".join(profiles) or "none of the stack's", say)
    done, failed = sweep_orphans(session, scope)
    out.record(
        "sweep",
        "partial" if failed else "done",
        "; ".join(done + failed) or "no orphans in the stack VPC",
        say,
    )
    out.final = leftovers(session, scope)


def _delete_through_ack(plan, session, scope, kube, config, timing, out: Outcome, say: Say) -> None:
    if config is not None:
        done, _ = config.through(
            list(plan.spaces["mgmt"]), "set-annotation", [DELETION_POLICY, "delete"]
        )
        out.record(
            "authorise",
            "done",
            f"deletion-policy=delete published on {', '.join(done) or 'none'}",
            say,
        )
    else:
        out.record(
            "authorise", "direct", "no hub: each object is annotated once Argo CD is stopped", say
        )
    halt = ArgoHalt(kube, plan.argocd_namespace)
    stopped = halt.stop()
    out.record(
        "argocd",
        "stopped" if stopped else "absent",
        f"application controller replicas {halt.replicas} -> 0"
        if stopped
        else "no application controller found",
        say,
    )
    deleted = False
    try:
        if stopped:
            halt.wait_stopped(180, min(timing.poll, 10))
        swept = delete_ack_objects(
            kube, list(plan.objects), session, scope, timing.wait_timeout * 2.3, timing.poll, say
        )
        deleted = True
        extra = f"; swept {', '.join(swept)}" if swept else ""
        out.record("ack-objects", "done", f"{len(plan.objects)} deleted{extra}", say)
    finally:
        if stopped and not deleted:
            halt.restore()
            out.record("argocd", "restored", "nothing was deleted, so the controller is back", say)
    if stopped:
        out.record(
            "argocd",
            "left stopped",
            "restoring it now would recreate what was just deleted from the published config; "
            "after deleting the mgmt config, scale statefulset/argocd-application-controller in "
            f"{plan.argocd_namespace} back to {halt.replicas}",
            say,
        )
