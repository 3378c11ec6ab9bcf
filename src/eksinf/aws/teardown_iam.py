"""Teardown's IAM half: may the caller, and may the ACK controllers' identity, perform what
teardown asks of them (iam:SimulatePrincipalPolicy), and Karpenter's instance profiles that hold
the stack's node role.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import botocore.exceptions as bce

from ..errors import CONTRACT, ENVIRONMENT, EksinfError
from ..kube.client import KubeClient
from . import creds as creds_mod
from .ack import AckObject
from .scope import StackScope
from .session import AwsSession, Caller, answer_field, aws_errors, error_code, paginate, tags_of

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


def simulation_arn(
    session: AwsSession, caller: Caller | None = None, who: str = "caller"
) -> str | None:
    """The principal iam:SimulatePrincipalPolicy takes for `caller` (default: the session's
    own): a user's ARN as is, an assumed-role session's role ARN (with its real path, from
    iam:GetRole, asked with `session`). None for the account root, which no policy restricts."""
    caller = caller or session.caller
    if caller.is_root:
        return None
    parts = caller.arn.split(":", 5)
    if len(parts) == 6 and parts[2] == "sts" and parts[5].startswith("assumed-role/"):
        role = parts[5].split("/")[1]
        with aws_errors(f"reading the {who}'s role {role} (iam get-role)"):
            return answer_field(
                session.client("iam").get_role(RoleName=role), "Role.Arn", "iam get-role"
            )
    if len(parts) == 6 and parts[2] == "iam" and parts[5].startswith(("user/", "role/")):
        return caller.arn
    raise EksinfError(
        f"cannot check what {who} {caller.arn} may delete: iam:SimulatePrincipalPolicy "
        "takes an IAM user or role",
        hint="Use an IAM user or an assumed role (e.g. an SSO permission set).",
        exit_code=CONTRACT,
    )


SIMULATE = "iam simulate-principal-policy"
LIST_PROFILES = "iam list-instance-profiles-for-role"


def simulate(
    session: AwsSession, arn: str, actions: list[str], resource: str | None = None
) -> dict[str, str]:
    """Action -> decision for each of `actions` that `arn` may not perform, on `resource` (an
    ARN; None: every resource, the simulator's `*`). Empty: all allowed."""
    iam = session.client("iam")
    denied: dict[str, str] = {}
    marker: dict[str, Any] = {"ResourceArns": [resource]} if resource else {}
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
            marker["Marker"] = answer_field(answer, "Marker", SIMULATE)
    return dict(sorted(denied.items()))


def denied_actions(session: AwsSession, actions: list[str]) -> dict[str, str]:
    """Action -> decision for each action the caller may not perform (empty: all allowed)."""
    arn = simulation_arn(session)
    return {} if arn is None else simulate(session, arn, actions)


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


# ---- may the ACK controllers' identity delete what teardown asks of them? ----------------------

# ACK kind -> the AWS actions its controller calls to delete one object: each controller's delete
# (sdkDelete) and the hooks it runs first. An internet gateway is detached from its VPC before it
# is deleted; a security group's rules are revoked first; a cluster is not deleted while
# ListNodegroups names one; a role's managed policies are detached and its inline ones deleted
# first (IAM refuses DeleteRole otherwise). Keyed by (service, kind): the service is the first
# label of the object's API group (ec2.services.k8s.aws -> ec2).
ACK_DELETE_ACTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("ec2", "VPC"): ("ec2:DeleteVpc",),
    ("ec2", "Subnet"): ("ec2:DeleteSubnet",),
    ("ec2", "RouteTable"): ("ec2:DeleteRouteTable",),
    ("ec2", "NATGateway"): ("ec2:DeleteNatGateway",),
    ("ec2", "ElasticIPAddress"): ("ec2:ReleaseAddress",),
    ("ec2", "InternetGateway"): ("ec2:DetachInternetGateway", "ec2:DeleteInternetGateway"),
    ("ec2", "SecurityGroup"): (
        "ec2:RevokeSecurityGroupIngress",
        "ec2:RevokeSecurityGroupEgress",
        "ec2:DeleteSecurityGroup",
    ),
    ("eks", "Cluster"): ("eks:ListNodegroups", "eks:DeleteCluster"),
    ("eks", "Nodegroup"): ("eks:DeleteNodegroup",),
    ("eks", "Addon"): ("eks:DeleteAddon",),
    ("eks", "PodIdentityAssociation"): ("eks:DeletePodIdentityAssociation",),
    ("eks", "AccessEntry"): ("eks:DeleteAccessEntry",),
    ("iam", "Role"): (
        "iam:ListAttachedRolePolicies",
        "iam:DetachRolePolicy",
        "iam:ListRolePolicies",
        "iam:DeleteRolePolicy",
        "iam:DeleteRole",
    ),
}
# What each controller's project recommends its identity be given (its config/iam/), named in
# the fix next to the stack's own scoped policy.
RECOMMENDED = {
    "ec2": "the managed policy arn:aws:iam::aws:policy/AmazonEC2FullAccess",
    "eks": "the eks controller's recommended inline policy (eks:*, iam:GetRole, iam:PassRole)",
    "iam": "the iam controller's recommended inline policy (its role actions included)",
}
STACK_POLICY = "iam/ack-controllers-policy.json"


