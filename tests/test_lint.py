"""`eksinf lint`: each check passes on the committed stack and fails on a copy broken in one place.

Every failing case asserts exit 3, the check id, and that the message names the places involved.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eksinf.errors import CONTRACT

PROFILE = "render/platform-profile/profile.yaml"
NETWORK = "configs/aws-network/network.yaml"
NODECLASSES = "configs/karpenter/nodeclasses.yaml"
NODEPOOLS = "configs/karpenter/nodepools.yaml"
IDENTITY = "configs/karpenter-aws/controller-identity.yaml"
DEVICE_PLUGIN = "configs/gpu-runtime/nvidia-device-plugin-controller.yaml"
SMOKE_GPU = "configs/inference-workloads/smoke-gpu.yaml"
SMOKE_CPU = "configs/inference-workloads/smoke-cpu.yaml"
K_BINDINGS = "render/karpenter/links/bindings.yaml"
N_BINDINGS = "render/aws-network/links/bindings.yaml"
W_BINDINGS = "render/inference-workloads/links/bindings.yaml"

GPU_TOLERATION = """      tolerations:
        - key: nvidia.com/gpu
          operator: Exists
          effect: NoSchedule
"""


def edit(root: Path, rel: str, old: str, new: str, count: int = 1) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text, f"{old!r} not in {rel}"
    path.write_text(text.replace(old, new, count))


def lint_json(eksinf, stack_dir) -> tuple[int, list[dict]]:
    result = eksinf("lint", "--json", cwd=stack_dir)
    data = json.loads(result.out)  # clean JSON even when lint fails
    assert data["ok"] == (result.code == 0)
    return result.code, data["findings"]


def failing(eksinf, stack_dir, check: str, *fragments: str) -> dict:
    """Assert exit 3 with a finding of `check` whose text holds every fragment; return it."""
    result = eksinf("lint", cwd=stack_dir)
    assert result.code == CONTRACT, result.out + result.err
    assert "lint:" in result.err
    code, findings = lint_json(eksinf, stack_dir)
    assert code == CONTRACT
    mine = [f for f in findings if f["check"] == check]
    assert mine, f"no {check} finding in {[f['check'] for f in findings]}"
    for finding in mine:
        text = finding["message"] + " | " + " | ".join(finding["places"])
        if all(fragment in text for fragment in fragments):
            assert f"{check}: " in result.out  # the text report shows it too
            return finding
    pytest.fail(f"no {check} finding holds {fragments}: {mine}")


def test_committed_stack_is_clean(eksinf, stack_dir):
    result = eksinf("lint", cwd=stack_dir)
    assert result.code == 0, result.out + result.err
    assert "lint: clean" in result.err
    code, findings = lint_json(eksinf, stack_dir)
    assert (code, findings) == (0, [])


# ---- static link validation ------------------------------------------------------------------


def test_unescaped_dot_in_binding_path(eksinf, stack_dir):
    edit(
        stack_dir,
        K_BINDINGS,
        "spec.subnetSelectorTerms.0.tags.karpenter~1sh/discovery",
        "spec.subnetSelectorTerms.0.tags.karpenter.sh/discovery",
    )
    finding = failing(
        eksinf,
        stack_dir,
        "binding-unescaped-dot",
        "spec.subnetSelectorTerms.0.tags.karpenter.sh/discovery",
        "spec.subnetSelectorTerms.0.tags.karpenter~1sh/discovery",
    )
    assert finding["places"][0].startswith(K_BINDINGS + ":")
    assert NODECLASSES in finding["places"][1]


def test_binding_to_missing_resource(eksinf, stack_dir):
    edit(
        stack_dir,
        N_BINDINGS,
        "name: aws-inference/inference-demo-vpc\n",
        "name: aws-inference/main-vpc\n",
    )
    failing(
        eksinf,
        stack_dir,
        "binding-resource",
        "VPC aws-inference/main-vpc",
        N_BINDINGS,
        "configs/aws-network/network.yaml",
    )


def test_binding_to_missing_path(eksinf, stack_dir):
    edit(stack_dir, N_BINDINGS, "path: spec.cidrBlocks.0", "path: spec.cidrBlock")
    failing(
        eksinf,
        stack_dir,
        "binding-path",
        "spec.cidrBlock does not exist",
        "VPC aws-inference/inference-demo-vpc",
    )


def test_binding_to_missing_unit(eksinf, stack_dir):
    edit(stack_dir, N_BINDINGS, "unit: network", "unit: networks")
    failing(eksinf, stack_dir, "binding-unit", "'networks'", "configs/aws-network/")


def test_placeholder_without_binding(eksinf, stack_dir):
    edit(stack_dir, SMOKE_CPU, 'cpu: "3"', "cpu: confighubplaceholder")
    failing(
        eksinf,
        stack_dir,
        "placeholder-unbound",
        "Deployment inference/smoke-cpu spec.template.spec.containers.0.resources.requests.cpu",
        "render/inference-workloads/links/bindings.yaml",
    )


def test_setter_to_missing_env_var(eksinf, stack_dir):
    edit(stack_dir, K_BINDINGS, "env: CLUSTER_NAME", "env: KARPENTER_CLUSTER")
    failing(
        eksinf,
        stack_dir,
        "binding-setter",
        "no env var 'KARPENTER_CLUSTER'",
        "CLUSTER_NAME",
        "Deployment kube-system/karpenter",
    )


def test_setter_to_missing_container(eksinf, stack_dir):
    edit(
        stack_dir,
        W_BINDINGS,
        "setter: {container: chat, env: VLLM_MODEL}",
        "setter: {container: client, env: VLLM_MODEL}",
    )
    failing(eksinf, stack_dir, "binding-setter", "no container named 'client'", "containers: chat")


def test_binding_source_missing_from_profile(eksinf, stack_dir):
    edit(stack_dir, N_BINDINGS, "source: vpcCIDR", "source: vpcCidr")
    failing(eksinf, stack_dir, "binding-source", "spec.vpcCidr", N_BINDINGS)


def test_linked_field_shipping_a_literal(eksinf, stack_dir):
    edit(stack_dir, NODECLASSES, "  role: confighubplaceholder", "  role: some-role")
    failing(eksinf, stack_dir, "binding-literal", "'some-role'", "EC2NodeClass /general spec.role")


def test_two_bindings_for_one_field(eksinf, stack_dir):
    path = stack_dir / N_BINDINGS
    path.write_text(
        path.read_text()
        + "  - source: stackName\n    unit: network\n    kind: VPC\n"
        + "    name: aws-inference/inference-demo-vpc\n    path: spec.cidrBlocks.0\n"
    )
    failing(eksinf, stack_dir, "binding-duplicate", "spec.vpcCIDR and spec.stackName")


def test_malformed_bindings_file(eksinf, stack_dir):
    edit(stack_dir, N_BINDINGS, "bindings:", "bindings:\n  - source: [x]")
    failing(eksinf, stack_dir, "bindings", N_BINDINGS, "`source` is required")


# ---- profile ------------------------------------------------------------------------------------


def test_profile_lists_of_unequal_length(eksinf, stack_dir):
    edit(stack_dir, PROFILE, ", 10.42.96.0/20]", "]")
    failing(eksinf, stack_dir, "profile", "privateSubnetCIDRs", "differ in length", PROFILE)


def test_a_profile_list_item_no_binding_carries_is_refused(eksinf, stack_dir):
    """A second fallback instance type with no slot in the model would be dropped silently."""
    edit(stack_dir, PROFILE, "[ml.g6.2xlarge]", "[ml.g6.2xlarge, ml.g6e.2xlarge]")
    failing(
        eksinf,
        stack_dir,
        "binding-list-partial",
        "spec.hyperpod.fallbackInstanceTypes lists 2 item(s)",
        "item(s) 1 ('ml.g6e.2xlarge')",
        "render/hyperpod-inference/links/bindings.yaml",
    )


def test_a_fallback_with_no_slot_at_all_is_refused(eksinf, stack_dir):
    """The model back to one type (slot and binding removed) while the profile still lists a
    fallback: the fallback would never reach the model."""
    for rel in ("configs/hyperpod-inference/model.yaml", "render/hyperpod-inference/model.yaml"):
        edit(
            stack_dir,
            rel,
            "    - confighubplaceholder\n    - confighubplaceholder\n",
            "    - confighubplaceholder\n",
        )
    path = stack_dir / "render/hyperpod-inference/links/bindings.yaml"
    text = path.read_text()
    start = text.index("  - source: hyperpod.fallbackInstanceTypes.0")
    end = text.index("  - source:", start + 1)
    path.write_text(text[:start] + text[end:])
    failing(
        eksinf,
        stack_dir,
        "binding-list-partial",
        "no binding carries item(s) 0 ('ml.g6.2xlarge')",
        "render/hyperpod-inference/links/bindings.yaml (bind spec.hyperpod.fallbackInstanceTypes",
    )


def test_a_hyperpod_model_sets_one_instance_type_field_of_ml_types(eksinf, stack_dir):
    model = "configs/hyperpod-inference/model.yaml"
    edit(
        stack_dir, model, "  instanceTypes:\n", "  instanceType: ml.g5.2xlarge\n  instanceTypes:\n"
    )
    edit(
        stack_dir,
        "render/hyperpod-inference/model.yaml",
        "  instanceTypes:\n",
        "  instanceType: ml.g5.2xlarge\n  instanceTypes:\n",
    )
    failing(eksinf, stack_dir, "hyperpod-instance-types", "mutually exclusive", "spec.instanceType")


def test_a_hyperpod_model_lists_each_ml_type_once(eksinf, stack_dir):
    edit(stack_dir, PROFILE, "[ml.g6.2xlarge]", "[ml.g6.2xlarge, ml.g6.xlarge]")
    for rel in ("configs/hyperpod-inference/model.yaml", "render/hyperpod-inference/model.yaml"):
        edit(
            stack_dir,
            rel,
            "    - confighubplaceholder\n    - confighubplaceholder\n",
            "    - confighubplaceholder\n    - confighubplaceholder\n    - g6.xlarge\n    - confighubplaceholder\n",
        )
    path = stack_dir / "render/hyperpod-inference/links/bindings.yaml"
    path.write_text(
        path.read_text() + "  - source: hyperpod.fallbackInstanceTypes.1\n    unit: model\n"
        "    kind: InferenceEndpointConfig\n    name: inference-hyperpod/vllm\n"
        "    path: spec.instanceTypes.3\n"
    )
    found = failing(eksinf, stack_dir, "hyperpod-instance-types", "'g6.xlarge' is not an ml.* type")
    assert "spec.instanceTypes.2" in " ".join(found["places"])


def test_profile_subnet_outside_vpc(eksinf, stack_dir):
    edit(stack_dir, PROFILE, "10.42.32.0/20", "10.43.32.0/20")
    failing(eksinf, stack_dir, "profile", "spec.publicSubnetCIDRs.2", "outside the VPC CIDR")


# ---- cross-component invariants --------------------------------------------------------------


def test_pod_identity_naming_another_namespace(eksinf, stack_dir):
    edit(stack_dir, IDENTITY, "  namespace: kube-system\n", "  namespace: karpenter\n")
    failing(
        eksinf,
        stack_dir,
        "identity-trust",
        "karpenter/karpenter",
        "creates kube-system/karpenter",
        "PodIdentityAssociation aws-inference/inference-demo-karpenter",
        "configs/karpenter/karpenter-controller.yaml ServiceAccount kube-system/karpenter",
    )


def test_pod_identity_naming_another_service_account(eksinf, stack_dir):
    edit(stack_dir, IDENTITY, "serviceAccount: karpenter", "serviceAccount: karpenter-controller")
    failing(eksinf, stack_dir, "identity-trust", "kube-system/karpenter-controller")


def test_irsa_sub_naming_a_missing_service_account(eksinf, stack_dir):
    edit(
        stack_dir,
        IDENTITY,
        '"Action": ["sts:AssumeRole", "sts:TagSession"]\n',
        '"Action": ["sts:AssumeRole", "sts:TagSession"],\n          "Condition": {"StringEquals": '
        '{"oidc.eks.us-west-2.amazonaws.com/id/X:sub": "system:serviceaccount:karpenter:karpenter"}}\n',
    )
    failing(eksinf, stack_dir, "identity-trust", "IRSA trust", "karpenter/karpenter")


def test_discovery_tag_that_disagrees(eksinf, stack_dir):
    # The selector's binding reads another profile field: resolved values now differ.
    edit(
        stack_dir,
        K_BINDINGS,
        "  - source: networkName\n    unit: nodeclasses",
        "  - source: clusterName\n    unit: nodeclasses",
    )
    failing(
        eksinf,
        stack_dir,
        "discovery-tag",
        "'inference-demo'",
        "'inference-demo-net'",
        "EC2NodeClass /general spec.subnetSelectorTerms.0.tags.karpenter~1sh/discovery",
        "Subnet aws-inference/inference-demo-private-a spec.tags.1.value",
    )


def test_discovery_tag_literal_on_subnet_disagrees(eksinf, stack_dir):
    text = (stack_dir / NETWORK).read_text()
    marker = "  name: inference-demo-private-b\n"
    head, tail = text.split(marker)
    tail = tail.replace(
        "- key: karpenter.sh/discovery\n    value: confighubplaceholder",
        "- key: karpenter.sh/discovery\n    value: old-net",
        1,
    )
    (stack_dir / NETWORK).write_text(head + marker + tail)
    failing(
        eksinf,
        stack_dir,
        "discovery-tag",
        "'old-net'",
        "Subnet aws-inference/inference-demo-private-b",
    )


def test_public_subnet_with_discovery_tag(eksinf, stack_dir):
    edit(
        stack_dir,
        NETWORK,
        "  - key: kubernetes.io/role/elb\n    value: '1'\n",
        "  - key: kubernetes.io/role/elb\n    value: '1'\n  - key: karpenter.sh/discovery\n"
        "    value: net\n",
    )
    failing(
        eksinf, stack_dir, "discovery-public-subnet", "Subnet aws-inference/inference-demo-public-a"
    )


def test_gpu_workload_without_toleration(eksinf, stack_dir):
    edit(stack_dir, SMOKE_GPU, GPU_TOLERATION, "")
    failing(
        eksinf,
        stack_dir,
        "taint-gpu",
        "nvidia.com/gpu=true:NoSchedule",
        "Deployment inference/smoke-gpu spec.template.spec.tolerations",
        "NodePool /quantized-gpu spec.template.spec.taints.0",
    )


def test_device_plugin_must_tolerate_every_gpu_pool(eksinf, stack_dir):
    edit(
        stack_dir,
        DEVICE_PLUGIN,
        "      - effect: NoSchedule\n        key: eksinf.dev/h200\n        operator: Exists\n",
        "",
    )
    failing(
        eksinf,
        stack_dir,
        "taint-gpu",
        "eksinf.dev/h200=true:NoSchedule",
        "DaemonSet gpu-operator/nvidia-device-plugin ",
        "NodePool /h200 spec.template.spec.taints.1",
    )


def test_gpu_less_workload_tolerating_gpu_taint(eksinf, stack_dir):
    edit(
        stack_dir,
        SMOKE_CPU,
        "      nodeSelector:\n",
        GPU_TOLERATION + "      nodeSelector:\n",
    )
    failing(
        eksinf,
        stack_dir,
        "taint-gpu-less",
        "Deployment inference/smoke-cpu spec.template.spec.tolerations",
        "NodePool /quantized-gpu",
    )


def test_node_role_disagrees(eksinf, stack_dir):
    edit(
        stack_dir,
        K_BINDINGS,
        "  - source: nodeRoleName\n    unit: nodeclasses",
        "  - source: clusterRoleName\n    unit: nodeclasses",
    )
    failing(
        eksinf,
        stack_dir,
        "node-role",
        "'inference-demo-cluster-role'",
        "EC2NodeClass /general spec.role",
        "Role aws-inference/inference-demo-node-role spec.name",
    )


def test_cluster_name_disagrees(eksinf, stack_dir):
    edit(
        stack_dir,
        K_BINDINGS,
        "  - source: clusterName\n    unit: karpenter-controller",
        "  - source: networkName\n    unit: karpenter-controller",
    )
    failing(
        eksinf,
        stack_dir,
        "cluster-name",
        "names cluster 'inference-demo-net' but the profile's clusterName is 'inference-demo'",
        "Deployment kube-system/karpenter",
        "render/platform-profile/profile.yaml spec.clusterName",
    )


def test_cluster_named_by_name_is_checked_against_the_profile(eksinf, stack_dir):
    """Issue 14: a place that names the cluster outside the ACK Cluster (an association's
    spec.clusterName, as a BYO cluster needs) was never compared with the profile."""
    edit(
        stack_dir,
        IDENTITY,
        "  clusterRef:\n    from:\n      name: inference-demo\n",
        "  clusterName: blue\n",
    )
    failing(
        eksinf,
        stack_dir,
        "cluster-name",
        "names cluster 'blue' but the profile's clusterName is 'inference-demo'",
        "PodIdentityAssociation aws-inference/inference-demo-karpenter spec.clusterName",
        "render/platform-profile/profile.yaml spec.clusterName",
    )


def test_cluster_name_in_the_profile_reaches_every_place(eksinf, stack_dir):
    """The cluster-SG selector is compared with the profile's clusterName."""
    edit(
        stack_dir,
        NODECLASSES,
        "aws:eks:cluster-name: confighubplaceholder",
        "aws:eks:cluster-name: blue",
    )
    failing(
        eksinf,
        stack_dir,
        "cluster-name",
        "names cluster 'blue'",
        "EC2NodeClass /general spec.securityGroupSelectorTerms.1.tags.aws:eks:cluster-name",
    )


