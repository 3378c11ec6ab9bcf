"""`eksinf creds` against moto (IAM, STS) and the real kube-apiserver of `kube_plane` (shared by
the session: each test gets its own ACK namespace, through the stack copy's ACK_NAMESPACE)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from eksinf.aws import creds as creds_mod
from eksinf.aws.scope import StackScope
from eksinf.aws.session import AwsIdentity, AwsSession, Caller
from eksinf.errors import EksinfError
from eksinf.kube.client import KubeClient, parse_kubeconfig, resource_path
from eksinf.model.profile import STACK_TAG_KEY, load_profile
from eksinf.model.stack import load_stack

# Used only when the stack's iam/ directory is not there yet: a scoped policy of the same shape.
TEST_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Sid": "Network", "Effect": "Allow", "Action": ["ec2:*", "eks:*"], "Resource": "*"},
        {
            "Sid": "PassRoleToServices",
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": "*",
            "Condition": {
                "StringEquals": {"iam:PassedToService": ["eks.amazonaws.com", "ec2.amazonaws.com"]}
            },
        },
    ],
}


@dataclass
class Cluster:
    """The shared local server, seen through one test's ACK namespace."""

    client: KubeClient
    config: Path
    namespace: str
    plane: Any

    def secret(self) -> dict | None:
        return self.client.get(resource_path("v1", "Secret", self.namespace, "aws-creds"))

    def deployment(self) -> dict:
        ref = resource_path("apps/v1", "Deployment", self.namespace, "ack-ec2-controller")
        found = self.client.get(ref)
        assert found is not None
        return found

    def kubeconfig(self, path: Path, token: str) -> Path:
        path.write_text(yaml.safe_dump(self.plane.kubeconfig(token)))
        return path


@pytest.fixture
def stack(stack_dir):
    iam = stack_dir / "iam"
    if not iam.is_dir():
        iam.mkdir()
        (iam / "ack-controllers-policy.json").write_text(json.dumps(TEST_POLICY, indent=2))
    return stack_dir


@pytest.fixture
def scope(stack) -> StackScope:
    return StackScope.from_profile(load_profile(load_stack(stack)), STACK_TAG_KEY)


@pytest.fixture
def kube(stack, tmp_path, kube_plane, request):
    """A namespace of its own on the real server, holding an ACK controller Deployment (which
    no controller runs here: creds only annotates it), named as the stack's ACK_NAMESPACE."""
    namespace = "creds-" + request.node.name.removeprefix("test_")[:40].replace("_", "-").strip("-")
    versions = stack / "versions.env"
    versions.write_text(
        versions.read_text().replace("ACK_NAMESPACE=ack-system", f"ACK_NAMESPACE={namespace}")
    )
    client = KubeClient.from_auth(parse_kubeconfig(kube_plane.kubeconfig(), Path("."), "plane"))
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    client.delete(resource_path("v1", "Secret", namespace, "aws-creds"))  # a re-run's leftover
    labels = {"app": "ack-ec2-controller"}
    client.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "ack-ec2-controller", "namespace": namespace},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "controller", "image": "ack:test"}]},
                },
            },
        }
    )
    config = tmp_path / "mgmt.kubeconfig"
    config.write_text(yaml.safe_dump(kube_plane.kubeconfig()))
    yield Cluster(client, config, namespace, kube_plane)


def iam_client(scope):
    return AwsSession(AwsIdentity.resolve(scope.region)).client("iam")


def test_create_then_delete_user_leaves_nothing(eksinf, stack, scope, kube, aws_env):
    kc = str(kube.config)
    made = eksinf("creds", "create-user", "--kubeconfig", kc, "--yes", cwd=stack)
    assert made.code == 0, made.err
    iam = iam_client(scope)
    user = f"{scope.stack}-ack"
    keys = iam.list_access_keys(UserName=user)["AccessKeyMetadata"]
    assert len(keys) == 1
    assert iam.list_user_policies(UserName=user)["PolicyNames"] == [creds_mod.INLINE_POLICY]
    secret = kube.secret()
    ini = base64.b64decode(secret["data"]["credentials"]).decode()
    assert ini.startswith("[default]\n") and keys[0]["AccessKeyId"] in ini
    assert secret["metadata"]["annotations"][creds_mod.ANN_SOURCE] == f"iam-user/{user}"
    restarted = kube.deployment()["spec"]["template"]["metadata"]["annotations"]
    assert creds_mod.RESTART_ANNOTATION in restarted

    gone = eksinf("creds", "delete-user", "--kubeconfig", kc, "--yes", cwd=stack)
    assert gone.code == 0, gone.err
    assert user not in [u["UserName"] for u in iam.list_users()["Users"]]
    assert iam.list_policies(Scope="Local")["Policies"] == []
    with pytest.raises(iam.exceptions.NoSuchEntityException):
        iam.list_access_keys(UserName=user)
    assert kube.secret() is None


