"""The platform profile: schema and semantic checks, each with a passing and a failing case."""

from __future__ import annotations

import copy

import pytest

from eksinf.core.yamlio import load_source
from eksinf.errors import CONTRACT, EksinfError
from eksinf.model.profile import STACK_TAG_KEY, check_profile, load_profile
from eksinf.model.stack import load_stack

LABEL = "render/platform-profile/profile.yaml"


@pytest.fixture
def doc(stack_dir):
    return load_source(stack_dir / LABEL)[0]


def broken(doc: dict, field: str, value) -> dict:
    out = copy.deepcopy(doc)
    out["spec"][field] = value
    return out


def expect(doc: dict, *fragments: str) -> None:
    with pytest.raises(EksinfError) as info:
        check_profile(doc, LABEL)
    assert info.value.exit_code == CONTRACT
    for fragment in fragments:
        assert fragment in info.value.message, info.value.message


def test_committed_profile_is_valid(stack_dir):
    profile = load_profile(load_stack(stack_dir))
    assert profile.name == profile.spec["stackName"]
    assert len(profile.availability_zones) == len(profile.private_subnet_cidrs) == 3
    assert profile.network_name != profile.cluster_name  # a network id, not the cluster
    assert profile.stack_tag == (STACK_TAG_KEY, profile.name)


def test_missing_field_is_named(doc):
    del doc["spec"]["nodeRoleName"]
    expect(doc, "'nodeRoleName' is a required property")


def test_unknown_field_is_refused(doc):
    expect(broken(doc, "clustername", "x"), "clustername")


def test_wrong_kind_is_refused(doc):
    doc["kind"] = "Profile"
    expect(doc, "kind", "PlatformProfile")


def test_unequal_lists(doc):
    doc["spec"]["privateSubnetCIDRs"] = doc["spec"]["privateSubnetCIDRs"][:2]
    expect(doc, "privateSubnetCIDRs", "differ in length", "3 zones, 3 public, 2 private")


def test_zone_outside_region(doc):
    zones = list(doc["spec"]["availabilityZones"])
    zones[1] = "eu-west-1b"
    expect(broken(doc, "availabilityZones", zones), "spec.availabilityZones.1", "us-west-2")


def test_duplicate_zone(doc):
    expect(broken(doc, "availabilityZones", ["us-west-2a"] * 3), "listed twice")


def test_bad_region(doc):
    expect(broken(doc, "region", "oregon"), "spec.region", "not an AWS region")


def test_subnet_outside_vpc(doc):
    nets = list(doc["spec"]["publicSubnetCIDRs"])
    nets[2] = "10.43.32.0/20"
    expect(
        broken(doc, "publicSubnetCIDRs", nets),
        "spec.publicSubnetCIDRs.2",
        "outside the VPC CIDR 10.42.0.0/16",
    )


def test_overlapping_public_and_private(doc):
    nets = list(doc["spec"]["privateSubnetCIDRs"])
    nets[0] = "10.42.8.0/24"
    expect(
        broken(doc, "privateSubnetCIDRs", nets),
        "spec.privateSubnetCIDRs.0",
        "overlaps 10.42.0.0/20 (spec.publicSubnetCIDRs.0)",
    )


def test_cidr_with_host_bits(doc):
    expect(broken(doc, "vpcCIDR", "10.42.0.1/16"), "spec.vpcCIDR", "not a CIDR block")


def test_vpc_prefix_range(doc):
    expect(broken(doc, "vpcCIDR", "10.0.0.0/8"), "spec.vpcCIDR", "/8")


def test_ami_alias_must_be_pinned(doc):
    expect(broken(doc, "gpuAMIAlias", "al2023@latest"), "spec.gpuAMIAlias", "pinned")
    check_profile(broken(doc, "gpuAMIAlias", "bottlerocket@v1.20.4"), LABEL)


def test_role_name_too_long(doc):
    expect(broken(doc, "nodeRoleName", "r" * 65), "spec.nodeRoleName", "IAM role name")
    check_profile(broken(doc, "nodeRoleName", "r" * 64), LABEL)


def test_role_name_characters(doc):
    expect(broken(doc, "karpenterRoleName", "karpenter role"), "spec.karpenterRoleName")


def test_roles_must_differ(doc):
    expect(broken(doc, "clusterRoleName", doc["spec"]["nodeRoleName"]), "share a name")