def test_model_id_disagrees(eksinf, stack_dir):
    edit(
        stack_dir,
        W_BINDINGS,
        "  - source: modelId\n    unit: chat",
        "  - source: stackName\n    unit: chat",
    )
    failing(eksinf, stack_dir, "model-id", "Deployment inference/chat", "Deployment inference/vllm")


def test_vpc_cidr_disagrees(eksinf, stack_dir):
    edit(
        stack_dir,
        N_BINDINGS,
        "  - source: vpcCIDR\n    unit: network\n    kind: SecurityGroup",
        "  - source: publicSubnetCIDRs.0\n    unit: network\n    kind: SecurityGroup",
    )
    failing(
        eksinf,
        stack_dir,
        "vpc-cidr",
        "10.42.0.0/20",
        "SecurityGroup aws-inference/inference-demo-cluster-sg spec.ingressRules.0.ipRanges.0.cidrIP",
        "VPC aws-inference/inference-demo-vpc spec.cidrBlocks.0",
    )


def test_network_resource_without_stack_tag(eksinf, stack_dir):
    edit(
        stack_dir,
        NETWORK,
        "  connectivityType: public\n  tags:\n  - key: eksinf.dev/stack\n    value: confighubplaceholder\n",
        "  connectivityType: public\n",
    )
    failing(eksinf, stack_dir, "stack-tag", "NATGateway aws-inference/inference-demo-natgw")