def ack_service(obj: AckObject) -> str:
    return obj.api_version.split("/")[0].split(".")[0]


def delete_actions(obj: AckObject) -> tuple[str, ...] | None:
    """The AWS actions ACK's controller calls to delete `obj`; None for a kind not in the table."""
    return ACK_DELETE_ACTIONS.get((ack_service(obj), obj.kind))


def resource_arn(live: dict[str, Any], obj: AckObject, account: str) -> str | None:
    """The ARN to simulate the delete on: the one ACK recorded in the object's status, else, for
    an IAM role (whose policies name roles, not `*`), the ARN its spec makes; None: `*`."""
    meta = (live.get("status") or {}).get("ackResourceMetadata") or {}
    if meta.get("arn"):
        return str(meta["arn"])
    if (ack_service(obj), obj.kind) == ("iam", "Role"):
        spec = live.get("spec") or {}
        path = str(spec.get("path") or "/")
        return f"arn:aws:iam::{account}:role{path}{spec.get('name') or obj.name}"
    return None


@dataclass(frozen=True)
class ControllersVerdict:
    """Whether the identity behind the ACK controllers' key may perform every delete teardown
    asks of them."""

    principal: str  # the ARN sts names for the controllers' key
    simulated: str | None  # the principal simulated (a role for an assumed-role key); None: root
    actions: tuple[str, ...]  # every delete action asked of the controllers
    missing: dict[str, str]  # action -> decision, for each not allowed
    kinds: dict[str, tuple[str, ...]]  # action -> the ACK kinds whose delete calls it
    unchecked: tuple[str, ...] = ()  # kinds with no entry in ACK_DELETE_ACTIONS

    @property
    def allowed(self) -> bool:
        return not self.missing

    @property
    def line(self) -> str:
        checked = f"{len(self.actions)} delete action(s) the ACK controllers perform"
        if self.simulated is None:
            text = f"controllers' identity {self.principal} is the account root: {checked} not restricted"
        elif self.allowed:
            text = f"controllers' identity {self.principal} may perform the {checked}"
        else:
            text = (
                f"controllers' identity {self.principal} may not perform {len(self.missing)} "
                f"of the {checked}: " + ", ".join(f"{a} ({d})" for a, d in self.missing.items())
            )
        if self.unchecked:
            text += f"; not checked (no known delete actions): {', '.join(self.unchecked)}"
        return text

    def as_json(self) -> dict[str, Any]:
        return {
            "principal": self.principal,
            "simulatedAs": self.simulated,
            "allowed": self.allowed,
            "actions": list(self.actions),
            "missing": [
                {"action": a, "decision": d, "kinds": list(self.kinds.get(a, ()))}
                for a, d in self.missing.items()
            ],
            "notChecked": list(self.unchecked),
        }

    def error(self) -> EksinfError:
        """The refusal (exit 3): the principal, the missing actions and the fix."""
        who = (self.simulated or self.principal).split(":", 5)[-1]
        kind, _, name = who.partition("/")
        name = name.rsplit("/", 1)[-1]
        put = (
            f"aws iam put-role-policy --role-name {name}"
            if kind == "role"
            else f"aws iam put-user-policy --user-name {name}"
        )
        services = sorted({a.split(":")[0] for a in self.missing})
        return EksinfError(
            f"the ACK controllers' identity {self.simulated or self.principal} may not perform "
            f"{len(self.missing)} delete action(s) teardown would ask of them: "
            + ", ".join(
                f"{a} ({d}; {', '.join(self.kinds.get(a, ()))})" for a, d in self.missing.items()
            ),
            hint="Nothing was deleted (deleting now would leave those objects stuck and their "
            f"AWS resources billing). Attach the stack's scoped policy: {put} --policy-name "
            f"{creds_mod.INLINE_POLICY} --policy-document file://{STACK_POLICY} (what `eksinf "
            "creds create-user` gives its user), or "
            + "; ".join(RECOMMENDED[s] for s in services if s in RECOMMENDED)
            + "; then re-run."
            + (
                " An explicitDeny stays whatever is attached: remove the statement that denies "
                "it (a policy, a permissions boundary or an organisation's SCP)."
                if "explicitDeny" in self.missing.values()
                else ""
            ),
            exit_code=CONTRACT,
            details={"controllers": self.as_json()},
        )


