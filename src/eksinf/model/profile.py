"""The platform profile: every value that must agree in two or more places of the stack.

The profile is a unit of kind `PlatformProfile` in the hub plane. It is never applied; links copy
its values into the units that need them. `check_profile` validates it twice: a JSON Schema for
shape, then semantic rules (address plan arithmetic with `ipaddress`, AWS naming rules) that a
schema cannot express. Every error names the field and says why it is wrong.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from eksinf.core.types import Doc
from eksinf.core.yamlio import load_mapping_docs
from eksinf.errors import CONTRACT, EksinfError
from eksinf.model.names import DISCOVERY_KEY, name_rule
from eksinf.model.quantity import whole_gib
from eksinf.model.schema import Schema
from eksinf.model.stack import Stack

API_VERSION = "eks-inference.eksinf.dev/v1"
KIND = "PlatformProfile"
COMPONENT = "platform-profile"
UNIT_FILE = "profile.yaml"
# Tag key carried by every AWS resource the stack owns; its value is the profile's name.
STACK_TAG_KEY = "eksinf.dev/stack"
# The Go original's stack tag key: a stack it built carries this one only, so status and
# teardown read it too (docs/migrating.md); eksinf never writes it.
ORIGINAL_STACK_TAG_KEY = "eks-inference.confighub.com/stack"

# AWS naming rules (as documented for each API).
_STACK_NAME = name_rule(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # a DNS label: also a K8s name
_CLUSTER_NAME = name_rule(r"[0-9A-Za-z][A-Za-z0-9_-]{0,99}")  # eks:CreateCluster name
ROLE_NAME = name_rule(r"[\w+=,.@-]{1,64}")  # iam:CreateRole RoleName (lint uses it too)
_TAG_VALUE = name_rule(r"[\w .:/=+@-]{1,256}")  # EC2 tag value characters
_REGION = name_rule(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d")
# Karpenter AMI alias, pinned: al2023@vYYYYMMDD or bottlerocket@vX.Y.Z. `latest` would drift GPU
# nodes to a new AMI (and recycle them under running models), so it is refused here.
_AMI_ALIAS = name_rule(r"al2023@v\d{8}|bottlerocket@v\d+\.\d+\.\d+")
_MODEL_ID = name_rule(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # Hugging Face org/name
# sagemaker:CreateCluster ClusterName (botocore's sagemaker model, shape ClusterName, max 63)
_HYPERPOD_CLUSTER = name_rule(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
_ML_TYPE = name_rule(r"ml\.([a-z0-9-]+\.[a-z0-9]+)")  # ml.<EC2 type>, e.g. ml.g5.2xlarge
# s3://<bucket>[/<prefix>]; bucket names per the S3 naming rules (3-63, lowercase, digits, . -)
_S3_URI = name_rule(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(/[^,=\x00-\x20\x7f]*)?")


@dataclass(frozen=True)
class HyperPodProfile:
    """The consumed SageMaker HyperPod cluster (target kind hyperpod-eks), `spec.hyperpod`."""

    cluster_name: str
    instance_type: str  # ml.*
    execution_role_name: str
    tls_certificate_s3_uri: str
    # ml.* types to fall back to, in order, when instance_type has no capacity
    fallback_instance_types: tuple[str, ...] = ()

    @property
    def instance_types(self) -> tuple[str, ...]:
        """Every type the model may run on, in order of preference (the CRD's instanceTypes)."""
        return (self.instance_type, *self.fallback_instance_types)

    @property
    def tls_bucket(self) -> str:
        """The bucket of the TLS URI: what the add-on's tlsCertificateS3Bucket must name."""
        match = _S3_URI.match(self.tls_certificate_s3_uri)
        return match.group(1) if match else ""

    @property
    def ec2_type(self) -> str:
        """The EC2 type behind the ml.* type (ml.g5.2xlarge runs on a g5.2xlarge)."""
        return self.instance_type.removeprefix("ml.")


@dataclass(frozen=True)
class Profile:
    name: str
    cluster_name: str
    network_name: str
    region: str
    availability_zones: tuple[str, ...]
    vpc_cidr: str
    public_subnet_cidrs: tuple[str, ...]
    private_subnet_cidrs: tuple[str, ...]
    node_role_name: str
    gpu_ami_alias: str
    spec: Doc  # the raw spec, for fields not modelled above
    hyperpod: HyperPodProfile | None = None  # only a hyperpod-eks target needs it

    @property
    def stack_tag(self) -> tuple[str, str]:
        return STACK_TAG_KEY, self.name


def default_path(stack: Stack) -> Path:
    return stack.render_dir / COMPONENT / UNIT_FILE


@cache
def _schema() -> Schema:
    text = resources.files("eksinf").joinpath("schemas/profile.schema.json").read_text()
    return Schema(json.loads(text), "profile.schema.json")


def _fail(label: str, field: str, why: str, hint: str) -> EksinfError:
    return EksinfError(f"{label}: {field}: {why}", hint=hint, exit_code=CONTRACT)


def _check_shape(label: str, doc: Doc) -> None:
    """The JSON Schema, on the first problem."""
    first = _schema().first_error(doc)
    if first:
        raise _fail(
            label,
            first.dotted,
            first.message,
            "See docs/address-plan.md for the profile fields and their format.",
        )


def check_profile(doc: Any, label: str) -> Profile:
    """Validate one PlatformProfile document; raise EksinfError (exit 3) on the first problem."""
    if not isinstance(doc, dict):
        raise _fail(label, "(top level)", "not a mapping", "The profile is one YAML mapping.")
    _check_shape(label, doc)
    spec = doc["spec"]
    name = doc["metadata"]["name"]
    _check_names(label, name, spec)
    _check_region(label, spec)
    _check_address_plan(label, spec)
    _check_sizes(label, spec)
    hyperpod = _check_hyperpod(label, spec["hyperpod"]) if "hyperpod" in spec else None
    return Profile(
        name=name,
        cluster_name=spec["clusterName"],
        network_name=spec["networkName"],
        region=spec["region"],
        availability_zones=tuple(spec["availabilityZones"]),
        vpc_cidr=spec["vpcCIDR"],
        public_subnet_cidrs=tuple(spec["publicSubnetCIDRs"]),
        private_subnet_cidrs=tuple(spec["privateSubnetCIDRs"]),
        node_role_name=spec["nodeRoleName"],
        gpu_ami_alias=spec["gpuAMIAlias"],
        spec=spec,
        hyperpod=hyperpod,
    )


def _check_names(label: str, name: str, spec: Doc) -> None:
    if not _STACK_NAME.match(name):
        raise _fail(
            label,
            "metadata.name",
            f"{name!r} is not a DNS label (lowercase letters, digits and '-', at most 63)",
            "The stack name becomes the value of the eksinf.dev/stack tag and of hub names.",
        )
    if spec["stackName"] != name:
        raise _fail(
            label,
            "spec.stackName",
            f"{spec['stackName']!r} differs from metadata.name {name!r}",
            "spec.stackName is what links copy into the stack tags; set it to metadata.name.",
        )
    cluster = spec["clusterName"]
    if not _CLUSTER_NAME.match(cluster):
        raise _fail(
            label,
            "spec.clusterName",
            f"{cluster!r} is not a valid EKS cluster name (1-100 letters, digits, '-' or '_', "
            "starting with a letter or digit)",
            "Pick a name such as 'inference-prod'.",
        )
    for key in ("clusterRoleName", "nodeRoleName", "karpenterRoleName"):
        if not ROLE_NAME.match(spec[key]):
            raise _fail(
                label,
                f"spec.{key}",
                f"{spec[key]!r} is not a valid IAM role name (1-64 characters from "
                "letters, digits and +=,.@_-)",
                "IAM role names are global to the account: derive them from the stack name.",
            )
    roles = [spec["clusterRoleName"], spec["nodeRoleName"], spec["karpenterRoleName"]]
    if len(set(roles)) != len(roles):
        raise _fail(
            label,
            "spec.clusterRoleName/nodeRoleName/karpenterRoleName",
            "two roles share a name; each role has its own trust policy",
            "Give the cluster, node and Karpenter roles distinct names.",
        )
    if not _TAG_VALUE.match(spec["networkName"]):
        raise _fail(
            label,
            "spec.networkName",
            f"{spec['networkName']!r} is not a valid tag value (1-256 letters, digits, spaces "
            "and _.:/=+-@)",
            f"networkName is the {DISCOVERY_KEY} tag value on subnets and security group.",
        )
    if not _AMI_ALIAS.match(spec["gpuAMIAlias"]):
        raise _fail(
            label,
            "spec.gpuAMIAlias",
            f"{spec['gpuAMIAlias']!r} is not a pinned Karpenter AMI alias "
            "(al2023@vYYYYMMDD or bottlerocket@vX.Y.Z)",
            "Pin the GPU AMI (for example al2023@v20260724): '@latest' drifts GPU nodes to a "
            "new AMI and recycles them under running models.",
        )
    if not _MODEL_ID.match(spec["modelId"]):
        raise _fail(
            label,
            "spec.modelId",
            f"{spec['modelId']!r} is not a Hugging Face model id (org/name)",
            "For example Qwen/Qwen2.5-7B-Instruct-AWQ.",
        )


def _check_region(label: str, spec: Doc) -> None:
    region = spec["region"]
    if not _REGION.match(region):
        raise _fail(
            label,
            "spec.region",
            f"{region!r} is not an AWS region name",
            "Use a region code such as us-west-2.",
        )
    zones = spec["availabilityZones"]
    for index, zone in enumerate(zones):
        if not name_rule(re.escape(region) + r"[a-z]").match(zone):
            raise _fail(
                label,
                f"spec.availabilityZones.{index}",
                f"{zone!r} is not an availability zone of region {region!r}",
                f"Zones of {region} are named {region}a, {region}b, ...",
            )
    if len(set(zones)) != len(zones):
        raise _fail(
            label,
            "spec.availabilityZones",
            "a zone is listed twice; each subnet pair must sit in its own zone",
            "List each availability zone once.",
        )


def _network(label: str, field: str, text: str) -> ipaddress.IPv4Network:
    try:
        net = ipaddress.ip_network(text, strict=True)
    except ValueError as exc:
        raise _fail(
            label,
            field,
            f"{text!r} is not a CIDR block ({exc})",
            "Write the network address and prefix, e.g. 10.42.0.0/16 (host bits zero).",
        ) from exc
    if not isinstance(net, ipaddress.IPv4Network):
        raise _fail(label, field, f"{text!r} is not IPv4", "The VPC plan is IPv4.")
    return net


def _check_address_plan(label: str, spec: Doc) -> None:
    zones = spec["availabilityZones"]
    public = spec["publicSubnetCIDRs"]
    private = spec["privateSubnetCIDRs"]
    if not len(zones) == len(public) == len(private):
        raise _fail(
            label,
            "spec.availabilityZones/publicSubnetCIDRs/privateSubnetCIDRs",
            f"lists differ in length ({len(zones)} zones, {len(public)} public, "
            f"{len(private)} private); they are positional: index N is zone N's subnets",
            "Give exactly one public and one private CIDR per availability zone.",
        )
    vpc = _network(label, "spec.vpcCIDR", spec["vpcCIDR"])
    if not 16 <= vpc.prefixlen <= 28:
        raise _fail(
            label,
            "spec.vpcCIDR",
            f"/{vpc.prefixlen} is outside the VPC range /16 to /28",
            "AWS accepts VPC CIDR blocks between /16 and /28.",
        )
    seen: list[tuple[str, ipaddress.IPv4Network]] = []
    for key, cidrs in (("publicSubnetCIDRs", public), ("privateSubnetCIDRs", private)):
        for index, text in enumerate(cidrs):
            field = f"spec.{key}.{index}"
            net = _network(label, field, text)
            if not net.subnet_of(vpc):
                raise _fail(
                    label,
                    field,
                    f"{text} is outside the VPC CIDR {vpc} (spec.vpcCIDR)",
                    "Every subnet must lie inside spec.vpcCIDR.",
                )
            for other_field, other in seen:
                if net.overlaps(other):
                    raise _fail(
                        label,
                        field,
                        f"{text} overlaps {other} ({other_field})",
                        "Subnets of one VPC must not overlap; see docs/address-plan.md.",
                    )
            seen.append((field, net))


def _check_sizes(label: str, spec: Doc) -> None:
    sizes = {}
    for key in ("gpuRootVolumeSize", "modelCacheSize"):
        size = whole_gib(spec[key])
        if not size or str(spec[key]).startswith("0"):  # a size, positive, no leading zero
            raise _fail(
                label,
                f"spec.{key}",
                f"{spec[key]!r} is not a size in whole gibibytes (e.g. 200Gi)",
                "Write sizes as <N>Gi.",
            )
        sizes[key] = size
    if sizes["modelCacheSize"] >= sizes["gpuRootVolumeSize"]:
        raise _fail(
            label,
            "spec.modelCacheSize",
            f"{spec['modelCacheSize']} does not fit the GPU root volume "
            f"{spec['gpuRootVolumeSize']} (spec.gpuRootVolumeSize), which also holds the OS "
            "and container images",
            "Raise gpuRootVolumeSize or lower modelCacheSize.",
        )


def _check_hyperpod(label: str, block: Doc) -> HyperPodProfile:
    name = block["clusterName"]
    if not _HYPERPOD_CLUSTER.match(name):
        raise _fail(
            label,
            "spec.hyperpod.clusterName",
            f"{name!r} is not a SageMaker HyperPod cluster name (1-63 letters, digits and "
            "'-', starting and ending with a letter or digit)",
            "Use the name the HyperPod console or sagemaker:ListClusters shows.",
        )
    kind = block["instanceType"]
    _check_ml_gpu_type(label, "spec.hyperpod.instanceType", kind)
    fallbacks = tuple(block.get("fallbackInstanceTypes") or ())
    for index, other in enumerate(fallbacks):
        field = f"spec.hyperpod.fallbackInstanceTypes.{index}"
        _check_ml_gpu_type(label, field, other)
        if other in (kind, *fallbacks[:index]):
            raise _fail(
                label,
                field,
                f"{other!r} is listed twice (instanceType, then the fallbacks, each once)",
                "Remove the repeat: the operator tries each type once, in order.",
            )
    role = block["executionRoleName"]
    if not ROLE_NAME.match(role):
        raise _fail(
            label,
            "spec.hyperpod.executionRoleName",
            f"{role!r} is not a valid IAM role name (1-64 characters from letters, digits and "
            "+=,.@_-)",
            "Give the role's name, not its ARN: the add-on's executionRoleArn must end in it.",
        )
    uri = block["tlsCertificateS3Uri"]
    bucket = _S3_URI.match(uri)
    if not bucket or ".." in bucket.group(1):
        raise _fail(
            label,
            "spec.hyperpod.tlsCertificateS3Uri",
            f"{uri!r} is not s3://<bucket>[/<prefix>] with a valid bucket name (3-63 lowercase "
            "letters, digits, '.' and '-')",
            "Name the bucket the inference add-on was installed with (its "
            "tlsCertificateS3Bucket), e.g. s3://my-hyperpod-tls/certificates.",
        )
    return HyperPodProfile(name, kind, role, uri, fallbacks)


def _check_ml_gpu_type(label: str, field: str, kind: str) -> None:
    """An ml.* type of a known size (when its family is known) with a GPU."""
    from eksinf.model.prices import load_catalogue

    match = _ML_TYPE.match(kind)
    if not match:
        raise _fail(
            label,
            field,
            f"{kind!r} is not a SageMaker instance type (ml.<family>.<size>)",
            "HyperPod instance groups use ml.* types, for example ml.g5.2xlarge.",
        )
    ec2 = match.group(1)
    family = ec2.split(".")[0]
    sizes = {t.name: t for t in load_catalogue().get(family, ())}  # unknown family: not judged
    if sizes and ec2 not in sizes:
        raise _fail(
            label,
            field,
            f"{kind!r} is not a size of {family} (known: {', '.join(sorted(sizes))})",
            "Check the spelling against the instance group's InstanceType.",
        )
    if sizes and not sizes[ec2].gpus:
        raise _fail(
            label,
            field,
            f"{kind!r} has no GPU: the model server needs one",
            "Pick a GPU type such as ml.g5.2xlarge (the CPU group runs the controllers).",
        )


def load_profile(stack: Stack, path: Path | None = None) -> Profile:
    """Read and check the profile unit (default: render/platform-profile/profile.yaml)."""
    path = path or default_path(stack)
    try:
        label = str(path.relative_to(stack.root))
    except ValueError:
        label = str(path)
    if not path.is_file():
        raise EksinfError(
            f"{label}: profile not found",
            hint="The stack's platform profile lives in render/platform-profile/profile.yaml.",
            exit_code=CONTRACT,
        )
    # a plain `y` or `0755` is refused: Kubernetes, YAML 1.2 and YAML 1.1 read it differently
    docs = load_mapping_docs(path, label=label, ambiguous=False)
    if len(docs) != 1:
        raise EksinfError(
            f"{label}: expected one PlatformProfile document, found {len(docs)}",
            hint="Keep exactly one profile per stack.",
            exit_code=CONTRACT,
        )
    return check_profile(docs[0], label)
