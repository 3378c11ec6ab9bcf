"""Network checks: discovery tags, the VPC CIDR, ACK references, tag keys and the stack tag."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from eksinf.core.types import Doc
from eksinf.model import paths
from eksinf.model.profile import STACK_TAG_KEY

from ..model.checks import Finding
from ..model.configs import ACK_GROUP_SUFFIX, Resource, of_kind, tag_path
from ..model.configs import tags as tag_map
from ..model.names import DISCOVERY_KEY
from ..model.placeholder import PLACEHOLDER
from .core import Context, check, coded, found


@check("discovery-tags")
def check_discovery(ctx: Context) -> Iterator[Finding]:
    """Discovery tags on private subnets + SG equal the EC2NodeClass selectors; public: none."""
    resources = ctx.resources
    subnets = of_kind(resources, "Subnet", "ec2.services.k8s.aws")
    groups = of_kind(resources, "SecurityGroup", "ec2.services.k8s.aws")
    tagged: dict[str, list[tuple[Resource, Any]]] = {"subnet": [], "sg": []}
    for r in subnets:
        spec = r.doc.get("spec") or {}
        tags = tag_map(spec)
        public = bool(spec.get("mapPublicIPOnLaunch")) or "kubernetes.io/role/elb" in tags
        if public and DISCOVERY_KEY in tags:
            yield coded(
                "discovery-public-subnet",
                f"public subnet carries {DISCOVERY_KEY}: Karpenter would launch nodes with "
                "public IPs into it",
                r.at(tag_path(spec, DISCOVERY_KEY)),
            )
        elif not public:
            if DISCOVERY_KEY not in tags:
                yield coded(
                    "discovery-missing",
                    f"private subnet has no {DISCOVERY_KEY} tag: Karpenter will not use its zone",
                    r.at("spec.tags"),
                )
            else:
                tagged["subnet"].append((r, tags[DISCOVERY_KEY]))
    for r in groups:
        spec = r.doc.get("spec") or {}
        tags = tag_map(spec)
        if DISCOVERY_KEY in tags:
            tagged["sg"].append((r, tags[DISCOVERY_KEY]))
    for r in of_kind(resources, "EC2NodeClass"):
        spec = r.doc.get("spec") or {}
        for field_name, kind in (
            ("subnetSelectorTerms", "subnet"),
            ("securityGroupSelectorTerms", "sg"),
        ):
            terms = spec.get(field_name) or []
            for index, term in enumerate(terms):
                want = (term.get("tags") or {}).get(DISCOVERY_KEY)
                if want is None or want == PLACEHOLDER:
                    continue  # unresolved: already reported by the link checks
                here = r.at(f"spec.{field_name}.{index}.tags.{paths.escape(DISCOVERY_KEY)}")
                carriers = tagged[kind]
                if not carriers:
                    yield coded(
                        "discovery-tag",
                        f"selects {'subnets' if kind == 'subnet' else 'security groups'} by "
                        f"{DISCOVERY_KEY}={want}, but no "
                        f"{'private subnet' if kind == 'subnet' else 'security group'} carries "
                        "that tag: Karpenter launches nothing and names no error",
                        here,
                        *[c.at("spec.tags") for c in (subnets if kind == "subnet" else groups)][:1],
                    )
                for carrier, value in carriers:
                    if value not in (want, PLACEHOLDER):
                        yield coded(
                            "discovery-tag",
                            f"{DISCOVERY_KEY} differs: the selector wants {want!r}, the "
                            f"{'subnet' if kind == 'subnet' else 'security group'} carries "
                            f"{value!r}: Karpenter launches nothing and names no error",
                            here,
                            carrier.at(tag_path(carrier.doc.get("spec") or {}, DISCOVERY_KEY)),
                        )


@check("network")
def check_network(ctx: Context) -> Iterator[Finding]:
    """The intra-VPC ingress rule names the VPC CIDR; every network resource has the stack tag."""
    resources = ctx.resources
    vpcs = of_kind(resources, "VPC", "ec2.services.k8s.aws")
    cidrs = {c for v in vpcs for c in (v.doc.get("spec") or {}).get("cidrBlocks") or []}
    if PLACEHOLDER in cidrs:
        cidrs = set()  # unresolved: already reported by the link checks
    for r in of_kind(resources, "SecurityGroup", "ec2.services.k8s.aws"):
        for ri, rule in enumerate((r.doc.get("spec") or {}).get("ingressRules") or []):
            for ni, rng in enumerate(rule.get("ipRanges") or []):
                cidr = rng.get("cidrIP")
                if not cidrs or cidr == PLACEHOLDER:
                    continue
                if rng.get("description") == "intra-VPC" and cidr not in cidrs:
                    yield coded(
                        "vpc-cidr",
                        f"intra-VPC ingress allows {rng.get('cidrIP')}, but the VPC is "
                        f"{', '.join(sorted(cidrs)) or 'absent'}: nodes join but cannot talk",
                        r.at(f"spec.ingressRules.{ri}.ipRanges.{ni}.cidrIP"),
                        vpcs[0].at("spec.cidrBlocks.0") if vpcs else "no VPC",
                    )
    for r in resources:
        if r.group == "ec2.services.k8s.aws" and STACK_TAG_KEY not in tag_map(
            r.doc.get("spec") or {}
        ):
            yield coded(
                "stack-tag",
                f"network resource has no {STACK_TAG_KEY} tag: status and teardown scope every "
                "AWS query by it",
                r.at("spec.tags"),
            )


# The kind an ACK reference field points at (the field name without Ref/Refs decides).
REF_KINDS = {
    "vpc": "VPC",
    "subnet": "Subnet",
    "routeTable": "RouteTable",
    "gateway": "InternetGateway",
    "natGateway": "NATGateway",
    "allocation": "ElasticIPAddress",
    "securityGroup": "SecurityGroup",
    "group": "SecurityGroup",
    "role": "Role",
    "nodeRole": "Role",
    "targetRole": "Role",
    "serviceAccountRole": "Role",
    "cluster": "Cluster",
    "policy": "Policy",
}


def _refs(node: Any, prefix: str = "") -> Iterator[tuple[str, str, Doc]]:
    """(path, field stem, from-block) of every ACK `*Ref`/`*Refs` in a spec."""
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{paths.escape(str(key))}" if prefix else paths.escape(str(key))
            stem = str(key).removesuffix("s").removesuffix("Ref")
            if str(key).endswith(("Ref", "Refs")):
                items = value if isinstance(value, list) else [value]
                for index, item in enumerate(items):
                    where = f"{path}.{index}" if isinstance(value, list) else path
                    block = (item or {}).get("from") if isinstance(item, dict) else None
                    if isinstance(block, dict):
                        yield f"{where}.from.name", stem, block
            else:
                yield from _refs(value, path)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _refs(value, f"{prefix}.{index}")


@check("ack-refs")
def check_ack_refs(ctx: Context) -> Iterator[Finding]:
    """Every ACK reference names a resource some mgmt-plane unit defines, of the right kind.

    A dangling reference is not an apply error: ACK waits for it forever, and the cluster (or
    nodegroup, or identity) that depends on it never appears.
    """
    resources = ctx.resources
    mgmt = [r for r in resources if r.plane == "mgmt" and r.group.endswith("services.k8s.aws")]
    index = {(r.namespace, r.name, r.kind) for r in mgmt}
    for r in mgmt:
        for path, stem, block in _refs(r.doc.get("spec") or {}, "spec"):
            name = block.get("name")
            ns = block.get("namespace") or r.namespace
            kind = REF_KINDS.get(stem)
            if kind is None or (ns, name, kind) in index:
                continue
            same = [x for x in mgmt if x.kind == kind and x.namespace == ns]
            yield coded(
                "ack-ref",
                f"references {kind} {ns}/{name}, which no mgmt-plane unit defines: ACK waits for "
                f"it forever (the namespace defines {kind}: {', '.join(x.name for x in same) or 'none'})",
                r.at(path),
                same[0].at("metadata.name") if same else f"no {kind} in namespace {ns}",
            )


#
# AWS and its controllers find some resources by an exact name or tag key, and say nothing when
# the spelling is off: Karpenter selects zero subnets, pods find no Pod Identity agent to hand out
# credentials, teardown misses a resource. These checks hold our units to those spellings.

CLUSTER_SG_KEY = "aws:eks:cluster-name"  # EKS tags the cluster security group it creates


def _squash(text: Any) -> str:
    """Letters only, lowercased: `Karpenter.sh/Discovery` and `karpenter_sh/discovery` agree."""
    return re.sub(r"[^a-z]", "", str(text).lower())


def _near_discovery(key: str) -> bool:
    squashed = _squash(key)
    return key != DISCOVERY_KEY and "karpenter" in squashed and "discover" in squashed


def _near_cluster_sg(key: str) -> bool:
    return key != CLUSTER_SG_KEY and "eksclustername" in _squash(key)


def _tag_items(spec: Doc) -> Iterator[tuple[str, Any, str, str]]:
    """(key, value, key path, value path) of each tag, list- or map-shaped."""
    tags = spec.get("tags")
    if isinstance(tags, list):
        for index, tag in enumerate(tags):
            if isinstance(tag, dict):
                at = f"spec.tags.{index}"
                yield str(tag.get("key")), tag.get("value"), f"{at}.key", f"{at}.value"
    elif isinstance(tags, dict):
        for key, value in tags.items():
            at = f"spec.tags.{paths.escape(str(key))}"
            yield str(key), value, at, at


@check("tag-key-spelling")
def check_tag_keys(ctx: Context) -> Iterator[Finding]:
    """Discovery and cluster-SG tag keys are spelled exactly; no tag key uses AWS's `aws:`."""
    resources = ctx.resources
    discovery_why = (
        f"Karpenter matches the exact key {DISCOVERY_KEY} (value: the network name), so this "
        "tag selects and marks nothing"
    )
    for r in resources:
        if not r.group.endswith(ACK_GROUP_SUFFIX):
            continue
        for key, value, key_path, value_path in _tag_items(r.doc.get("spec") or {}):
            if _near_discovery(key):
                yield found(
                    f"tag key {key!r} is not {DISCOVERY_KEY}: {discovery_why}",
                    r.at(key_path),
                )
            elif value == DISCOVERY_KEY:
                yield found(
                    f"{DISCOVERY_KEY} is the tag's value (key {key!r}); it must be the key: "
                    f"{discovery_why}",
                    r.at(value_path),
                )
            if key.lower().startswith("aws:"):
                yield found(
                    f"tag key {key!r} starts with 'aws:', which AWS reserves for its own tags: "
                    "the create call is rejected and ACK retries forever",
                    r.at(key_path),
                )
    for nc in of_kind(resources, "EC2NodeClass"):
        spec = nc.doc.get("spec") or {}
        for field_name in ("subnetSelectorTerms", "securityGroupSelectorTerms"):
            for index, term in enumerate(spec.get(field_name) or []):
                for key, value in (term.get("tags") or {}).items():
                    here = nc.at(f"spec.{field_name}.{index}.tags.{paths.escape(str(key))}")
                    if _near_discovery(str(key)) or value == DISCOVERY_KEY:
                        yield found(
                            f"selector tag {key}={value} is not keyed {DISCOVERY_KEY}: "
                            f"{discovery_why}",
                            here,
                        )
                    elif _near_cluster_sg(str(key)):
                        yield found(
                            f"selector tag key {key!r} is not {CLUSTER_SG_KEY}, the key EKS puts "
                            "on the cluster security group it creates: the term selects nothing "
                            "and nodes cannot reach CoreDNS on the managed nodes",
                            here,
                        )


