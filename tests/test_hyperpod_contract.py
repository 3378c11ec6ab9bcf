"""The hyperpod-eks contract: every HyperPod rule called directly with facts, no AWS.
One good set of facts passes every rule; each case breaks one fact and names the status the
rule must report, and the issue's field failures each fail the right check with its fix.

Facts are in the response shapes of botocore's service models (sagemaker 2017-07-24
DescribeCluster / ListClusterNodes, eks DescribeAddon, iam GetRole / SimulatePrincipalPolicy),
of Kubernetes (core/v1 Event) and of the operator's pinned CRDs (SageMakerEndpointRegistration
status.state and status.conditions) and of the operator's chart (aws/sagemaker-hyperpod-cli, helm_chart/HyperPodHelmChart/charts/
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
    INFERENCE_ADDON,
    INFERENCE_POLICY,
    STUCK_WATCHER,
    HyperPodFacts,
    RoleFacts,
    addon_versions,
    role_checks,
)
from eksinf.aws.contract.rules import RULES, Context
from eksinf.errors import EksinfError
from eksinf.model.addons import SchemaRecord
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


def registration(state: str | None, message: str = "", name: str = "vllm") -> dict:
    """A SageMakerEndpointRegistration as the operator's pinned CRD (v1) shapes its status."""
    status: dict = {}
    if state is not None:
        status["state"] = state
    if message:
        status["conditions"] = [
            {
                "type": "Ready",
                "status": "False",
                "reason": state or "",
                "message": message,
                "lastTransitionTime": "2026-12-01T00:10:00Z",
            }
        ]
    return {
        "apiVersion": "inference.sagemaker.aws.amazon.com/v1",
        "kind": "SageMakerEndpointRegistration",
        "metadata": {"name": name, "namespace": "inference-hyperpod"},
        "status": status,
    }