def test_accelerator_label_vs_family(eksinf, stack_dir):
    edit(stack_dir, NODEPOOLS, "values: [g6, g5, g6e]", "values: [g6, g5, g6e, g4dn]")
    failing(
        eksinf,
        stack_dir,
        "accelerator-label",
        "family g4dn carries t4",
        "NodePool /quantized-gpu spec.template.spec.requirements.1.values",
        "NodePool /quantized-gpu spec.template.spec.requirements.0.values",
    )


def test_static_accelerator_label_on_mixed_pool(eksinf, stack_dir):
    edit(
        stack_dir,
        NODEPOOLS,
        "        eksinf.dev/pool: quantized-gpu\n",
        "        eksinf.dev/pool: quantized-gpu\n        eksinf.dev/accelerator: nvidia-l4\n",
    )
    failing(eksinf, stack_dir, "accelerator-label", "eksinf.dev/accelerator=nvidia-l4", "a10g")


def test_h200_pool_with_on_demand(eksinf, stack_dir):
    edit(stack_dir, NODEPOOLS, "values: [reserved]", "values: [reserved, on-demand]")
    failing(eksinf, stack_dir, "reserved-capacity", "p5e/p5en", "NodePool /h200")


def test_h200_pool_without_reservation_selector(eksinf, stack_dir):
    edit(
        stack_dir,
        NODECLASSES,
        "  capacityReservationSelectorTerms:\n    - tags:\n        eksinf.dev/stack: confighubplaceholder\n",
        "",
    )
    failing(
        eksinf,
        stack_dir,
        "reserved-capacity",
        "capacityReservationSelectorTerms",
        "EC2NodeClass /gpu",
    )


