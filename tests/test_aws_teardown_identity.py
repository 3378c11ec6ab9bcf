"""Teardown simulates the ACK controllers' identity (the IAM user or role behind the key in
their Secret) for every delete it will ask of them, before anything is changed.

AWS is a moto server; the management cluster is `FakeKubeApi` (aws_stubs.py 3: no Kubernetes API
server here). moto 5.2.5 has no iam:SimulatePrincipalPolicy: only that call is stubbed
(`IamAsOnAws`, aws_stubs.py 4), answering in botocore's response shape from the principal's real
policies in moto. The controllers' key is a real moto user's: sts:GetCallerIdentity (moto's)
names that user."""

from __future__ import annotations

import copy
import json

import pytest
from aws_stubs import IamAsOnAws, iam_caller_as_on_aws
from teardown_kit import ARGO, controllers_key, give_controllers, mgmt_cluster, stack_policy

from eksinf.aws import teardown_iam as tdi
from eksinf.aws.scope import StackScope
from eksinf.aws.session import AwsIdentity, AwsSession
from eksinf.kube.client import KubeClient
from eksinf.model.profile import STACK_TAG_KEY, load_profile
from eksinf.model.stack import load_stack


@pytest.fixture
def iam(aws_env, monkeypatch) -> IamAsOnAws:
    return iam_caller_as_on_aws(monkeypatch)


@pytest.fixture
def scope(stack_dir) -> StackScope:
    return StackScope.from_profile(load_profile(load_stack(stack_dir)), STACK_TAG_KEY)


@pytest.fixture
def mgmt(tmp_path, stack_dir):
    with mgmt_cluster(tmp_path, stack_dir) as api:
        yield api


def without(policy: dict, *actions: str) -> dict:
    """`policy` with `actions` taken out of every statement."""
    doc = copy.deepcopy(policy)
    for stmt in doc["Statement"]:
        if isinstance(stmt["Action"], list):
            stmt["Action"] = [a for a in stmt["Action"] if a not in actions]
    return doc


DENY_DELETE_CLUSTER = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Deny", "Action": "eks:DeleteCluster", "Resource": "*"}],
}


def teardown(eksinf, stack_dir, mgmt, *extra: str):
    return eksinf(
        "teardown",
        "--plane",
        "mgmt",
        "--kubeconfig",
        str(mgmt.config),
        "--poll",
        "0",
        *extra,
        cwd=stack_dir,
    )


def test_every_ack_kind_of_the_stack_has_its_delete_actions(mgmt):
    """The table covers every ACK kind the mgmt plane deploys: none goes unchecked."""
    kinds = {(tdi.ack_service(o), o.kind) for o in mgmt.objects_seeded}
    assert kinds and kinds <= set(tdi.ACK_DELETE_ACTIONS)


def test_the_stacks_scoped_policy_allows_every_delete_the_controllers_perform(stack_dir):
    """Checked with the same matcher the simulator stub uses: the stack's own policy is a fix."""
    from aws_stubs import policy_decision

    policy = stack_policy(stack_dir)
    role = "arn:aws:iam::123456789012:role/inference-demo-node-role"
    for (service, _kind), actions in tdi.ACK_DELETE_ACTIONS.items():
        resource = role if service == "iam" else "*"
        assert {a: policy_decision([policy], a, resource) for a in actions} == dict.fromkeys(
            actions, "allowed"
        )


def test_refuses_when_the_controllers_lack_a_delete_it_needs(eksinf, stack_dir, scope, mgmt, iam):
    """The controllers' user lacks ec2:DeleteNatGateway and iam:DetachRolePolicy, and a second
    policy denies eks:DeleteCluster: exit 3 naming the principal, each missing action (with the
    kinds that need it) and the fix; nothing on the cluster or in AWS is touched."""
    scoped = without(stack_policy(stack_dir), "ec2:DeleteNatGateway", "iam:DetachRolePolicy")
    give_controllers(
        mgmt, controllers_key(scope, {"scoped": scoped, "no-cluster-delete": DENY_DELETE_CLUSTER})
    )
    before = copy.deepcopy(mgmt.objects)
    result = teardown(eksinf, stack_dir, mgmt, "--yes", "--json")
    assert result.code == 3, result.err
    principal = "arn:aws:iam::123456789012:user/ack-controllers"
    assert f"the ACK controllers' identity {principal} may not perform 3 delete action(s)" in (
        result.err
    )
    assert "ec2:DeleteNatGateway (implicitDeny; NATGateway)" in result.err
    assert "iam:DetachRolePolicy (implicitDeny; Role)" in result.err
    assert "eks:DeleteCluster (explicitDeny; Cluster)" in result.err
    assert "aws iam put-user-policy --user-name ack-controllers" in result.err
    assert "file://iam/ack-controllers-policy.json" in result.err
    assert "AmazonEC2FullAccess" in result.err and "explicitDeny stays" in result.err
    body = json.loads(result.out)
    assert body["exit"] == 3 and body["controllers"]["principal"] == principal
    assert body["controllers"]["allowed"] is False
    assert body["controllers"]["missing"] == [
        {"action": "ec2:DeleteNatGateway", "decision": "implicitDeny", "kinds": ["NATGateway"]},
        {"action": "eks:DeleteCluster", "decision": "explicitDeny", "kinds": ["Cluster"]},
        {"action": "iam:DetachRolePolicy", "decision": "implicitDeny", "kinds": ["Role"]},
    ]
    # Before anything: no object deleted or annotated, Argo CD untouched.
    assert mgmt.deletes == [] and not [m for m, _ in mgmt.log if m == "PATCH"]
    assert mgmt.objects == before and mgmt.objects[ARGO]["spec"]["replicas"] == 1
    # The role's deletes were simulated on the role's ARN, the rest on every resource.
    simulated = [kw for name, kw in iam.calls if name == "simulate_principal_policy"]
    ours = [kw for kw in simulated if kw["arn"] == principal]
    assert {kw["resource"] for kw in ours} == {
        "*",
        "arn:aws:iam::123456789012:role/inference-demo-cluster-role",
        "arn:aws:iam::123456789012:role/inference-demo-karpenter-controller",
        "arn:aws:iam::123456789012:role/inference-demo-node-role",
    }