def test_create_user_rotates_only_its_own_key(eksinf, stack, scope, kube, aws_env):
    kc = str(kube.config)
    assert eksinf("creds", "create-user", "--kubeconfig", kc, "--yes", cwd=stack).code == 0
    iam = iam_client(scope)
    user = f"{scope.stack}-ack"
    first = iam.list_access_keys(UserName=user)["AccessKeyMetadata"][0]["AccessKeyId"]
    foreign = iam.create_access_key(UserName=user)["AccessKey"]["AccessKeyId"]
    again = eksinf("creds", "create-user", "--kubeconfig", kc, "--yes", cwd=stack)
    assert again.code == 0, again.err
    keys = {k["AccessKeyId"] for k in iam.list_access_keys(UserName=user)["AccessKeyMetadata"]}
    assert foreign in keys and first not in keys and len(keys) == 2


def test_create_user_without_yes_changes_nothing(eksinf, stack, scope, kube, aws_env):
    before = kube.deployment()["metadata"]["resourceVersion"]
    result = eksinf("creds", "create-user", "--kubeconfig", str(kube.config), cwd=stack)
    assert result.code == 0
    assert "nothing changed; re-run with --yes" in result.err
    assert iam_client(scope).list_users()["Users"] == []
    assert kube.secret() is None
    assert kube.deployment()["metadata"]["resourceVersion"] == before


def test_create_user_refuses_a_user_of_another_stack(eksinf, stack, scope, kube, aws_env):
    iam_client(scope).create_user(UserName=f"{scope.stack}-ack")  # untagged: not ours
    result = eksinf("creds", "create-user", "--kubeconfig", str(kube.config), "--yes", cwd=stack)
    assert result.code == 3
    assert "is not this stack's" in result.err


def test_create_user_checks_the_cluster_before_minting_a_key(
    eksinf, stack, scope, tmp_path, aws_env
):
    missing = tmp_path / "nowhere.kubeconfig"
    result = eksinf("creds", "create-user", "--kubeconfig", str(missing), "--yes", cwd=stack)
    assert result.code == 4
    assert "no kubeconfig" in result.err
    assert iam_client(scope).list_users()["Users"] == []


def test_use_existing_writes_the_callers_key(eksinf, stack, kube, aws_env):
    result = eksinf("creds", "use-existing", "--kubeconfig", str(kube.config), cwd=stack)
    assert result.code == 0, result.err
    status = eksinf("creds", "status", "--kubeconfig", str(kube.config), "--json", cwd=stack)
    body = json.loads(status.out)
    assert body["present"] and body["accessKeyId"] == "testing" and not body["temporary"]


def test_status_reports_missing_secret(eksinf, stack, kube, aws_env):
    result = eksinf("creds", "status", "--kubeconfig", str(kube.config), cwd=stack)
    assert result.code == 0
    assert "MISSING" in result.out


def test_wrong_cluster_token_is_exit_4(eksinf, stack, kube, tmp_path, aws_env):
    bad = kube.kubeconfig(tmp_path / "bad.kubeconfig", token="wrong")  # the server's 401
    result = eksinf("creds", "status", "--kubeconfig", str(bad), cwd=stack)
    assert result.code == 4
    assert "401" in result.err.splitlines()[0]


def test_root_is_refused(scope, aws_env):
    session = AwsSession(AwsIdentity.resolve(scope.region))
    session.__dict__["caller"] = Caller("123456789012", "arn:aws:iam::123456789012:root", "x")
    with pytest.raises(EksinfError) as err:
        creds_mod.existing_credentials(session)
    assert err.value.exit_code == 3 and "account root" in err.value.message