def test_model_cache_larger_than_root_volume(eksinf, stack_dir):
    edit(stack_dir, PROFILE, "gpuRootVolumeSize: 200Gi", "gpuRootVolumeSize: 50Gi")
    failing(
        eksinf,
        stack_dir,
        "storage",
        "needs 40Gi",
        "Deployment inference/vllm",
        "EC2NodeClass /gpu spec.blockDeviceMappings.0.ebs.volumeSize",
    )


def test_unconditioned_passrole_in_iam_policy(eksinf, stack_dir):
    path = stack_dir / "iam/ack-controllers-policy.json"
    policy = json.loads(path.read_text())
    for statement in policy["Statement"]:
        if statement["Action"] == "iam:PassRole":
            del statement["Condition"]
    path.write_text(json.dumps(policy))
    failing(
        eksinf, stack_dir, "passrole", "PassRolesToTheirServices", "iam/ack-controllers-policy.json"
    )


def test_unconditioned_passrole_in_inline_policy(eksinf, stack_dir):
    edit(
        stack_dir,
        IDENTITY,
        ',\n            "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}',
        "",
    )
    failing(
        eksinf,
        stack_dir,
        "passrole",
        "PassNodeRoleToEC2",
        "Role aws-inference/inference-demo-karpenter-controller",
    )


# ---- freshness --------------------------------------------------------------------------------


def test_edited_source_is_linted_and_reported_stale(eksinf, stack_dir):
    """A handwritten unit edited under render/ but not re-rendered: both problems are named."""
    edit(stack_dir, "render/inference-workloads/smoke-gpu.yaml", GPU_TOLERATION, "")
    failing(
        eksinf,
        stack_dir,
        "configs-stale",
        "render/inference-workloads/smoke-gpu.yaml",
        "configs/inference-workloads/smoke-gpu.yaml",
    )
    failing(
        eksinf,
        stack_dir,
        "taint-gpu",
        "render/inference-workloads/smoke-gpu.yaml Deployment inference/smoke-gpu",
        "NodePool /quantized-gpu",
    )


def test_changed_chart_values_without_render(eksinf, stack_dir):
    edit(stack_dir, "render/karpenter/values/karpenter.yaml", "replicas: 2", "replicas: 1")
    failing(eksinf, stack_dir, "configs-stale", "configs/provenance.json inputsSha256")


def test_discovery_tag_key_removed_from_security_group(eksinf, stack_dir):
    text = (stack_dir / NETWORK).read_text()
    head, tail = text.split("kind: SecurityGroup\n", 1)
    tail = tail.replace("key: karpenter.sh/discovery", "key: karpenter.sh/discover", 1)
    (stack_dir / NETWORK).write_text(head + "kind: SecurityGroup\n" + tail)
    failing(
        eksinf,
        stack_dir,
        "discovery-tag",
        "no security group carries that tag",
        "EC2NodeClass /gpu spec.securityGroupSelectorTerms.0",
        "SecurityGroup aws-inference/inference-demo-cluster-sg spec.tags",
    )


def test_malformed_committed_unit(eksinf, stack_dir):
    edit(stack_dir, SMOKE_CPU, "  replicas: 0\n", "  replicas: [0\n")
    failing(
        eksinf,
        stack_dir,
        "configs-yaml",
        "configs/inference-workloads/smoke-cpu.yaml:",
        "not valid YAML",
    )


def test_dangling_ack_reference_across_components(eksinf, stack_dir):
    edit(
        stack_dir,
        IDENTITY,
        "  clusterRef:\n    from:\n      name: inference-demo\n",
        "  clusterRef:\n    from:\n      name: eks\n",
    )
    failing(
        eksinf,
        stack_dir,
        "ack-ref",
        "Cluster aws-inference/eks",
        "PodIdentityAssociation aws-inference/inference-demo-karpenter spec.clusterRef.from.name",
        "configs/eks-cluster/cluster.yaml Cluster aws-inference/inference-demo metadata.name",
    )