def controllers_caller(session: AwsSession, kube: KubeClient, namespace: str) -> Caller:
    """Who the ACK controllers act as: sts:GetCallerIdentity with the key in their Secret."""
    creds = creds_mod.secret_credentials(kube, namespace)
    if creds is None:
        raise EksinfError(
            f"the ACK controllers have no credentials (Secret {namespace}/"
            f"{creds_mod.SECRET_NAME} missing or holds no key): deleting now would strand every "
            "AWS resource",
            hint="Run `eksinf creds use-existing` (or create-user) first.",
            exit_code=ENVIRONMENT,
        )
    try:
        return AwsSession(session.identity, credentials=creds).caller
    except EksinfError as exc:
        raise EksinfError(
            f"the ACK controllers' key {creds['AccessKeyId']} does not work: {exc.message}",
            hint="Nothing was deleted. Refresh it (`eksinf creds refresh`, or `eksinf creds "
            "create-user`), then re-run.",
            exit_code=ENVIRONMENT,
        ) from exc


def check_controllers(
    session: AwsSession, kube: KubeClient, namespace: str, objects: list[AckObject]
) -> ControllersVerdict:
    """Simulate, for the identity behind the controllers' key, every delete action teardown will
    ask of them for the objects that exist (iam:SimulatePrincipalPolicy, asked by the caller).
    One simulation per resource ARN; the rest are simulated on `*`."""
    caller = controllers_caller(session, kube, namespace)
    if caller.account != session.caller.account:
        raise EksinfError(
            f"account mismatch: the ACK controllers act as {caller.arn} (account "
            f"{caller.account}), but these credentials are account {session.caller.account}",
            hint="Use the identity of the stack's account (--aws-profile or AWS_PROFILE), or "
            "write the controllers a key of that account (`eksinf creds`).",
            exit_code=CONTRACT,
        )
    arn = simulation_arn(session, caller, who="ACK controllers' identity")
    kinds: dict[str, set[str]] = {}
    by_resource: dict[str | None, set[str]] = {}
    unchecked: set[str] = set()
    for obj in objects:
        live = kube.get(obj.path)
        if live is None:
            continue  # already gone: nothing is asked of the controllers for it
        actions = delete_actions(obj)
        if actions is None:
            unchecked.add(f"{ack_service(obj)}/{obj.kind}")
            continue
        for action in actions:
            kinds.setdefault(action, set()).add(obj.kind)
        by_resource.setdefault(resource_arn(live, obj, caller.account), set()).update(actions)
    missing: dict[str, str] = {}
    if arn is not None:
        for resource, asked in sorted(by_resource.items(), key=lambda kv: kv[0] or ""):
            for action, decision in simulate(session, arn, sorted(asked), resource).items():
                if missing.get(action) != "explicitDeny":
                    missing[action] = decision
    return ControllersVerdict(
        principal=caller.arn,
        simulated=arn,
        actions=tuple(sorted(kinds)),
        missing=dict(sorted(missing.items())),
        kinds={a: tuple(sorted(k)) for a, k in sorted(kinds.items())},
        unchecked=tuple(sorted(unchecked)),
    )


# ---- Karpenter's instance profiles -------------------------------------------------------------


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
