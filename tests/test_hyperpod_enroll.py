"""The hyperpod-eks contract gathered through real calls: the EKS cluster, the
HyperPod cluster with its instance groups and nodes, and the IAM roles live in moto; the
stand-ins are only what moto lacks (tests/aws_stubs.py): DescribeCluster's `Orchestrator`
(`SageMakerOrchestratorFake`), EKS add-ons and access entries (`EksExtrasFake`, in botocore's
DescribeAddon shape), iam:SimulatePrincipalPolicy (`IamAsOnAws`) and the Kubernetes API
(`FakeKubeApi`, holding the operator's controller-manager as the chart renders it)."""

from __future__ import annotations

import json

import pytest
import requests
from aws_stubs import EksExtrasFake, FakeKubeApi, IamAsOnAws, SageMakerOrchestratorFake
from test_aws_enroll import ACCOUNT, ARGOCD, CALLER, seed_cluster

from eksinf.aws import contract
from eksinf.aws.contract import hyperpod
from eksinf.aws.scope import StackScope
from eksinf.aws.session import AwsIdentity, AwsSession
from eksinf.kube.client import KubeClient
from eksinf.model.profile import STACK_TAG_KEY, load_profile
from eksinf.model.stack import load_stack
from eksinf.model.targets import KINDS

CONTROLLER = "hyperpod-inference-controller-manager"
DEPLOYMENTS = "/apis/apps/v1/namespaces/hyperpod-inference-system/deployments"


@pytest.fixture
def managed_policies(aws_env, monkeypatch):
    """moto loads AWS managed policies (AmazonSageMakerHyperPodInferenceAccess among them) only
    with MOTO_IAM_LOAD_MANAGED_POLICIES=true; its server runs in this process, so the variable
    applies at the next reset, and is undone (with a reset) afterwards."""
    monkeypatch.setenv("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
    requests.post(f"{aws_env}/moto-api/reset", timeout=60)
    yield aws_env
    monkeypatch.delenv("MOTO_IAM_LOAD_MANAGED_POLICIES")
    requests.post(f"{aws_env}/moto-api/reset", timeout=60)


@pytest.fixture
def stack(stack_dir):
    return load_stack(stack_dir)


@pytest.fixture
def scope(stack) -> StackScope:
    return StackScope.from_profile(load_profile(stack), STACK_TAG_KEY)


def session(scope: StackScope) -> AwsSession:
    return AwsSession(AwsIdentity.resolve(scope.region))


def seed_hyperpod(scope: StackScope, name: str, gpu_type: str = "ml.g5.2xlarge") -> str:
    """A HyperPod cluster in moto with a CPU and a GPU instance group; returns its ARN."""
    groups = [
        {
            "InstanceGroupName": group,
            "InstanceType": kind,
            "InstanceCount": 1,
            "ExecutionRole": f"arn:aws:iam::{ACCOUNT}:role/hp-nodes",
            "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lifecycle/", "OnCreate": "on.sh"},
            "ThreadsPerCore": 1,
        }
        for group, kind in (("controllers", "ml.m5.xlarge"), ("inference", gpu_type))
    ]
    answer = (
        session(scope)
        .client("sagemaker")
        .create_cluster(
            ClusterName=name,
            InstanceGroups=groups,
            VpcConfig={"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]},
        )
    )
    return answer["ClusterArn"]


def seed_roles(scope: StackScope, block, issuer: str, alb_sub: str) -> str:
    iam = session(scope).client("iam")

    def trust(sub: str, op: str = "StringEquals") -> str:
        return json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {
                            "Federated": f"arn:aws:iam::{ACCOUNT}:oidc-provider/{issuer}"
                        },
                        "Action": "sts:AssumeRoleWithWebIdentity",
                        "Condition": {op: {f"{issuer}:sub": sub}},
                    }
                ],
            }
        )

    sub = f"system:serviceaccount:hyperpod-inference-system:{CONTROLLER}"
    iam.create_role(RoleName=block.execution_role_name, AssumeRolePolicyDocument=trust(sub))
    iam.attach_role_policy(RoleName=block.execution_role_name, PolicyArn=hyperpod.INFERENCE_POLICY)
    alb = iam.create_role(RoleName="hp-alb", AssumeRolePolicyDocument=trust(alb_sub, "StringLike"))
    return alb["Role"]["Arn"]


def controller_deployment(arn: str) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": CONTROLLER, "namespace": "hyperpod-inference-system"},
        "spec": {
            "template": {
                "spec": {
                    "serviceAccountName": CONTROLLER,
                    "containers": [
                        {"name": "manager", "env": [{"name": "HYPERPOD_CLUSTER_ARN", "value": arn}]}
                    ],
                }
            }
        },
        "status": {"conditions": [{"type": "Available", "status": "True"}]},
    }