def test_dangling_ack_reference_to_renamed_subnet(eksinf, stack_dir):
    edit(
        stack_dir,
        "configs/eks-cluster/nodegroup.yaml",
        "name: inference-demo-private-c",
        "name: inference-demo-private-d",
    )
    failing(
        eksinf,
        stack_dir,
        "ack-ref",
        "Subnet aws-inference/inference-demo-private-d",
        "subnetRefs.2.from.name",
    )


# ---- control-plane naming conventions -------------------------------------------------------

ADDONS = "configs/eks-cluster/addons.yaml"
CLUSTER = "configs/eks-cluster/cluster.yaml"
IAM_ROLES = "configs/eks-cluster/iam-roles.yaml"
NAMING_CHECKS = (
    "tag-key-spelling",
    "pod-identity-agent",
    "node-class-identity",
    "iam-role-name",
    "stack-tag-ack",
)


def passing(eksinf, stack_dir, check: str, finding_id: str | None = None) -> list[dict]:
    """Assert `check` ran and reported nothing (a configs/-only edit may still be stale)."""
    result = eksinf("lint", "--json", cwd=stack_dir)
    data = json.loads(result.out)
    assert check in data["checks"]
    mine = [f for f in data["findings"] if f["check"] == (finding_id or check)]
    assert mine == [], mine
    return data["findings"]


@pytest.mark.parametrize("check", NAMING_CHECKS)
def test_naming_checks_pass_on_committed_stack(eksinf, stack_dir, check):
    assert (
        passing(eksinf, stack_dir, check, "stack-tag" if check == "stack-tag-ack" else None) == []
    )


def test_discovery_key_misspelled_on_security_group(eksinf, stack_dir):
    text = (stack_dir / NETWORK).read_text()
    head, tail = text.split("kind: SecurityGroup\n", 1)
    tail = tail.replace("key: karpenter.sh/discovery", "key: karpenter.k8s.aws/discovery", 1)
    (stack_dir / NETWORK).write_text(head + "kind: SecurityGroup\n" + tail)
    failing(
        eksinf,
        stack_dir,
        "tag-key-spelling",
        "'karpenter.k8s.aws/discovery' is not karpenter.sh/discovery",
        "SecurityGroup aws-inference/inference-demo-cluster-sg spec.tags.1.key",
    )


def test_discovery_key_misspelled_in_selector(eksinf, stack_dir):
    edit(stack_dir, NODECLASSES, "karpenter.sh/discovery: conf", "Karpenter.sh/Discovery: conf")
    failing(
        eksinf,
        stack_dir,
        "tag-key-spelling",
        "not keyed karpenter.sh/discovery",
        "EC2NodeClass /general spec.subnetSelectorTerms.0.tags.Karpenter~1sh/Discovery",
    )


def test_discovery_key_written_as_value(eksinf, stack_dir):
    text = (stack_dir / NETWORK).read_text()
    head, tail = text.split("name: inference-demo-private-b\n", 1)
    tail = tail.replace(
        "- key: karpenter.sh/discovery\n    value: confighubplaceholder",
        "- key: inference-demo-net\n    value: karpenter.sh/discovery",
        1,
    )
    (stack_dir / NETWORK).write_text(head + "name: inference-demo-private-b\n" + tail)
    failing(
        eksinf,
        stack_dir,
        "tag-key-spelling",
        "karpenter.sh/discovery is the tag's value (key 'inference-demo-net'); it must be the key",
        "Subnet aws-inference/inference-demo-private-b spec.tags.1.value",
    )


def test_cluster_security_group_key_misspelled(eksinf, stack_dir):
    edit(stack_dir, NODECLASSES, "aws:eks:cluster-name: conf", "eks:cluster-name: conf", 2)
    failing(
        eksinf,
        stack_dir,
        "tag-key-spelling",
        "'eks:cluster-name' is not aws:eks:cluster-name",
        "EC2NodeClass /gpu spec.securityGroupSelectorTerms.1.tags.eks:cluster-name",
    )


def test_reserved_aws_tag_prefix_on_ack_resource(eksinf, stack_dir):
    edit(
        stack_dir,
        CLUSTER,
        "    eksinf.dev/stack: confighubplaceholder\n",
        "    eksinf.dev/stack: confighubplaceholder\n    aws:eks:cluster-name: inference-demo\n",
    )
    failing(
        eksinf,
        stack_dir,
        "tag-key-spelling",
        "'aws:eks:cluster-name' starts with 'aws:'",
        "Cluster aws-inference/inference-demo spec.tags.aws:eks:cluster-name",
    )


def test_cluster_ownership_selector_is_not_a_misspelling(eksinf, stack_dir):
    # kubernetes.io/cluster/<name> is a real EKS tag on the cluster SG, not a near-miss.
    edit(
        stack_dir,
        NODECLASSES,
        "    - tags:\n        aws:eks:cluster-name: confighubplaceholder\n",
        "    - tags:\n        aws:eks:cluster-name: confighubplaceholder\n"
        "    - tags:\n        kubernetes.io/cluster/inference-demo: owned\n",
    )
    passing(eksinf, stack_dir, "tag-key-spelling")


def test_pod_identity_agent_misnamed(eksinf, stack_dir):
    edit(
        stack_dir,
        ADDONS,
        "  name: eks-pod-identity-agent\n  addonVersion",
        "  name: pod-identity-agent\n  addonVersion",
    )
    failing(
        eksinf,
        stack_dir,
        "pod-identity-agent",
        "spec.name exactly 'eks-pod-identity-agent'",
        "the add-on here is named 'pod-identity-agent'",
        "PodIdentityAssociation aws-inference/inference-demo-karpenter spec.clusterRef.from.name",
        "Addon aws-inference/inference-demo-pod-identity-agent spec.name",
    )


def test_pod_identity_agent_on_another_cluster(eksinf, stack_dir):
    edit(stack_dir, ADDONS, "      name: inference-demo\n", "      name: other-cluster\n")
    failing(
        eksinf,
        stack_dir,
        "pod-identity-agent",
        "Cluster aws-inference/inference-demo",
        "Addon aws-inference/inference-demo-pod-identity-agent spec.name",
    )


def test_pod_identity_agent_matched_by_add_on_name_not_resource_name(eksinf, stack_dir):
    edit(
        stack_dir,
        ADDONS,
        "  name: inference-demo-pod-identity-agent\n  namespace",
        "  name: pod-id\n  namespace",
    )
    passing(eksinf, stack_dir, "pod-identity-agent")


