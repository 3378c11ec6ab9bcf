"""The hyperpod-eks contract (issue 17): every HyperPod rule called directly with facts, no AWS.
One good set of facts passes every rule; each case breaks one fact and names the status the
rule must report, and the issue's field failures each fail the right check with its fix.

Facts are in the response shapes of botocore's service models (sagemaker 2017-07-24
DescribeCluster / ListClusterNodes, eks DescribeAddon, iam GetRole / SimulatePrincipalPolicy)
and of the operator's chart (aws/sagemaker-hyperpod-cli, helm_chart/HyperPodHelmChart/charts/
inference-operator at 011ca927123e: the controller-manager Deployment in
hyperpod-inference-system, its manager container's HYPERPOD_CLUSTER_ARN env var, the add-on
configuration keys hyperpodClusterArn, executionRoleArn, tlsCertificateS3Bucket, alb.*).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from test_contract_rules import CURRENT, NEEDS, OLD, SCOPE, good, irsa_trust_doc

from eksinf.aws.contract import evaluate, markdown, rules_for
from eksinf.aws.contract.hyperpod import (
    INFERENCE_POLICY,
    HyperPodFacts,
    RoleFacts,
    role_checks,
)
from eksinf.aws.contract.rules import RULES, Context
from eksinf.model.targets import KINDS

HP_ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/abcdef123456"
EKS_ARN = "arn:aws:eks:us-west-2:111122223333:cluster/demo"
ROLE = "demo-hyperpod-inference"
BUCKET = "demo-hyperpod-tls"
ALB_ROLE_ARN = "arn:aws:iam::111122223333:role/demo-alb"
ACCOUNT = "hyperpod-inference-controller-manager"


def like_trust(host: str, sub: str) -> dict:
    return {
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Federated": f"arn:aws:iam::1:oidc-provider/{host}"},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {
                    "StringLike": {f"{host}:sub": sub, f"{host}:aud": "sts.amazonaws.com"}
                },
            }
        ]
    }


def controller(arn: str | None = HP_ARN, available: str = "True") -> dict:
    env = [{"name": "AWS_REGION", "value": "us-west-2"}]
    if arn is not None:
        env.append({"name": "HYPERPOD_CLUSTER_ARN", "value": arn})
    return {
        "metadata": {"name": ACCOUNT, "namespace": "hyperpod-inference-system"},
        "spec": {
            "template": {
                "spec": {
                    "serviceAccountName": ACCOUNT,
                    "containers": [{"name": "manager", "env": env}],
                }
            }
        },
        "status": {"conditions": [{"type": "Available", "status": available}]},
    }


def config(**changes) -> dict:
    base = {
        "hyperpodClusterArn": HP_ARN,
        "executionRoleArn": f"arn:aws:iam::111122223333:role/{ROLE}",
        "tlsCertificateS3Bucket": f"s3://{BUCKET}",
        "inferenceGateway": {"enabled": False},
        "alb": {"enabled": True, "serviceAccount": {"create": True, "roleArn": ALB_ROLE_ARN}},
    }
    base.update(changes)
    return base


def node(group: str, kind: str, status: str = "Running") -> dict:
    return {
        "InstanceGroupName": group,
        "InstanceId": f"i-{group}",
        "InstanceType": kind,
        "LaunchTime": "2026-12-01T00:00:00Z",
        "InstanceStatus": {"Status": status},
    }


def good_hp() -> HyperPodFacts:
    """A working HyperPod cluster. DescribeCluster carries no InferenceConfig (botocore's model
    has none; working clusters answer without it)."""
    cfg = config()
    return HyperPodFacts(
        name="demo-hp",
        instance_type="ml.g5.2xlarge",
        execution_role_name=ROLE,
        tls_bucket=BUCKET,
        addon_version="v1.0.0-eksbuild.1",
        eks_arn=EKS_ARN,
        issuer=CURRENT,
        cluster={
            "ClusterArn": HP_ARN,
            "ClusterName": "demo-hp",
            "ClusterStatus": "InService",
            "Orchestrator": {"Eks": {"ClusterArn": EKS_ARN}},
            "InstanceGroups": [
                {"InstanceGroupName": "cpu", "InstanceType": "ml.m7g.xlarge", "CurrentCount": 1},
                {"InstanceGroupName": "gpu", "InstanceType": "ml.g5.2xlarge", "CurrentCount": 1},
            ],
        },
        nodes=[node("cpu", "ml.m7g.xlarge"), node("gpu", "ml.g5.2xlarge")],
        addon={
            "addonName": "amazon-sagemaker-hyperpod-inference",
            "clusterName": "demo",
            "status": "ACTIVE",
            "addonVersion": "v1.0.0-eksbuild.1",
            "configurationValues": json.dumps(cfg),
        },
        config=cfg,
        controllers=[controller()],
        alb_namespaces=["hyperpod-inference-system", "kube-system"],
        webhook_namespace="hyperpod-inference-system",
        execution_role=RoleFacts(
            ROLE,
            irsa_trust_doc(CURRENT, f"system:serviceaccount:hyperpod-inference-system:{ACCOUNT}"),
            (INFERENCE_POLICY,),
            {f"{a} {r}": "allowed" for a, r in role_checks(BUCKET)},
        ),
        alb_role=RoleFacts(
            "demo-alb", like_trust(CURRENT, "system:serviceaccount:*:aws-load-balancer-controller")
        ),
    )


def judge(name: str, hp: HyperPodFacts) -> list:
    (entry,) = [r for r in RULES if r.name == name]
    return entry.run(Context(good(), SCOPE, NEEDS, True, "argocd", hyperpod=hp))


def with_config(hp: HyperPodFacts, **changes) -> HyperPodFacts:
    cfg = config(**changes)
    return replace(
        hp, config=cfg, addon={**(hp.addon or {}), "configurationValues": json.dumps(cfg)}
    )


def hp_rules() -> list[str]:
    """The rules only a hyperpod-eks target gets (the shared ones are test_contract_rules's)."""
    return [r.name for r in rules_for("hyperpod-eks") if "eks" not in r.kinds]


BROKEN: dict[str, tuple[Callable[[HyperPodFacts], HyperPodFacts], str]] = {
    "hyperpod-cluster": (lambda h: replace(h, cluster={**(h.cluster or {}), "ClusterStatus": "Creating"}), "fail"),
    "hyperpod-orchestrator": (
        lambda h: replace(h, cluster={**(h.cluster or {}), "Orchestrator": {"Eks": {"ClusterArn": EKS_ARN + "-old"}}}),
        "fail",
    ),
    "hyperpod-instance-groups": (lambda h: replace(h, nodes=[node("cpu", "ml.m7g.xlarge")]), "fail"),
    "inference-addon": (lambda h: replace(h, addon={**(h.addon or {}), "addonVersion": "v0.9.0-eksbuild.1"}), "fail"),
    "addon-cluster-arn": (lambda h: with_config(h, hyperpodClusterArn=""), "fail"),
    "addon-execution-role": (lambda h: with_config(h, executionRoleArn="arn:aws:iam::1:role/other"), "fail"),
    "addon-tls-bucket": (lambda h: with_config(h, tlsCertificateS3Bucket="other-bucket"), "fail"),
    "addon-gateway": (lambda h: with_config(h, inferenceGateway=None), "fail"),
    "inference-controller": (lambda h: replace(h, controllers=[controller(available="False")]), "fail"),
    "inference-role-trust": (
        lambda h: replace(h, execution_role=replace(h.execution_role, trust=irsa_trust_doc(OLD, f"system:serviceaccount:hyperpod-inference-system:{ACCOUNT}"))),
        "fail",
    ),
    "alb-role-trust": (
        lambda h: replace(h, alb_role=replace(h.alb_role, trust=like_trust(CURRENT, "system:serviceaccount:kube-system:aws-load-balancer-controller"))),
        "fail",
    ),
    "inference-role-policies": (lambda h: replace(h, execution_role=replace(h.execution_role, attached=())), "fail"),
}  # fmt: skip


def test_every_hyperpod_rule_has_a_direct_case() -> None:
    assert hp_rules() == list(BROKEN)


@pytest.mark.parametrize("name", list(BROKEN))
def test_rule_passes_good_facts_and_flags_the_broken_one(name: str) -> None:
    (check,) = judge(name, good_hp())
    assert check.status == "pass", check
    breaks, status = BROKEN[name]
    (check,) = judge(name, breaks(good_hp()))
    assert check.status == status, check
    assert check.fix and check.element and check.call


def test_a_working_cluster_conforms_and_inference_config_is_never_judged() -> None:
    """DescribeCluster's InferenceConfig is absent (or null) on working clusters: no check
    reads it, so a working cluster conforms either way."""
    for cluster_extra in ({}, {"InferenceConfig": None}):
        hp = good_hp()
        hp = replace(hp, cluster={**(hp.cluster or {}), **cluster_extra})
        checks = evaluate(
            good(), SCOPE, NEEDS, True, "argocd", kind=KINDS["hyperpod-eks"], hyperpod=hp
        )
        assert [c.name for c in checks if c.status != "pass"] == []
        assert [c.name for c in checks] == [r.name for r in rules_for("hyperpod-eks")]
    assert not any("InferenceConfig" in r.call or "InferenceConfig" in r.element for r in RULES)


def test_karpenter_elements_are_not_asked_of_a_hyperpod_cluster() -> None:
    names = {r.name for r in rules_for("hyperpod-eks")}
    assert not names & {"discovery-tags", "node-role", "gpu-ami", "pod-identity-associations"}
    assert {"cluster-active", "access-entry", "access-policy", "argocd"} <= names


def test_empty_cluster_arn_fails_the_addon_and_the_controller_with_their_fix() -> None:
    """The console's Quick Install path: hyperpodClusterArn empty, the controller crash-loops
    with `HYPERPOD_CLUSTER_ARN environment variable not set`."""
    hp = replace(with_config(good_hp(), hyperpodClusterArn=""), controllers=[controller(arn="")])
    (addon,) = judge("addon-cluster-arn", hp)
    (ctrl,) = judge("inference-controller", hp)
    assert addon.status == ctrl.status == "fail"
    assert "empty" in addon.detail and "hyperpodClusterArn" in addon.fix
    assert "HYPERPOD_CLUSTER_ARN is not set" in ctrl.detail and "hyperpodClusterArn" in ctrl.fix
    assert addon.blocks and ctrl.blocks


def test_stale_cluster_arn_names_both_arns() -> None:
    """An ACTIVE add-on whose hyperpodClusterArn names a deleted cluster wedges a recreate."""
    stale = "arn:aws:sagemaker:us-west-2:111122223333:cluster/000000000000"
    hp = replace(
        with_config(good_hp(), hyperpodClusterArn=stale), controllers=[controller(arn=stale)]
    )
    (addon,) = judge("addon-cluster-arn", hp)
    (ctrl,) = judge("inference-controller", hp)
    assert addon.status == ctrl.status == "fail"
    assert stale in addon.detail and HP_ARN in addon.detail and "recreate" in addon.detail
    assert f"HYPERPOD_CLUSTER_ARN={stale}, not {HP_ARN}" in ctrl.detail
    (status,) = judge("inference-addon", hp)
    assert status.status == "pass"  # the add-on itself stays ACTIVE: only the ARN check sees it


def test_alb_trust_pinned_to_one_namespace_fails_and_names_the_webhook_namespace() -> None:
    pinned = like_trust(CURRENT, "system:serviceaccount:kube-system:aws-load-balancer-controller")
    hp = good_hp()
    hp = replace(hp, alb_role=replace(hp.alb_role, trust=pinned))
    (check,) = judge("alb-role-trust", hp)
    assert check.status == "fail"
    assert "hyperpod-inference-system" in check.detail  # the other controller's namespace
    assert "webhook served from hyperpod-inference-system" in check.detail
    assert "system:serviceaccount:*:aws-load-balancer-controller" in check.fix
    (ok,) = judge("alb-role-trust", good_hp())
    assert "admits any namespace" in ok.detail


def test_alb_trust_on_an_old_issuer_fails() -> None:
    hp = good_hp()
    stale = like_trust(OLD, "system:serviceaccount:*:aws-load-balancer-controller")
    (check,) = judge("alb-role-trust", replace(hp, alb_role=replace(hp.alb_role, trust=stale)))
    assert check.status == "fail"


def test_instance_groups_need_cpu_and_gpu_capacity() -> None:
    hp = good_hp()
    only_gpu = replace(hp, nodes=[node("gpu", "ml.g5.2xlarge")])
    (check,) = judge("hyperpod-instance-groups", only_gpu)
    assert check.status == "fail" and "no CPU instance group" in check.detail
    pending = replace(
        hp, nodes=[node("cpu", "ml.m7g.xlarge"), node("gpu", "ml.g5.2xlarge", "Pending")]
    )
    (check,) = judge("hyperpod-instance-groups", pending)
    assert check.status == "fail" and "no instance group of ml.g5.2xlarge" in check.detail


def test_an_absent_addon_fails_once_and_the_config_rules_stay_quiet() -> None:
    hp = replace(good_hp(), addon=None, config=None)
    (check,) = judge("inference-addon", hp)
    assert (check.status, check.detail) == ("fail", "not installed")
    for name in ("addon-cluster-arn", "addon-execution-role", "addon-tls-bucket", "addon-gateway"):
        assert judge(name, hp) == []


def test_an_unreadable_sagemaker_answer_is_unknown_and_blocks() -> None:
    hp = replace(
        good_hp(), cluster=None, cluster_error="AccessDeniedException: sagemaker:DescribeCluster"
    )
    (check,) = judge("hyperpod-cluster", hp)
    assert (check.status, check.blocks) == ("unknown", True)


def test_role_policies_name_each_missing_permission() -> None:
    hp = good_hp()
    decisions = dict(hp.execution_role.decisions)
    decisions["acm:AddTagsToCertificate *"] = "implicitDeny"
    (check,) = judge(
        "inference-role-policies",
        replace(hp, execution_role=replace(hp.execution_role, decisions=decisions)),
    )
    assert check.status == "fail" and "acm:AddTagsToCertificate on *: implicitDeny" in check.detail


def test_hyperpod_doc_is_generated_from_the_table() -> None:
    """docs/hyperpod.md's contract table is `rules.markdown("hyperpod-eks")` byte for byte
    (regenerate with `eksinf enroll cluster --kind hyperpod-eks --list-checks --markdown`)."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "hyperpod.md").read_text()
    begin, end = "<!-- checks:begin (generated) -->\n", "<!-- checks:end -->"
    assert begin in doc and end in doc
    assert doc.split(begin, 1)[1].split(end, 1)[0] == markdown("hyperpod-eks")