def _taggable_kinds(resources: list[Resource]) -> set[tuple[str, str]]:
    """(group, kind) of every ACK kind whose CRD (as rendered) has spec.tags."""
    out: set[tuple[str, str]] = set()
    for crd in of_kind(resources, "CustomResourceDefinition"):
        spec = crd.doc.get("spec") or {}
        group, kind = spec.get("group", ""), (spec.get("names") or {}).get("kind")
        if not str(group).endswith(ACK_GROUP_SUFFIX):
            continue
        for version in spec.get("versions") or []:
            schema = (version.get("schema") or {}).get("openAPIV3Schema") or {}
            fields = ((schema.get("properties") or {}).get("spec") or {}).get("properties") or {}
            if "tags" in fields:
                out.add((str(group), str(kind)))
    return out


@check("stack-tag-ack")
def check_ack_stack_tag(ctx: Context) -> Iterator[Finding]:
    """Every ACK resource whose kind supports tags carries eksinf.dev/stack=<stackName>.

    Network resources missing the key are reported by `stack-tag` already; this adds the other
    ACK kinds (EKS, IAM) and checks the value on all of them.
    """
    resources, stack_name = ctx.resources, ctx.stack_name
    taggable = _taggable_kinds(resources)
    for r in resources:
        if (r.group, r.kind) not in taggable:
            continue
        spec = r.doc.get("spec") or {}
        tags = tag_map(spec)
        if STACK_TAG_KEY not in tags:
            if r.group != "ec2.services.k8s.aws":
                yield coded(
                    "stack-tag",
                    f"{r.kind} supports tags (its CRD has spec.tags) but carries no "
                    f"{STACK_TAG_KEY} tag: status and teardown scope every AWS query by it",
                    r.at("spec.tags"),
                )
            continue
        value = tags[STACK_TAG_KEY]
        if value != stack_name and PLACEHOLDER not in (value, stack_name):
            yield coded(
                "stack-tag",
                f"{STACK_TAG_KEY} is {value!r}, but the stack is {stack_name!r}: teardown and "
                "status would miss this resource or claim it for another stack",
                r.at(tag_path(spec, STACK_TAG_KEY)),
                "render/platform-profile/profile.yaml spec.stackName",
            )