def test_node_class_with_role_and_instance_profile(eksinf, stack_dir):
    edit(
        stack_dir,
        NODECLASSES,
        "  role: confighubplaceholder\n",
        "  role: confighubplaceholder\n  instanceProfile: inference-demo-node-profile\n",
    )
    failing(
        eksinf,
        stack_dir,
        "node-class-identity",
        "sets both spec.role and spec.instanceProfile",
        "EC2NodeClass /general spec.role",
        "EC2NodeClass /general spec.instanceProfile",
    )


def test_node_class_without_role_or_instance_profile(eksinf, stack_dir):
    edit(stack_dir, NODECLASSES, "  role: confighubplaceholder\n", "")
    failing(eksinf, stack_dir, "node-class-identity", "sets neither of", "EC2NodeClass /general")


def test_node_class_role_given_as_arn(eksinf, stack_dir):
    arn = "arn:aws:iam::111122223333:role/inference-demo-node-role"
    edit(stack_dir, NODECLASSES, "  role: confighubplaceholder", f"  role: {arn}")
    failing(
        eksinf,
        stack_dir,
        "node-class-identity",
        "not an ARN",
        "write 'inference-demo-node-role'",
        "EC2NodeClass /general spec.role",
        "configs/eks-cluster/iam-roles.yaml Role aws-inference/inference-demo-node-role spec.name",
    )


def test_node_class_instance_profile_given_as_arn(eksinf, stack_dir):
    arn = "arn:aws:iam::111122223333:instance-profile/inference-demo-node"
    edit(stack_dir, NODECLASSES, "  role: confighubplaceholder", f"  instanceProfile: {arn}")
    failing(
        eksinf,
        stack_dir,
        "node-class-identity",
        "instance profile name",
        "write 'inference-demo-node'",
        "EC2NodeClass /general spec.instanceProfile",
    )


def test_iam_role_name_over_64_characters(eksinf, stack_dir):
    long_name = "inference-demo-" + "x" * 50  # 65 characters
    edit(stack_dir, IAM_ROLES, "  name: confighubplaceholder", f"  name: {long_name}")
    failing(
        eksinf,
        stack_dir,
        "iam-role-name",
        f"{long_name!r} (65 characters)",
        "configs/eks-cluster/iam-roles.yaml Role aws-inference/inference-demo-cluster-role spec.name",
    )


def test_iam_role_name_of_64_characters_resolves_cleanly(eksinf, stack_dir):
    name = "inference-demo-node-" + "r" * 44
    assert len(name) == 64
    edit(stack_dir, PROFILE, "nodeRoleName: inference-demo-node-role", f"nodeRoleName: {name}")
    findings = passing(eksinf, stack_dir, "iam-role-name")
    assert {f["check"] for f in findings} <= {"configs-stale"}  # render/ changed: inputs digest


def test_profile_role_name_over_64_characters(eksinf, stack_dir):
    name = "inference-demo-node-" + "r" * 45
    edit(stack_dir, PROFILE, "nodeRoleName: inference-demo-node-role", f"nodeRoleName: {name}")
    failing(eksinf, stack_dir, "profile", "spec.nodeRoleName", "1-64 characters")


def test_eks_resource_without_stack_tag(eksinf, stack_dir):
    edit(
        stack_dir,
        IDENTITY,
        "      name: inference-demo-karpenter-controller\n  tags:\n    eksinf.dev/stack: confighubplaceholder\n",
        "      name: inference-demo-karpenter-controller\n",
    )
    failing(
        eksinf,
        stack_dir,
        "stack-tag",
        "PodIdentityAssociation supports tags",
        "PodIdentityAssociation aws-inference/inference-demo-karpenter spec.tags",
    )


def test_stack_tag_naming_another_stack(eksinf, stack_dir):
    edit(
        stack_dir, ADDONS, "eksinf.dev/stack: confighubplaceholder", "eksinf.dev/stack: other-stack"
    )
    failing(
        eksinf,
        stack_dir,
        "stack-tag",
        "is 'other-stack', but the stack is 'inference-demo'",
        "Addon aws-inference/inference-demo-pod-identity-agent spec.tags.eksinf~1dev/stack",
        "profile.yaml spec.stackName",
    )


def test_untaggable_ack_kind_needs_no_stack_tag(eksinf, stack_dir):
    # iam Group's CRD has no spec.tags: the check reads the rendered CRDs, not a kind list.
    group = (
        "---\napiVersion: iam.services.k8s.aws/v1alpha1\nkind: Group\nmetadata:\n"
        "  name: operators\n  namespace: aws-inference\nspec:\n  name: inference-demo-operators\n"
    )
    (stack_dir / IAM_ROLES).write_text((stack_dir / IAM_ROLES).read_text() + group)
    passing(eksinf, stack_dir, "stack-tag-ack", "stack-tag")


def test_pod_identity_agent_missing(eksinf, stack_dir):
    (stack_dir / ADDONS).write_text("")
    (stack_dir / "render/eks-cluster/addons.yaml").write_text("")
    failing(
        eksinf,
        stack_dir,
        "pod-identity-agent",
        "no unit defines an eks Addon",
        "PodIdentityAssociation aws-inference/inference-demo-karpenter spec.clusterRef.from.name",
        "no mgmt-plane unit defines an eks Addon",
    )


def test_lint_list_prints_the_table_of_registered_checks(eksinf, stack_dir):
    """`--list` names exactly the checks a lint run reports: the pipeline's steps and every
    registered check."""
    listed = eksinf("lint", "--list", "--json", cwd=stack_dir)
    assert listed.code == 0, listed.err
    rows = json.loads(listed.out)["checks"]
    assert {r["domain"] for r in rows} == {
        "stack", "bindings", "identity", "network", "scheduling", "naming", "addons",
        "lifecycle",
    }  # fmt: skip
    assert all(r["severity"] == "error" and r["anchor"].startswith("docs/") for r in rows)
    ran = json.loads(eksinf("lint", "--json", cwd=stack_dir).out)["checks"]
    assert sorted(r["name"] for r in rows) == sorted(ran)
    text = eksinf("lint", "--list", cwd=stack_dir)
    assert text.out.splitlines()[0].split()[:3] == ["NAME", "DOMAIN", "SEVERITY"]