def run(stack, scope, kube, name: str):
    profile = load_profile(stack)
    expected = hyperpod.expected(profile, stack.versions, name)
    client = KubeClient.from_kubeconfig(kube.config, session(scope))
    return contract.check_cluster(
        session(scope),
        scope,
        contract.stack_needs(stack.configs_dir),
        client,
        kind=KINDS["hyperpod-eks"],
        hyperpod=expected,
    )


@pytest.fixture
def kube(tmp_path):
    with FakeKubeApi(token="t0k") as api:
        api.put(
            ARGOCD,
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "argocd-server", "namespace": "argocd"},
                "spec": {"template": {"spec": {"containers": [{"image": "argocd:v3.4.5"}]}}},
            },
        )
        api.config = api.kubeconfig(tmp_path / "given.kubeconfig")
        yield api


def world(stack, scope, kube, monkeypatch, *, arn_in_config=None, alb_sub=None):
    """A HyperPod cluster consumed as AWS's flow leaves it; returns (hyperpod ARN, eks fake)."""
    block = load_profile(stack).hyperpod
    seed_cluster(scope)
    eks = session(scope).client("eks").describe_cluster(name=scope.cluster)["cluster"]
    issuer = eks["identity"]["oidc"]["issuer"].removeprefix("https://")
    hp_arn = seed_hyperpod(scope, block.cluster_name)
    alb_arn = seed_roles(
        scope, block, issuer, alb_sub or "system:serviceaccount:*:aws-load-balancer-controller"
    )
    SageMakerOrchestratorFake({block.cluster_name: eks["arn"]}).install(monkeypatch)
    arn = hp_arn if arn_in_config is None else arn_in_config
    configuration = {
        "hyperpodClusterArn": arn,
        "executionRoleArn": f"arn:aws:iam::{ACCOUNT}:role/{block.execution_role_name}",
        "tlsCertificateS3Bucket": block.tls_bucket,
        "inferenceGateway": {"enabled": False},
        "alb": {"enabled": True, "serviceAccount": {"create": True, "roleArn": alb_arn}},
    }
    fake = EksExtrasFake(
        addons={scope.cluster: {hyperpod.INFERENCE_ADDON: "ACTIVE"}},
        access_entries={scope.cluster: [CALLER]},
        policies={(scope.cluster, CALLER): [(contract.ADMIN_POLICY, "cluster")]},
        addon_fields={
            (scope.cluster, hyperpod.INFERENCE_ADDON): {
                "addonVersion": "v2.1.0-eksbuild.1",  # what the findings' clusters ran
                "configurationValues": json.dumps(configuration),
            }
        },
    ).install(monkeypatch)
    IamAsOnAws().install(monkeypatch)
    kube.put(f"{DEPLOYMENTS}/{CONTROLLER}", controller_deployment(arn))
    accounts = [
        {"metadata": {"name": "aws-load-balancer-controller", "namespace": ns}}
        for ns in ("hyperpod-inference-system", "kube-system")
    ]
    kube.put("/api/v1/serviceaccounts", {"kind": "List", "items": accounts})
    watcher(kube, "inference watcher Enabled")
    kube.put(REGISTRATIONS, {"kind": "List", "items": [registration("CreationCompleted")]})
    return hp_arn, fake


# The operator's view through the API: its Events and every SageMakerEndpointRegistration (the
# fake serves a cluster-wide list as one stored List, as it does for service accounts).
EVENTS = "/api/v1/namespaces/hyperpod-inference-system/events"
REGISTRATIONS = "/apis/inference.sagemaker.aws.amazon.com/v1/sagemakerendpointregistrations"


def watcher(kube, *messages: str) -> None:
    """The operator's watcher Events, one a minute, the last one latest."""
    items = [
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"watcher.{i}", "namespace": "hyperpod-inference-system"},
            "involvedObject": {"kind": "Deployment", "name": CONTROLLER},
            "reason": "Watcher",
            "message": message,
            "type": "Normal",
            "lastTimestamp": f"2026-12-01T00:{i:02d}:00Z",
        }
        for i, message in enumerate(messages)
    ]
    kube.put(EVENTS, {"kind": "EventList", "items": items})


def registration(state: str) -> dict:
    return {
        "apiVersion": "inference.sagemaker.aws.amazon.com/v1",
        "kind": "SageMakerEndpointRegistration",
        "metadata": {"name": "vllm", "namespace": "inference-hyperpod"},
        "status": {"state": state},
    }


def statuses(report) -> dict[str, str]:
    return {c.name: c.status for c in report.checks}


