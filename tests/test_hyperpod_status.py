"""`status --plane workload` on a HyperPod target: serving is the pods and the CR's
deployment state, checked with /v1/models; SageMaker endpoint registration is a sub-status.

The InferenceEndpointConfig statuses below are checked against the status schema of the
operator's CRD as pinned (validate.provided, chart 2.2.2): `status.state` is its enum,
`deploymentStatus` needs `name` and `lastUpdated`, `endpoints.sagemaker` needs `state`. The
cluster is `FakeKubeApi` (tests/aws_stubs.py): no Kubernetes API server exists here.
"""

from __future__ import annotations

import copy

import pytest
from aws_stubs import FakeKubeApi
from conftest import REPO

from eksinf.aws import serving
from eksinf.build.validate import structural
from eksinf.build.validate.admission import crds_of
from eksinf.build.validate.provided import cluster_crd_units
from eksinf.kube.client import KubeClient
from eksinf.model.profile import load_profile
from eksinf.model.stack import load_stack

NS = "inference-hyperpod"
CR_PATH = (
    f"/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/{NS}/inferenceendpointconfigs/vllm"
)
POD = "vllm-7d9f-abcde"


def endpoint_config(state: str, overall: str, ready: int, registration: str | None) -> dict:
    status: dict = {
        "state": state,
        "replicas": 1,
        "selector": "app=vllm",
        "deploymentStatus": {
            "name": "vllm",
            "lastUpdated": "2026-12-01T18:00:00Z",
            "deploymentObjectOverallState": overall,
            "status": {"replicas": 1, "readyReplicas": ready, "availableReplicas": ready},
        },
    }
    if registration is not None:
        status["endpoints"] = {"sagemaker": {"state": registration}}
    return {
        "apiVersion": "inference.sagemaker.aws.amazon.com/v1",
        "kind": "InferenceEndpointConfig",
        "metadata": {"name": "vllm", "namespace": NS},
        "spec": {
            "modelName": "inference-demo",
            "endpointName": "inference-demo",
            "instanceType": "ml.g5.2xlarge",
            "replicas": 1,
            "modelSourceConfig": {
                "modelSourceType": "huggingface",
                "huggingFaceModel": {"modelId": "Qwen/Qwen2.5-7B-Instruct-AWQ"},
            },
            "worker": {
                "image": "vllm/vllm-openai:v0.11.0",
                "modelInvocationPort": {"containerPort": 8000},
                "modelVolumeMount": {"name": "model-weights"},
                "resources": {"limits": {"nvidia.com/gpu": 1}},
            },
        },
        "status": status,
    }


def pod(ready: bool) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD, "namespace": NS, "labels": {"app": "vllm"}},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


@pytest.fixture(scope="module")
def iec_schema():
    stack = load_stack(REPO)
    return crds_of(cluster_crd_units(stack))[
        ("inference.sagemaker.aws.amazon.com/v1", "InferenceEndpointConfig")
    ].schema


def admitted(schema: dict, obj: dict) -> dict:
    """The object fits the CRD, status included (so the test speaks the operator's shape)."""
    result = structural.check(schema, copy.deepcopy(obj), lambda rule, value: ("pass", ""))
    assert [v for v in result.violations if v.status == "invalid"] == []
    return obj


MODELS = {"object": "list", "data": [{"id": "Qwen/Qwen2.5-7B-Instruct-AWQ", "object": "model"}]}


def read(tmp_path, cr: dict | None, pods: list[dict], models: dict | None) -> dict:
    stack = load_stack(REPO)
    plan = serving.plan_for(stack.configs_dir, "workload", [serving.HYPERPOD_COMPONENT], "dev")
    assert plan.endpoint_configs and not plan.karpenter and not plan.deployments
    with FakeKubeApi() as api:
        if cr is not None:
            api.put(CR_PATH, cr)
        for p in pods:
            api.put(f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}", p)
        if models is not None:
            api.put(f"/api/v1/namespaces/{NS}/pods/{POD}:8000/proxy/v1/models", models)
        kube = KubeClient.from_kubeconfig(api.kubeconfig(tmp_path / "kubeconfig"))
        model = load_profile(stack).spec["modelId"]
        return serving.collect(kube, plan, "argocd", model, "workload")


def test_a_pod_serving_while_registration_is_pending_reports_serving(tmp_path, iec_schema):
    """DeploymentComplete with a ready replica, top-level state still DeploymentInProgress
    (SageMaker registration not done): serving, and registration pending is said beside."""
    cr = admitted(
        iec_schema, endpoint_config("DeploymentInProgress", "DeploymentComplete", 1, "Creating")
    )
    report = read(tmp_path, cr, [pod(True)], MODELS)
    (row,) = report["hyperpod"]
    assert row["state"] == serving.HEALTHY
    assert row["registration"] == {
        "endpoint": "inference-demo",
        "state": "Creating",
        "crState": "DeploymentInProgress",
        "pending": True,
    }
    assert "serving, SageMaker registration pending (Creating)" in row["message"]
    text = "\n".join(serving.format_text({**report, "state": report["state"]}))
    assert "registration Creating (CR DeploymentInProgress)" in text


def test_a_registered_endpoint_is_serving_and_registered(tmp_path, iec_schema):
    cr = admitted(
        iec_schema, endpoint_config("DeploymentComplete", "DeploymentComplete", 1, "InService")
    )
    (row,) = read(tmp_path, cr, [pod(True)], MODELS)["hyperpod"]
    assert row["state"] == serving.HEALTHY and row["registration"]["pending"] is False