# ---- identity both ways ------------------------------------------------------------------------

READER_UNIT = "configs/inference-workloads/reader-identity.yaml"
READER_ROLE = "arn:aws:iam::111122223333:role/inference-demo-reader"


def reader_stack(stack_dir, condition: dict, namespaces=("models", "batch")) -> None:
    """An IRSA role and one ServiceAccount `reader` per namespace, each annotated with it."""
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {
                    "Federated": "arn:aws:iam::111122223333:oidc-provider/"
                    "oidc.eks.us-west-2.amazonaws.com/id/X"
                },
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": condition,
            }
        ],
    }
    docs = [
        {
            "apiVersion": "iam.services.k8s.aws/v1alpha1",
            "kind": "Role",
            "metadata": {"name": "reader", "namespace": "aws-inference"},
            "spec": {
                "name": "inference-demo-reader",
                "assumeRolePolicyDocument": json.dumps(trust),
            },
        }
    ] + [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {
                "name": "reader",
                "namespace": ns,
                "annotations": {"eks.amazonaws.com/role-arn": READER_ROLE},
            },
        }
        for ns in namespaces
    ]
    (stack_dir / READER_UNIT).write_text("---\n".join(json.dumps(d) + "\n" for d in docs))


SUB = "oidc.eks.us-west-2.amazonaws.com/id/X:sub"


def test_second_service_account_in_another_namespace_is_not_admitted(eksinf, stack_dir):
    """Issue 14: the trust is pinned to models/reader while batch/reader uses the same role.
    Old lint only checked that the pinned subject exists, so this passed; IAM denies batch."""
    reader_stack(stack_dir, {"StringEquals": {SUB: "system:serviceaccount:models:reader"}})
    failing(
        eksinf,
        stack_dir,
        "identity-trust",
        "ServiceAccount batch/reader uses role 'inference-demo-reader'",
        "does not admit 'system:serviceaccount:batch:reader'",
        "StringLike system:serviceaccount:*:reader",
        "ServiceAccount batch/reader metadata.annotations.eks~1amazonaws~1com/role-arn",
        "Role aws-inference/reader spec.assumeRolePolicyDocument",
    )


@pytest.mark.parametrize(
    "condition",
    [
        {"StringLike": {SUB: "system:serviceaccount:*:reader"}},
        {"ForAnyValue:StringLike": {SUB: "system:serviceaccount:*:reader"}},
        {"StringEquals": {SUB: ["system:serviceaccount:models:reader", "system:serviceaccount:batch:reader"]}},
    ],
)  # fmt: skip
def test_the_wildcard_fix_is_not_a_finding(eksinf, stack_dir, condition):
    """Issue 14: `StringLike system:serviceaccount:*:NAME` admits both users, as IAM evaluates
    it; old lint read `*` as a namespace and reported a missing ServiceAccount */reader."""
    reader_stack(stack_dir, condition)
    passing(eksinf, stack_dir, "identity-trust")


def test_a_trust_admitting_accounts_that_do_not_use_the_role(eksinf, stack_dir):
    reader_stack(stack_dir, {"StringLike": {SUB: "system:serviceaccount:*"}}, ("models",))
    failing(
        eksinf,
        stack_dir,
        "identity-trust",
        "the trust of role 'inference-demo-reader' admits ServiceAccount kube-system/karpenter",
        "which does not use it",
    )


def test_karpenter_association_uses_another_role_than_the_profile(eksinf, stack_dir):
    """The association's role is the profile's karpenterRoleName."""
    edit(
        stack_dir,
        IDENTITY,
        "  roleRef:\n    from:\n      name: inference-demo-karpenter-controller\n",
        "  roleARN: arn:aws:iam::111122223333:role/someone-else\n",
    )
    failing(
        eksinf,
        stack_dir,
        "identity-trust",
        "Karpenter's association uses role 'someone-else'",
        "karpenterRoleName is 'inference-demo-karpenter-controller'",
    )


def test_association_role_without_tag_session_in_the_stack(eksinf, stack_dir):
    edit(
        stack_dir,
        IDENTITY,
        '"Action": ["sts:AssumeRole", "sts:TagSession"]',
        '"Action": "sts:AssumeRole"',
    )
    failing(
        eksinf,
        stack_dir,
        "identity-trust",
        "does not allow pods.eks.amazonaws.com sts:TagSession",
        "PodIdentityAssociation aws-inference/inference-demo-karpenter spec.roleRef",
    )


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("  resolveConflicts: OVERWRITE\n", "  resolveConflicts: NONE\n", "is 'NONE'"),
        ("  resolveConflicts: OVERWRITE\n", "", "is unset"),
    ],
)
def test_addon_resolve_conflicts_none_or_unset(eksinf, stack_dir, old, new, said):
    """Issue 14: `resolveConflicts: NONE` passed lint; the add-on then drifts from its unit."""
    edit(stack_dir, ADDONS, old, new)
    failing(
        eksinf,
        stack_dir,
        "addon-conflicts",
        f"add-on 'eks-pod-identity-agent': resolveConflicts {said}",
        "Addon aws-inference/inference-demo-pod-identity-agent spec.resolveConflicts",
    )


def test_addon_without_a_pinned_version_is_refused(eksinf, stack_dir):
    """Issue 14: addons.yaml left the version to EKS (its default for the cluster version),
    and lint passed an Addon without `addonVersion`."""
    passing(eksinf, stack_dir, "addon-version")
    edit(stack_dir, ADDONS, "  addonVersion: confighubplaceholder\n", "")
    failing(
        eksinf,
        stack_dir,
        "addon-version",
        "add-on 'eks-pod-identity-agent': addonVersion is unset",
        "addonVersions.eks-pod-identity-agent",
        "Addon aws-inference/inference-demo-pod-identity-agent spec.addonVersion",
    )


VPC_CNI = "v1.15.1-eksbuild.1"  # a version whose schema the package records (AWS CLI example)