def test_a_consumed_hyperpod_cluster_conforms_without_inference_config(
    stack, scope, kube, monkeypatch, managed_policies
):
    """moto's DescribeCluster carries no InferenceConfig, as on a working cluster."""
    hp_arn, fake = world(stack, scope, kube, monkeypatch)
    report = run(stack, scope, kube, load_profile(stack).hyperpod.cluster_name)
    got = statuses(report)
    assert [n for n, s in got.items() if s != "pass"] == [], [
        c.detail for c in report.checks if c.status != "pass"
    ]
    assert list(got) == [r.name for r in contract.rules_for("hyperpod-eks")]
    assert "describe_addon" in fake.calls
    groups = next(c for c in report.checks if c.name == "hyperpod-instance-groups")
    assert "inference ml.g5.2xlarge x1" in groups.detail  # moto's ListClusterNodes, Running


def test_the_cluster_named_by_arn_is_the_same_cluster(
    stack, scope, kube, monkeypatch, managed_policies
):
    hp_arn, _ = world(stack, scope, kube, monkeypatch)
    report = run(stack, scope, kube, hp_arn)  # --hyperpod-cluster ARN
    assert statuses(report)["hyperpod-cluster"] == "pass"
    assert not report.violations


def test_a_stale_cluster_arn_fails_through_real_calls(
    stack, scope, kube, monkeypatch, managed_policies
):
    stale = f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:cluster/000000000000"
    world(stack, scope, kube, monkeypatch, arn_in_config=stale)
    report = run(stack, scope, kube, load_profile(stack).hyperpod.cluster_name)
    assert {c.name for c in report.violations} == {"addon-cluster-arn", "inference-controller"}
    lines = contract.missing_lines(report)
    assert any(stale in line for line in lines)
    assert any(
        line.startswith("  fix: set hyperpodClusterArn: arn:aws:sagemaker") for line in lines
    )


def test_an_alb_trust_for_one_namespace_fails(stack, scope, kube, monkeypatch, managed_policies):
    world(
        stack, scope, kube, monkeypatch,
        alb_sub="system:serviceaccount:kube-system:aws-load-balancer-controller",
    )  # fmt: skip
    report = run(stack, scope, kube, load_profile(stack).hyperpod.cluster_name)
    assert [c.name for c in report.violations] == ["alb-role-trust"]
    (check,) = report.violations
    assert "hyperpod-inference-system" in check.detail


def test_an_absent_hyperpod_cluster_fails_with_the_consume_fix(
    stack, scope, kube, monkeypatch, managed_policies
):
    world(stack, scope, kube, monkeypatch)
    report = run(stack, scope, kube, "no-such-cluster")
    check = next(c for c in report.checks if c.name == "hyperpod-cluster")
    # moto answers a missing cluster with ValidationException ("Could not find cluster"), AWS
    # with ResourceNotFound: either way it blocks, naming the cluster.
    assert check.status in ("fail", "unknown") and check.blocks
    assert "never creates it" in check.fix


def test_list_checks_by_kind(eksinf, stack_dir):
    """Acceptance: `enroll cluster --kind hyperpod-eks --list-checks` prints the HyperPod
    checks, and none of the Karpenter elements an eks cluster is asked for."""
    result = eksinf(
        "enroll", "cluster", "--kind", "hyperpod-eks", "--list-checks", "--json", cwd=stack_dir
    )
    assert result.code == 0, result.err
    names = [row["name"] for row in json.loads(result.out)["checks"]]
    assert names == [r.name for r in contract.rules_for("hyperpod-eks")]
    assert {"hyperpod-cluster", "addon-cluster-arn", "alb-role-trust"} <= set(names)
    assert "inference-enablement" in names
    assert not {"discovery-tags", "gpu-ami", "node-role"} & set(names)
    text = eksinf("enroll", "cluster", "--kind", "hyperpod-eks", "--list-checks", cwd=stack_dir)
    assert (
        "inference-controller" in text.out and "docs/hyperpod.md#the-hyperpod-contract" in text.out
    )
    eks = json.loads(eksinf("enroll", "cluster", "--list-checks", "--json", cwd=stack_dir).out)
    assert "hyperpod-cluster" not in [row["name"] for row in eks["checks"]]
    wrong = eksinf("enroll", "cluster", "--list-checks", "--hyperpod-cluster", "x", cwd=stack_dir)
    assert wrong.code == 2 and "only for --kind hyperpod-eks" in wrong.err


def enroll_args(kube) -> tuple[str, ...]:
    """`eksinf enroll cluster` of the HyperPod cluster `world` seeds, as target hp."""
    return (
        "enroll",
        "cluster",
        "--name",
        "hp",
        "--kind",
        "hyperpod-eks",
        "--kubeconfig",
        str(kube.config),
    )