def test_dry_run_shows_the_same_verdict(eksinf, stack_dir, scope, mgmt, iam):
    scoped = without(stack_policy(stack_dir), "ec2:ReleaseAddress")
    give_controllers(mgmt, controllers_key(scope, {"scoped": scoped}))
    before = copy.deepcopy(mgmt.objects)
    text = teardown(eksinf, stack_dir, mgmt, "--dry-run")
    assert text.code == 3, text.err
    assert "iam:SimulatePrincipalPolicy on the ACK controllers' identity" in text.out
    assert (
        "preflight: controllers' identity arn:aws:iam::123456789012:user/ack-controllers may "
        "not perform 1 of the" in text.out
    )
    assert "ec2:ReleaseAddress (implicitDeny) -> teardown refuses (exit 3)" in text.out
    as_json = json.loads(teardown(eksinf, stack_dir, mgmt, "--dry-run", "--json").out)
    assert as_json["changed"] is False and as_json["exit"] == 3
    assert [m["action"] for m in as_json["controllers"]["missing"]] == ["ec2:ReleaseAddress"]
    # --dry-run wins over --yes: the same verdict, nothing done.
    both = teardown(eksinf, stack_dir, mgmt, "--dry-run", "--yes")
    assert both.code == 3 and "ec2:ReleaseAddress" in both.out
    assert mgmt.objects == before and mgmt.deletes == []


def test_passes_when_the_controllers_have_every_delete(eksinf, stack_dir, scope, mgmt, iam):
    give_controllers(mgmt, controllers_key(scope, {"scoped": stack_policy(stack_dir)}))
    plan = teardown(eksinf, stack_dir, mgmt, "--json")
    assert plan.code == 0, plan.err
    verdict = json.loads(plan.out)["controllers"]
    assert verdict["allowed"] is True and verdict["missing"] == []
    assert {"ec2:DeleteVpc", "eks:DeleteCluster", "iam:DeleteRole"} <= set(verdict["actions"])
    done = teardown(eksinf, stack_dir, mgmt, "--yes")
    assert done.code == 0, done.err
    assert "controllers' identity arn:aws:iam::123456789012:user/ack-controllers may perform" in (
        done.err
    )
    assert len(mgmt.deletes) == len(mgmt.objects_seeded)


def test_a_key_that_names_no_iam_user_or_role_stops_before_anything(
    eksinf, stack_dir, scope, mgmt, iam
):
    """moto answers sts:GetCallerIdentity for a key it never issued with its default identity,
    arn:aws:sts::123456789012:user/moto, which no simulation takes: refused, nothing touched."""
    give_controllers(mgmt, {"AccessKeyId": "AKIANOSUCHKEY0000000", "SecretAccessKey": "x"})
    result = teardown(eksinf, stack_dir, mgmt, "--yes")
    assert result.code == 3, result.err
    assert "cannot check what ACK controllers' identity arn:aws:sts::" in result.err
    assert mgmt.deletes == [] and not [m for m, _ in mgmt.log if m == "PATCH"]


def test_an_assumed_role_key_is_simulated_as_its_role(stack_dir, scope, mgmt, iam):
    """Controllers acting through an assumed role are simulated as the role (path included),
    from the role's own policies."""
    session = AwsSession(AwsIdentity.resolve(scope.region))
    client = session.client("iam")
    role = client.create_role(RoleName="ack", Path="/platform/", AssumeRolePolicyDocument="{}")[
        "Role"
    ]
    client.put_role_policy(
        RoleName="ack", PolicyName="scoped", PolicyDocument=json.dumps(stack_policy(stack_dir))
    )
    creds = session.client("sts").assume_role(RoleArn=role["Arn"], RoleSessionName="ack")
    give_controllers(mgmt, creds["Credentials"])
    verdict = tdi.check_controllers(
        session, KubeClient.from_kubeconfig(mgmt.config), "ack-system", mgmt.objects_seeded
    )
    assert ":assumed-role/ack/ack" in verdict.principal
    assert verdict.simulated == role["Arn"] and "/platform/ack" in role["Arn"]
    assert verdict.allowed, verdict.missing