def event(message: str, when: str = "2026-12-01T00:05:00Z", reason: str = "Watcher") -> dict:
    """A core/v1 Event the operator records in its namespace."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"watcher.{when}", "namespace": "hyperpod-inference-system"},
        "involvedObject": {"kind": "Deployment", "name": ACCOUNT},
        "reason": reason,
        "message": message,
        "type": "Normal",
        "lastTimestamp": when,
    }


KNOWN = ("v1.0.0-eksbuild.1", "v2.1.0-eksbuild.1")


def good_hp() -> HyperPodFacts:
    """A working HyperPod cluster. DescribeCluster carries no InferenceConfig (botocore's model
    has none; working clusters answer without it)."""
    cfg = config()
    return HyperPodFacts(
        name="demo-hp",
        instance_type="ml.g5.2xlarge",
        execution_role_name=ROLE,
        tls_bucket=BUCKET,
        addon_floor="v1.0.0-eksbuild.1",
        addon_known=KNOWN,
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
            "addonVersion": "v2.1.0-eksbuild.1",  # what the findings' clusters ran
            "configurationValues": json.dumps(cfg),
        },
        config=cfg,
        controllers=[controller()],
        alb_namespaces=["hyperpod-inference-system", "kube-system"],
        webhook_namespace="hyperpod-inference-system",
        registrations=[registration("CreationCompleted")],
        operator_events=[
            event("inference watcher Enabling", "2026-12-01T00:01:00Z"),
            event("inference watcher Enabled", "2026-12-01T00:05:00Z"),
        ],
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
    "hyperpod-instance-groups": (
        lambda h: replace(h, cluster={**(h.cluster or {}), "InstanceGroups": (h.cluster or {})["InstanceGroups"][:1]}),
        "fail",
    ),
    "inference-addon": (lambda h: replace(h, addon={**(h.addon or {}), "addonVersion": "v0.9.0-eksbuild.1"}), "fail"),
    "addon-cluster-arn": (lambda h: with_config(h, hyperpodClusterArn=""), "fail"),
    "addon-execution-role": (lambda h: with_config(h, executionRoleArn="arn:aws:iam::1:role/other"), "fail"),
    "addon-tls-bucket": (lambda h: with_config(h, tlsCertificateS3Bucket="other-bucket"), "fail"),
    "addon-gateway": (lambda h: with_config(h, inferenceGateway=None), "fail"),
    "inference-controller": (lambda h: replace(h, controllers=[controller(available="False")]), "fail"),
    "inference-enablement": (lambda h: replace(h, operator_events=[event(STUCK_WATCHER)]), "warn"),
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


def test_a_group_without_a_running_instance_is_waiting_for_capacity_not_a_block() -> None:
    hp = good_hp()
    pending = replace(
        hp, nodes=[node("cpu", "ml.m7g.xlarge"), node("gpu", "ml.g5.2xlarge", "Pending")]
    )
    (check,) = judge("hyperpod-instance-groups", pending)
    assert check.status == "warn" and not check.blocks
    assert "instance group of ml.g5.2xlarge gpu has no running instance: waiting for capacity" in (
        check.detail
    )
    no_cpu_yet = replace(hp, nodes=[node("gpu", "ml.g5.2xlarge")])
    (check,) = judge("hyperpod-instance-groups", no_cpu_yet)
    assert (
        check.status == "warn" and "CPU instance group cpu has no running instance" in check.detail
    )
    checks = evaluate(
        good(), SCOPE, NEEDS, True, "argocd", kind=KINDS["hyperpod-eks"], hyperpod=pending
    )
    assert not [c for c in checks if c.blocks]  # enroll goes ahead


def test_a_fallback_type_with_capacity_serves_and_is_said() -> None:
    """The profile's fallbackInstanceTypes count as the GPU group: the operator deploys on the
    first listed type with a running instance."""
    hp = replace(good_hp(), fallback_instance_types=("ml.g6.2xlarge",))
    groups = [
        {"InstanceGroupName": "cpu", "InstanceType": "ml.m7g.xlarge", "CurrentCount": 1},
        {"InstanceGroupName": "g5", "InstanceType": "ml.g5.2xlarge", "CurrentCount": 0},
        {"InstanceGroupName": "g6", "InstanceType": "ml.g6.2xlarge", "CurrentCount": 1},
    ]
    on_g6 = replace(
        hp,
        cluster={**(hp.cluster or {}), "InstanceGroups": groups},
        nodes=[node("cpu", "ml.m7g.xlarge"), node("g6", "ml.g6.2xlarge")],
    )
    (check,) = judge("hyperpod-instance-groups", on_g6)
    assert check.status == "pass", check.detail
    assert "no running ml.g5.2xlarge: the model falls back to ml.g6.2xlarge" in check.detail
    assert "GPU instance group of ml.g5.2xlarge or ml.g6.2xlarge" in check.element
    only_g6 = replace(
        on_g6, cluster={**(hp.cluster or {}), "InstanceGroups": [groups[0], groups[2]]}
    )
    (check,) = judge("hyperpod-instance-groups", only_g6)
    assert check.status == "pass", check.detail  # no g5 group at all: the fallback's group does
    neither = replace(on_g6, nodes=[node("cpu", "ml.m7g.xlarge")])
    (check,) = judge("hyperpod-instance-groups", neither)
    assert check.status == "warn" and "g5, g6 has no running instance: waiting for capacity" in (
        check.detail
    )
    (first,) = judge("hyperpod-instance-groups", hp)  # the first type runs: nothing to say
    assert first.status == "pass" and "falls back" not in first.detail
    without = replace(good_hp(), cluster=only_g6.cluster, nodes=only_g6.nodes)
    (check,) = judge("hyperpod-instance-groups", without)  # no fallback listed: g6 is not ours
    assert check.status == "fail" and "no instance group of ml.g5.2xlarge" in check.detail


def test_a_missing_group_fails_and_the_fix_warns_update_cluster_replaces_the_whole_set() -> None:
    hp = good_hp()
    groups = [
        {
            "InstanceGroupName": "cpu",
            "InstanceType": "ml.m7g.xlarge",
            "CurrentCount": 1,
            "TargetCount": 2,
            "ExecutionRole": "arn:aws:iam::111122223333:role/hp-nodes",
            "LifeCycleConfig": {"SourceS3Uri": "s3://lifecycle/", "OnCreate": "on.sh"},
            "ThreadsPerCore": 1,
            "Status": "InService",
        }
    ]
    only_cpu = replace(hp, cluster={**(hp.cluster or {}), "InstanceGroups": groups})
    (check,) = judge("hyperpod-instance-groups", only_cpu)
    assert check.status == "fail" and check.blocks
    assert "no instance group of ml.g5.2xlarge" in check.detail
    assert "replaces the whole set of instance groups" in check.fix
    assert "update-cluster --cluster-name demo-hp" in check.fix
    carried = json.loads(check.fix.split("Current set: ", 1)[1].split(". eksinf", 1)[0])
    assert carried == [
        {
            "ExecutionRole": "arn:aws:iam::111122223333:role/hp-nodes",
            "InstanceCount": 2,
            "InstanceGroupName": "cpu",
            "InstanceType": "ml.m7g.xlarge",
            "LifeCycleConfig": {"OnCreate": "on.sh", "SourceS3Uri": "s3://lifecycle/"},
            "ThreadsPerCore": 1,
        }
    ]


def with_version(hp: HyperPodFacts, version: str) -> HyperPodFacts:
    return replace(hp, addon={**(hp.addon or {}), "addonVersion": version})


def test_addon_versions_are_a_floor_plus_known_good_ones() -> None:
    """v2.1.0-eksbuild.1 (the findings' clusters) passes; a newer unknown version passes with an
    advisory; below the floor fails and the fix names the newest known version."""
    (ok,) = judge("inference-addon", good_hp())
    assert (ok.status, ok.fix) == ("pass", "")
    assert ok.detail.startswith("ACTIVE v2.1.0-eksbuild.1")
    (newer,) = judge("inference-addon", with_version(good_hp(), "v2.3.0-eksbuild.2"))
    assert newer.status == "warn" and not newer.blocks
    assert "above the floor v1.0.0-eksbuild.1 but not known to work" in newer.detail
    assert "HYPERPOD_INFERENCE_ADDON_KNOWN" in newer.detail
    (old,) = judge("inference-addon", with_version(good_hp(), "v0.9.0-eksbuild.1"))
    assert old.status == "fail" and old.blocks
    assert "below the floor v1.0.0-eksbuild.1" in old.detail
    assert "--addon-version v2.1.0-eksbuild.1" in old.fix  # an upgrade, never a downgrade
    (odd,) = judge("inference-addon", with_version(good_hp(), "latest"))
    assert odd.status == "fail"


def test_the_addon_configuration_is_checked_against_the_recorded_schema(monkeypatch) -> None:
    """With a schema recorded for the installed version (a test's stand-in schema, not the real
    add-on's), values it refuses fail; without one, the check says none is recorded."""
    (unrecorded,) = judge("inference-addon", good_hp())
    assert "no configuration schema recorded for v2.1.0-eksbuild.1" in unrecorded.detail
    schema = {
        "type": "object",
        "properties": {"inferenceGateway": {"type": "object"}},
        "additionalProperties": False,
    }
    record = SchemaRecord(INFERENCE_ADDON, "v2.1.0-eksbuild.1", json.dumps(schema), "test")
    monkeypatch.setattr(
        "eksinf.aws.contract.hyperpod_rules.load_records",
        lambda: {(INFERENCE_ADDON, "v2.1.0-eksbuild.1"): record},
    )
    (check,) = judge("inference-addon", good_hp())
    assert check.status == "fail"
    assert "configurationValues (top): Additional properties are not allowed" in check.detail


def test_versions_env_must_give_a_floor_and_known_versions_above_it() -> None:
    good_env = {
        "HYPERPOD_INFERENCE_ADDON_FLOOR": "v1.0.0-eksbuild.1",
        "HYPERPOD_INFERENCE_ADDON_KNOWN": "v2.1.0-eksbuild.1, v1.0.0-eksbuild.1",
    }
    assert addon_versions(good_env) == ("v1.0.0-eksbuild.1", KNOWN)
    for broken, words in (
        ({"HYPERPOD_INFERENCE_ADDON_FLOOR": "v1.0.0-eksbuild.1"}, "missing key"),
        ({**good_env, "HYPERPOD_INFERENCE_ADDON_KNOWN": "v0.1.0-eksbuild.1"}, "below the floor"),
        ({**good_env, "HYPERPOD_INFERENCE_ADDON_FLOOR": "1.0"}, "not an EKS add-on version"),
        ({**good_env, "HYPERPOD_INFERENCE_ADDON_KNOWN": " "}, "is empty"),
    ):
        with pytest.raises(EksinfError) as caught:
            addon_versions(broken)
        assert words in caught.value.message and caught.value.exit_code == 3


def enablement_of(**changes) -> object:
    """The inference-enablement check as enroll judges it (evaluate: the table's severity)."""
    checks = evaluate(
        good(),
        SCOPE,
        NEEDS,
        True,
        "argocd",
        kind=KINDS["hyperpod-eks"],
        hyperpod=replace(good_hp(), **changes),
    )
    (check,) = [c for c in checks if c.name == "inference-enablement"]
    return check


def test_enablement_follows_the_operator_watcher_and_never_blocks() -> None:
    enabled = enablement_of()
    assert enabled.status == "pass"
    assert "watcher Enabled (inference watcher Enabled)" in enabled.detail
    assert "1 registration(s) completed" in enabled.detail
    enabling = enablement_of(operator_events=[event("inference watcher Enabling")])
    assert enabling.status == "warn" and not enabling.blocks
    assert "still enabling" in enabling.detail and "--wait-enablement" in enabling.fix
    stuck = enablement_of(
        operator_events=[
            event("inference watcher Enabled", "2026-12-01T00:01:00Z"),
            event(f"enable failed: {STUCK_WATCHER}", "2026-12-01T00:09:00Z"),
        ]
    )
    assert stuck.status == "warn" and not stuck.blocks
    assert f"watcher stuck: enable failed: {STUCK_WATCHER}" in stuck.detail
    assert "recreate the HyperPod cluster" in stuck.fix and "15 minutes" in stuck.fix
    in_conditions = enablement_of(registrations=[registration("CreationFailed", STUCK_WATCHER)])
    assert "watcher stuck" in in_conditions.detail and "recreate" in in_conditions.fix
    unread = enablement_of(registrations=None, enablement_error="GET events: 403")
    assert (unread.status, unread.blocks) == ("unknown", False)


def test_enablement_reports_registrations_in_progress_and_failed() -> None:
    progress = enablement_of(registrations=[registration("CreationInProgress")])
    assert progress.status == "warn"
    assert "registration in progress: inference-hyperpod/vllm CreationInProgress" in progress.detail
    failed = enablement_of(
        registrations=[
            registration("CreationFailed", "AccessDenied: s3:PutObjectTagging", name="a"),
            registration(None, name="b"),
        ]
    )
    assert failed.status == "warn" and not failed.blocks
    assert (
        "registration failed: inference-hyperpod/a CreationFailed: AccessDenied: "
        "s3:PutObjectTagging" in failed.detail
    )
    assert "inference-hyperpod/b no state yet" in failed.detail
    none_yet = enablement_of(registrations=[])
    assert none_yet.status == "pass" and "none is made before a model" in none_yet.detail


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


def test_tls_bucket_permissions_include_object_tagging_and_listing() -> None:
    """The findings' AccessDenied was s3:PutObjectTagging; the operator also lists the bucket."""
    assert ("s3:PutObjectTagging", f"arn:aws:s3:::{BUCKET}/*") in role_checks(BUCKET)
    assert ("s3:ListBucket", f"arn:aws:s3:::{BUCKET}") in role_checks(BUCKET)
    hp = good_hp()
    decisions = dict(hp.execution_role.decisions)
    decisions[f"s3:PutObjectTagging arn:aws:s3:::{BUCKET}/*"] = "implicitDeny"
    decisions[f"s3:ListBucket arn:aws:s3:::{BUCKET}"] = "explicitDeny"
    (check,) = judge(
        "inference-role-policies",
        replace(hp, execution_role=replace(hp.execution_role, decisions=decisions)),
    )
    assert check.status == "fail"
    assert f"s3:PutObjectTagging on arn:aws:s3:::{BUCKET}/*: implicitDeny" in check.detail
    assert f"s3:ListBucket on arn:aws:s3:::{BUCKET}: explicitDeny" in check.detail
    assert "PutObjectTagging" in check.fix and "s3:ListBucket" in check.fix


def test_hyperpod_doc_is_generated_from_the_table() -> None:
    """docs/hyperpod.md's contract table is `rules.markdown("hyperpod-eks")` byte for byte
    (regenerate with `eksinf enroll cluster --kind hyperpod-eks --list-checks --markdown`)."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "hyperpod.md").read_text()
    begin, end = "<!-- checks:begin (generated) -->\n", "<!-- checks:end -->"
    assert begin in doc and end in doc
    assert doc.split(begin, 1)[1].split(end, 1)[0] == markdown("hyperpod-eks")
