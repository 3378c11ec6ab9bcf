"""Naming checks: the cluster name, the model id, IAM role names, one resource id per plane."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from eksinf.build.validate import ids
from eksinf.core.types import Doc
from eksinf.model.profile import ROLE_NAME

from ..model.checks import Finding
from ..model.configs import Resource, of_kind
from ..model.placeholder import PLACEHOLDER
from ..model.resources import pod_spec, pod_spec_path
from .core import Context, check, found

PROFILE_CLUSTER = "render/platform-profile/profile.yaml spec.clusterName"


@check("cluster-name")
def check_cluster_name(ctx: Context) -> Iterator[Finding]:
    """Every place that carries the cluster name carries the profile's clusterName: the ACK
    Cluster's spec.name, any CLUSTER_NAME env var, the cluster-SG selector, and any EKS
    resource that names its cluster (spec.clusterName)."""
    name = ctx.profile.get("clusterName")
    if not isinstance(name, str) or name == PLACEHOLDER:
        return
    for place, value in _cluster_name_places(ctx.resources):
        if value not in (name, PLACEHOLDER):
            yield found(
                f"names cluster {value!r} but the profile's clusterName is {name!r}: Karpenter "
                "and the Pod Identity association would act on another cluster. Bind it to the "
                "profile (links/bindings.yaml) or fix the profile",
                place,
                PROFILE_CLUSTER,
            )


def _cluster_name_places(resources: list[Resource]) -> Iterator[tuple[str, Any]]:
    for r in resources:
        spec = r.spec
        if r.kind == "Cluster" and r.group == "eks.services.k8s.aws" and "name" in spec:
            yield r.at("spec.name"), spec["name"]
        if r.group.endswith(".services.k8s.aws") and "clusterName" in spec:
            yield r.at("spec.clusterName"), spec["clusterName"]
        for path, value in _env_values(r.doc, "CLUSTER_NAME"):
            yield r.at(path), value
        if r.kind == "EC2NodeClass":
            for index, term in enumerate(spec.get("securityGroupSelectorTerms") or []):
                tags = term.get("tags") if isinstance(term, dict) else None
                value = tags.get("aws:eks:cluster-name") if isinstance(tags, dict) else None
                if value is not None:
                    path = f"spec.securityGroupSelectorTerms.{index}.tags.aws:eks:cluster-name"
                    yield r.at(path), value


def _env_values(doc: Doc, env: str) -> Iterator[tuple[str, Any]]:
    spec = pod_spec(doc)
    if spec is None:
        return
    base = pod_spec_path(doc)
    for ci, container in enumerate(spec.get("containers") or []):
        for ei, var in enumerate(container.get("env") or []):
            if var.get("name") == env and "value" in var:
                yield f"{base}.containers.{ci}.env.{ei}.value", var["value"]


@check("model-id")
def check_model_id(ctx: Context) -> Iterator[Finding]:
    """Every client's VLLM_MODEL equals the model the server loads."""
    resources = ctx.resources
    seen = [
        (r, path, value)
        for r in resources
        if r.plane == "workload" and r.kind == "Deployment"
        for path, value in _env_values(r.doc, "VLLM_MODEL")
    ]
    if not seen:
        return
    first, first_path, first_value = seen[0]
    for r, path, value in seen[1:]:
        if value != first_value and PLACEHOLDER not in (value, first_value):
            yield found(
                f"VLLM_MODEL {value!r} differs from {first_value!r}: the server rejects "
                "requests for a model it did not load",
                r.at(path),
                first.at(first_path),
            )


@check("iam-role-name")
def check_role_names(ctx: Context) -> Iterator[Finding]:
    """Every IAM role name, as it ships (resolved through the profile), is a valid role name."""
    resources = ctx.resources
    for r in of_kind(resources, "Role", "iam.services.k8s.aws"):
        name = (r.doc.get("spec") or {}).get("name")
        if name is None or name == PLACEHOLDER or ROLE_NAME.match(str(name)):
            continue
        yield found(
            f"role name {name!r} ({len(str(name))} characters) is not a valid IAM role name: at "
            "most 64 of letters, digits and +=,.@_-; iam:CreateRole rejects it and ACK retries "
            "forever. Shorten the profile's role name (or the stack name it derives from)",
            r.at("spec.name"),
        )


@check("unique-ids")
def check_unique_ids(ctx: Context) -> Iterator[Finding]:
    """No resource id (group, kind, namespace, name) twice in one plane (validate.ids)."""
    resources = ctx.resources
    for d in ids.duplicates((r.plane, r.at(), r.doc) for r in resources):
        yield found(f"{d.id} appears {len(d.places)} times in plane {d.plane}", *d.places)