def test_enroll_a_hyperpod_cluster_records_its_kind(
    eksinf, stack, stack_dir, scope, kube, monkeypatch, managed_policies
):
    world(stack, scope, kube, monkeypatch)
    import eksinf.model.profile as profile_mod

    real, reads = profile_mod.load_profile, []
    monkeypatch.setattr(
        profile_mod, "load_profile", lambda *a, **k: reads.append(a) or real(*a, **k)
    )
    args = enroll_args(kube)
    result = eksinf(*args, "--json", cwd=stack_dir)
    assert result.code == 0, result.err
    assert len(reads) == 1  # the command's StackContext reads the profile once
    report = json.loads(result.out)
    assert report["conforms"] and report["wiring"]["kind"] == "hyperpod-eks"
    assert "hyperpod-cluster" in [c["name"] for c in report["checks"]]
    from eksinf.hub.local import LocalHub
    from eksinf.model.targets import kind_of

    hub = LocalHub(stack_dir / ".eksinf" / "hub.db")
    assert kind_of(hub.get_space("hp").labels).name == "hyperpod-eks"
    hub.close()


def test_enroll_names_the_stale_arn_and_wires_nothing(
    eksinf, stack, stack_dir, scope, kube, monkeypatch, managed_policies
):
    stale = f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:cluster/000000000000"
    world(stack, scope, kube, monkeypatch, arn_in_config=stale)
    args = enroll_args(kube)
    result = eksinf(*args, cwd=stack_dir)
    assert result.code == 3, result.err
    assert "cluster is missing the add-on's hyperpodClusterArn naming this cluster" in result.out
    assert stale in result.out and "docs/hyperpod.md" in result.err
    assert not (stack_dir / ".eksinf" / "hub.db").exists()


def test_status_lists_and_prices_the_hyperpod_instances(eksinf, stack, stack_dir, scope, aws_env):
    """The HyperPod cluster's instances come from moto's ListClusterNodes; ml.* has no rate in
    the price table, so each is unknown and the total is no total."""
    seed_hyperpod(scope, load_profile(stack).hyperpod.cluster_name)
    result = eksinf("status", "--kind", "hyperpod-eks", "--json", cwd=stack_dir)
    assert result.code == 0, result.err
    body = json.loads(result.out)
    rows = [(i["pool"], i["type"], i["price"]) for i in body["instances"]]
    assert rows == [
        ("instance-group/controllers", "ml.m5.xlarge", "unknown"),
        ("instance-group/inference", "ml.g5.2xlarge", "unknown"),
    ]
    assert body["cost"]["hourly"] is None and body["cost"]["unknownItems"] == 2
    assert "unknown, not zero" in result.err


def test_enroll_waits_while_the_watcher_enables_and_reads_it_again(
    stack, scope, kube, monkeypatch, managed_policies
):
    """The window is polled through the API (no real sleep: the test's `sleep` is where the
    operator moves on), until the watcher reports Enabled."""
    world(stack, scope, kube, monkeypatch)
    watcher(kube, "inference watcher Enabling")
    profile = load_profile(stack)
    client = KubeClient.from_kubeconfig(kube.config, session(scope))
    facts = hyperpod.expected(profile, stack.versions)
    facts.registrations, facts.operator_events = [], []
    hyperpod.gather_enablement(client, facts)
    said, now = [], [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds
        if now[0] >= 60:
            watcher(kube, "inference watcher Enabling", "inference watcher Enabled")

    hyperpod.wait_enablement(client, facts, 1200, 30, said.append, sleep, lambda: now[0])
    state = hyperpod.enablement(facts)
    assert state is not None and state.watcher == "enabled" and now[0] == 60
    assert len(said) == 2 and "watcher is enabling (inference watcher Enabling)" in said[0]


def test_enroll_with_a_stuck_watcher_warns_the_recovery_and_still_enrolls(
    eksinf, stack, stack_dir, scope, kube, monkeypatch, managed_policies
):
    """Warn, never block: enablement follows the cluster, and the recovery is a recreate."""
    world(stack, scope, kube, monkeypatch)
    watcher(
        kube,
        "inference watcher Enabled",
        "inference watcher: Underlying watcher service is being deleted",
    )
    kube.put(REGISTRATIONS, {"kind": "List", "items": [registration("CreationInProgress")]})
    result = eksinf(*enroll_args(kube), "--wait-enablement", "0", cwd=stack_dir)
    assert result.code == 0, result.err
    assert "inference-enablement: watcher stuck" in result.err
    assert "recreate the HyperPod cluster" in result.err
    assert "registration in progress: inference-hyperpod/vllm CreationInProgress" in result.err
    assert "meets the contract; enrolled as hp" in result.out
