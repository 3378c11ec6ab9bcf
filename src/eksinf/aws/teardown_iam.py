"""Teardown's IAM half: may the caller, and may the ACK controllers' identity, perform what
teardown asks of them (iam:SimulatePrincipalPolicy), and Karpenter's instance profiles that hold
the stack's node role.
"""

from __future__ import annotations

from typing import Any

import botocore.exceptions as bce

from ..errors import CONTRACT, EksinfError
from .scope import StackScope
from .session import AwsSession, answer_field, aws_errors, error_code, paginate, tags_of

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