def test_registered_but_no_ready_pod_is_not_serving(tmp_path, iec_schema):
    """The opposite case: the CR says complete, no pod answers: not serving."""
    cr = admitted(
        iec_schema, endpoint_config("DeploymentComplete", "DeploymentInProgress", 0, "InService")
    )
    (row,) = read(tmp_path, cr, [pod(False)], None)["hyperpod"]
    assert row["state"] == serving.UNKNOWN and row["endpoint"] is None


def test_a_pod_that_does_not_list_the_model_is_degraded(tmp_path, iec_schema):
    cr = admitted(
        iec_schema, endpoint_config("DeploymentComplete", "DeploymentComplete", 1, "InService")
    )
    other = {"object": "list", "data": [{"id": "some/other-model"}]}
    (row,) = read(tmp_path, cr, [pod(True)], other)["hyperpod"]
    assert row["state"] == serving.DEGRADED and "does not list" in row["endpoint"]["message"]


def test_a_failed_deployment_is_degraded_with_its_message(tmp_path, iec_schema):
    cr = endpoint_config("DeploymentFailed", "DeploymentFailed", 0, None)
    cr["status"]["deploymentStatus"]["message"] = "0/2 nodes: insufficient nvidia.com/gpu"
    (row,) = read(tmp_path, admitted(iec_schema, cr), [], None)["hyperpod"]
    assert row["state"] == serving.DEGRADED and "insufficient nvidia.com/gpu" in row["message"]


def test_an_absent_endpoint_config_is_degraded(tmp_path):
    report = read(tmp_path, None, [], None)
    assert report["hyperpod"][0]["state"] == serving.DEGRADED
    assert report["state"] == serving.DEGRADED


def test_hyperpod_instances_are_priced_unknown_never_zero():
    """ml.* types are SageMaker's: the price table lists none, so their cost is unknown (the EC2
    rate of the type behind them would be wrong), and the total says it is a lower bound."""
    from eksinf.aws.scope import StackScope
    from eksinf.aws.status import RawStatus, build_status, format_text, to_json
    from eksinf.model.prices import load_prices

    scope = StackScope("demo", "eksinf.dev/stack", "demo", "demo-net", "us-west-2", "r", "a")
    nodes = tuple(
        {
            "InstanceGroupName": group,
            "InstanceId": f"i-{group}",
            "InstanceType": kind,
            "LaunchTime": "2026-12-01T00:00:00Z",
            "InstanceStatus": {"Status": "Running"},
        }
        for group, kind in (("controllers", "ml.m5.xlarge"), ("inference", "ml.g5.2xlarge"))
    )
    raw = RawStatus("111122223333", (), (), None, hyperpod_nodes=nodes)
    report = build_status(scope, raw, load_prices())
    body = to_json(report)
    assert [(i["pool"], i["price"], i["hourly"]) for i in body["instances"]] == [
        ("instance-group/controllers", "unknown", None),
        ("instance-group/inference", "unknown", None),
    ]
    assert body["cost"]["complete"] is False and body["cost"]["hourly"] is None
    assert any(
        "ml.g5.2xlarge (on-demand)" in w and "unknown, not zero" in w for w in report.warnings
    )
    assert any("held by their instance groups" in w for w in report.warnings)
    assert not any("scale GPU workloads to 0" in w for w in report.warnings)
    assert "cost: unknown" in "\n".join(format_text(report))


def test_deploy_succeeds_when_the_model_serves_and_says_registration_is_pending(
    eksinf, stack_dir, tmp_path, iec_schema
):
    """`deploy --serve-timeout` to a hyperpod-eks target: published, then serving read from
    the target's cluster (FakeKubeApi holds what Argo CD and the operator would have made):
    exit 0 because the pod serves, and stderr says SageMaker registration is still pending."""
    from eksinf.flows.enroll import hub_target
    from eksinf.model.names import kubeconfig_path
    from eksinf.model.targets import KINDS

    hub_target(stack_dir, "hp", f"oci-layout:{tmp_path / 'oci'}", KINDS["hyperpod-eks"])
    assert eksinf("install", cwd=stack_dir).code == 0
    made = eksinf("hub", "create-variant", "hp", "platform-profile-base", cwd=stack_dir)
    assert made.code == 0, made.err
    cr = admitted(
        iec_schema, endpoint_config("DeploymentInProgress", "DeploymentComplete", 1, "Creating")
    )
    with FakeKubeApi() as api:
        kubeconfig_path(stack_dir, "hp").parent.mkdir(parents=True, exist_ok=True)
        api.kubeconfig(kubeconfig_path(stack_dir, "hp"))
        app = "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/hyperpod-inference-hp"
        api.put(
            app,
            {
                "metadata": {"name": "hyperpod-inference-hp"},
                "status": {"sync": {"status": "Synced"}, "health": {"status": "Healthy"}},
            },
        )
        api.put(CR_PATH, cr)
        api.put(f"/api/v1/namespaces/{NS}/pods/{POD}", pod(True))
        api.put(f"/api/v1/namespaces/{NS}/pods/{POD}:8000/proxy/v1/models", MODELS)
        args = ("deploy", "--plane", "workload", "--target", "hp/target", "--variant", "hp")
        done = eksinf(*args, "--no-sync", "--serve-timeout", "5", cwd=stack_dir)
    assert done.code == 0, done.err
    assert "1 published" in done.out or "2 published" in done.out
    assert "inference-hyperpod/vllm" in done.out and "registration Creating" in done.out
    assert (
        "inference-hyperpod/vllm serves; its SageMaker endpoint registration is still pending"
        in done.err
    )