def _as_vpc_cni(stack_dir, values: str) -> None:
    """The stack's Addon turned into vpc-cni at a recorded version, with `values`."""
    edit(
        stack_dir,
        ADDONS,
        "  name: eks-pod-identity-agent\n  addonVersion:",
        "  name: vpc-cni\n  addonVersion:",
    )
    edit(
        stack_dir,
        ADDONS,
        "  resolveConflicts:",
        f"  configurationValues: '{values}'\n  resolveConflicts:",
    )
    edit(
        stack_dir,
        PROFILE,
        "eks-pod-identity-agent: v1.3.10-eksbuild.2",
        f"eks-pod-identity-agent: {VPC_CNI}",
    )


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ('{"env": {"WARM_IP_TARGET": 5}}', "env.WARM_IP_TARGET: 5 is not of type 'string'"),
        ('{"warmIpTarget": "5"}', "(top): Additional properties are not allowed ('warmIpTarget'"),
        ("{not json: [", "not valid YAML or JSON"),
    ],
)
def test_addon_configuration_values_are_checked_against_the_recorded_schema(
    eksinf, stack_dir, values, said
):
    """Issue 14: arbitrary `configurationValues` passed lint. They are checked against the
    add-on's configuration schema for its pinned version, as eks:DescribeAddonConfiguration
    returns it; the vpc-cni v1.15.1-eksbuild.1 record is AWS's published example output
    (aws-cli awscli/examples/eks/describe-addon-configuration.rst)."""
    _as_vpc_cni(stack_dir, values)
    failing(eksinf, stack_dir, "addon-configuration", "add-on 'vpc-cni'", said)


def test_addon_configuration_values_that_fit_the_schema_pass(eksinf, stack_dir):
    _as_vpc_cni(stack_dir, '{"env": {"WARM_IP_TARGET": "5"}, "enableNetworkPolicy": "true"}')
    passing(eksinf, stack_dir, "addon-configuration")


def test_addon_values_for_a_version_without_a_recorded_schema_are_refused(eksinf, stack_dir):
    """Unknown is not a pass: values the package cannot check (no record for the add-on's
    version) fail lint, naming the command that records the schema."""
    edit(
        stack_dir,
        ADDONS,
        "  resolveConflicts:",
        "  configurationValues: '{\"a\": 1}'\n  resolveConflicts:",
    )
    failing(
        eksinf,
        stack_dir,
        "addon-configuration",
        "add-on 'eks-pod-identity-agent' v1.3.10-eksbuild.2: no configuration schema recorded",
        "eksinf addon-schemas refresh",
    )


MONITORING_SUB = (
    '"Action": ["sts:AssumeRole", "sts:TagSession"],\n          "Condition": {"StringEquals": '
    '{"oidc.eks.us-west-2.amazonaws.com/id/X:sub": "system:serviceaccount:monitoring:agent"}}\n'
)


def test_a_trust_subject_outside_the_stack_must_be_declared_external(eksinf, stack_dir):
    """Issue 14: a trust subject may name a ServiceAccount the stack does not create only if
    the profile declares it external (externalServiceAccounts); otherwise lint fails."""
    edit(stack_dir, IDENTITY, '"Action": ["sts:AssumeRole", "sts:TagSession"]\n', MONITORING_SUB)
    failing(
        eksinf,
        stack_dir,
        "identity-trust",
        "IRSA trust",
        "monitoring/agent",
        "externalServiceAccounts",
    )
    edit(
        stack_dir,
        PROFILE,
        "  addonVersions:",
        "  externalServiceAccounts: [monitoring/agent]\n  addonVersions:",
    )
    code, findings = lint_json(eksinf, stack_dir)
    assert [f for f in findings if "monitoring/agent" in f["message"]] == []


def test_a_service_account_the_stack_creates_is_not_external(eksinf, stack_dir):
    edit(
        stack_dir,
        PROFILE,
        "  addonVersions:",
        "  externalServiceAccounts: [kube-system/karpenter]\n  addonVersions:",
    )
    failing(
        eksinf,
        stack_dir,
        "identity-trust",
        "ServiceAccount kube-system/karpenter is declared external",
        "render/platform-profile/profile.yaml spec.externalServiceAccounts.0",
    )


# ---- AWS-backed objects (aws-objects.lock) -------------------------------------------------


def test_renaming_an_ack_object_fails_lint_until_its_entry_is_retired(eksinf, stack_dir):
    """A rename removes the old object: Argo CD prunes it and ACK deletes the NAT gateway."""
    for rel in ("render/aws-network/network.yaml", NETWORK):  # source and unit, byte for byte
        edit(stack_dir, rel, "  name: inference-demo-natgw\n", "  name: natgw\n")
    finding = failing(
        eksinf,
        stack_dir,
        "aws-object-removed",
        "NATGateway aws-inference/inference-demo-natgw",
        "ACK deletes its AWS NATGateway",
        "retired: <why>",
    )
    assert finding["places"] == [
        "aws-objects.lock ec2.services.k8s.aws NATGateway aws-inference/inference-demo-natgw"
    ]
    failing(eksinf, stack_dir, "aws-object-unrecorded", "NATGateway aws-inference/natgw")
    edit(
        stack_dir,
        "aws-objects.lock",
        "  name: inference-demo-natgw\n  component: aws-network\n  unit: network\n",
        "  name: inference-demo-natgw\n  component: aws-network\n  unit: network\n"
        "  retired: one NAT gateway per zone replaces it\n",
    )
    passing(eksinf, stack_dir, "aws-object-removed")


def test_render_records_new_ack_objects_and_never_drops_one(stack_dir, chart_mirror):
    from eksinf.build.render import render_stack
    from eksinf.build.write import write_configs
    from eksinf.model.awsobjects import read_lock
    from eksinf.model.stack import load_stack

    before = {o.label for o in read_lock(stack_dir)}
    assert "Role aws-inference/inference-demo-node-role" in before and len(before) == 20
    for rel in ("render/eks-cluster/iam-roles.yaml", "render/eks-cluster/nodegroup.yaml"):
        edit(stack_dir, rel, "name: inference-demo-node-role\n", "name: node-role\n")
    write_configs(render_stack(load_stack(stack_dir), chart_mirror))
    after = {o.label for o in read_lock(stack_dir)}
    assert after == before | {"Role aws-inference/node-role"}


def test_a_lock_entry_eksinf_did_not_write_is_an_input_error(eksinf, stack_dir):
    (stack_dir / "aws-objects.lock").write_text("objects:\n- kind: VPC\n")
    result = eksinf("lint", cwd=stack_dir)
    assert result.code == CONTRACT
    assert "aws-objects.lock: objects[0] needs string fields" in result.out + result.err