def test_cluster_name_rules(doc):
    expect(broken(doc, "clusterName", "-demo"), "spec.clusterName", "EKS cluster name")
    expect(broken(doc, "clusterName", "a" * 101), "spec.clusterName")
    check_profile(broken(doc, "clusterName", "Demo_1"), LABEL)


def test_stack_name_must_match_metadata(doc):
    expect(broken(doc, "stackName", "other"), "spec.stackName", "metadata.name")


def test_metadata_name_is_a_dns_label(doc):
    doc["metadata"]["name"] = doc["spec"]["stackName"] = "Inference_Demo"
    expect(doc, "metadata.name", "DNS label")


def test_cache_must_fit_root_volume(doc):
    expect(broken(doc, "modelCacheSize", "200Gi"), "spec.modelCacheSize", "does not fit")
    expect(broken(doc, "modelCacheSize", "40G"), "spec.modelCacheSize", "gibibytes")


def test_model_id_format(doc):
    expect(broken(doc, "modelId", "qwen"), "spec.modelId")


def test_load_profile_missing_file(stack_dir):
    (stack_dir / LABEL).unlink()
    with pytest.raises(EksinfError) as info:
        load_profile(load_stack(stack_dir))
    assert info.value.exit_code == CONTRACT
    assert "profile not found" in info.value.message


def hyperpod(doc: dict, field: str, value) -> dict:
    out = copy.deepcopy(doc)
    out["spec"]["hyperpod"][field] = value
    return out


def test_hyperpod_block_is_optional_and_modelled(doc):
    profile = check_profile(doc, LABEL)
    assert profile.hyperpod is not None
    assert profile.hyperpod.tls_bucket == "inference-demo-hyperpod-tls"
    assert profile.hyperpod.ec2_type == "g5.2xlarge"
    del doc["spec"]["hyperpod"]
    assert check_profile(doc, LABEL).hyperpod is None  # an eks-only stack needs none of it


def test_hyperpod_fields_are_checked(doc):
    expect(hyperpod(doc, "clusterName", "hp_cluster"), "spec.hyperpod.clusterName")
    expect(hyperpod(doc, "instanceType", "g5.2xlarge"), "spec.hyperpod.instanceType", "ml.")
    expect(hyperpod(doc, "instanceType", "ml.g5.3xlarge"), "not a size of g5")
    expect(hyperpod(doc, "instanceType", "ml.c7g.xlarge"), "has no GPU")
    arn = "arn:aws:iam::123456789012:role/x"
    expect(hyperpod(doc, "executionRoleName", arn), "spec.hyperpod.executionRoleName")
    expect(hyperpod(doc, "tlsCertificateS3Uri", "my-bucket"), "spec.hyperpod.tlsCertificateS3Uri")
    expect(hyperpod(doc, "tlsCertificateS3Uri", "s3://My_Bucket/x"), "tlsCertificateS3Uri")
    missing = copy.deepcopy(doc)
    del missing["spec"]["hyperpod"]["executionRoleName"]
    expect(missing, "spec.hyperpod", "'executionRoleName' is a required property")


def test_fallback_instance_types_are_optional_ordered_and_checked_like_the_first(doc):
    profile = check_profile(doc, LABEL)
    assert profile.hyperpod is not None
    assert profile.hyperpod.instance_types == ("ml.g5.2xlarge", "ml.g6.2xlarge")
    del doc["spec"]["hyperpod"]["fallbackInstanceTypes"]
    alone = check_profile(doc, LABEL).hyperpod
    assert alone is not None and alone.instance_types == ("ml.g5.2xlarge",)
    field = "spec.hyperpod.fallbackInstanceTypes"
    expect(hyperpod(doc, "fallbackInstanceTypes", ["g6.2xlarge"]), f"{field}.0", "ml.")
    expect(hyperpod(doc, "fallbackInstanceTypes", ["ml.g6.3xlarge"]), "not a size of g6")
    expect(hyperpod(doc, "fallbackInstanceTypes", ["ml.g6.xlarge", "ml.c7g.xlarge"]), f"{field}.1")
    expect(hyperpod(doc, "fallbackInstanceTypes", ["ml.g5.2xlarge"]), "listed twice")
    expect(hyperpod(doc, "fallbackInstanceTypes", ["ml.g6.xlarge", "ml.g6.xlarge"]), "listed twice")
    expect(hyperpod(doc, "fallbackInstanceTypes", "ml.g6.xlarge"), field, "not of type 'array'")