def test_secret_manifest_is_schema_valid_and_marks_expiry():
    creds = {"AccessKeyId": "ASIAX", "SecretAccessKey": "s", "SessionToken": "t"}
    secret = creds_mod.credentials_secret(creds, "ack-system", "caller/x", "2026-12-01T10:00:00Z")
    kubernetes_validate.validate(secret, "1.31.0", strict=True)
    kubernetes_validate.validate(creds_mod.namespace_manifest("ack-system"), "1.31.0", strict=True)
    assert secret["metadata"]["annotations"][creds_mod.ANN_EXPIRES] == "2026-12-01T10:00:00Z"
    assert "aws_session_token = t" in base64.b64decode(secret["data"]["credentials"]).decode()
    long_lived = creds_mod.credentials_secret(
        {"AccessKeyId": "AKIA", "SecretAccessKey": "s"}, "ack-system", "x", None
    )
    assert creds_mod.ANN_EXPIRES not in long_lived["metadata"]["annotations"]


def test_policy_lint_passes_on_the_stack_policy(stack):
    policy = creds_mod.load_policy(stack)
    assert creds_mod.lint_policy(policy.doc) == []


@pytest.mark.parametrize(
    "statement",
    [
        {"Effect": "Allow", "Action": "iam:PassRole", "Resource": "*"},
        {"Effect": "Allow", "Action": ["iam:*"], "Resource": "*"},
        {"Effect": "Allow", "Action": "iam:Pass*", "Resource": "*"},
        {"Effect": "Allow", "Action": "*", "Resource": "*"},
        {"Effect": "Allow", "NotAction": "s3:*", "Resource": "*"},
        {
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:RequestedRegion": "us-west-2"}},
        },
    ],
)
def test_policy_lint_flags_unconditioned_passrole(statement):
    problems = creds_mod.lint_policy({"Version": "2012-10-17", "Statement": [statement]})
    assert len(problems) == 1 and "iam:PassRole" in problems[0]


def test_policy_lint_accepts_deny_and_conditioned_passrole():
    doc = {
        "Statement": [
            {"Effect": "Deny", "Action": "iam:PassRole", "Resource": "*"},
            {"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"},
            TEST_POLICY["Statement"][1],
        ]
    }
    assert creds_mod.lint_policy(doc) == []


def test_show_policy_refuses_an_unconditioned_passrole(eksinf, stack):
    for f in (stack / "iam").glob("*.json"):
        f.unlink()
    bad = {"Statement": [{"Effect": "Allow", "Action": "iam:PassRole", "Resource": "*"}]}
    (stack / "iam" / "ack-controllers-policy.json").write_text(json.dumps(bad))
    result = eksinf("creds", "show-policy", cwd=stack)
    assert result.code == 3
    assert "without an iam:PassedToService condition" in result.err


def test_delete_user_that_does_not_exist_is_exit_1(eksinf, stack, kube, aws_env):
    result = eksinf("creds", "delete-user", "--user-name", "nobody", "--yes", cwd=stack)
    assert result.code == 1
    assert "no IAM user named nobody" in result.err


def test_missing_policy_is_exit_3(eksinf, stack):
    for f in (stack / "iam").glob("*.json"):
        f.unlink()
    result = eksinf("creds", "show-policy", cwd=stack)
    assert result.code == 3
    assert "expected one IAM policy document" in result.err


def test_probe_gives_up_after_the_bound(scope, aws_env):
    # moto answers any key as its default user, never as the new user: the probe must give up.
    naps = []
    with pytest.raises(EksinfError) as err:
        creds_mod.probe_key(
            AwsIdentity.resolve(scope.region),
            {"AccessKeyId": "AKIANEW", "SecretAccessKey": "x"},
            "arn:aws:iam::123456789012:user/expected",
            attempts=3,
            delay=5,
            sleep=naps.append,
        )
    assert err.value.exit_code == 4 and "never became usable after 3 tries" in err.value.message
    assert naps == [5, 5]


def test_garbage_kubeconfig_is_exit_4(eksinf, stack, tmp_path, aws_env):
    bad = tmp_path / "bad.kubeconfig"
    bad.write_text("clusters: [\n")
    result = eksinf("creds", "status", "--kubeconfig", str(bad), cwd=stack)
    assert result.code == 4
    assert "not a usable kubeconfig" in result.err


def test_eks_token_is_a_presigned_caller_identity_for_the_cluster(scope, aws_env):
    token = AwsSession(AwsIdentity.resolve(scope.region)).eks_token("my-cluster")
    assert token.startswith("k8s-aws-v1.")
    body = token.removeprefix("k8s-aws-v1.")
    url = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
    assert "Action=GetCallerIdentity" in url and "x-k8s-aws-id" in url
    assert "X-Amz-Expires=60" in url
