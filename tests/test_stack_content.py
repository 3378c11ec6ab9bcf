"""The stack's handwritten units use real field names once resolved.

- ACK resources are checked against the CRDs the pinned ACK charts render (configs/ack-controllers),
  including unknown fields, which an API server would silently prune.
- Core Kubernetes resources are checked strictly with kubernetes-validate at the render version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from eksinf.links import load_bindings, resolve_units
from eksinf.model.configs import read_units
from eksinf.model.profile import load_profile
from eksinf.model.stack import load_stack


def unknown_fields(value: Any, schema: dict, path: str) -> list[str]:
    """Keys the structural schema does not declare (the API server would drop them)."""
    out: list[str] = []
    if isinstance(value, dict) and "properties" in schema:
        props = schema["properties"]
        for key, item in value.items():
            if key in props:
                out += unknown_fields(item, props[key], f"{path}.{key}")
            elif not schema.get("additionalProperties") and not schema.get(
                "x-kubernetes-preserve-unknown-fields"
            ):
                out.append(f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            out += unknown_fields(item, schema["items"], f"{path}.{index}")
    return out


REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def resolved():
    stack = load_stack(REPO)
    units = read_units(stack.configs_dir)
    return units, resolve_units(units, load_profile(stack).spec, load_bindings(stack))


def ack_schemas(units: dict) -> dict[tuple[str, str], dict]:
    out = {}
    for key, docs in units.items():
        if not key.startswith("ack-controllers/") or not key.endswith("-crds"):
            continue
        for crd in docs:
            version = crd["spec"]["versions"][0]
            out[(f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])] = (
                version["schema"]["openAPIV3Schema"]
            )
    return out


def test_ack_resources_match_the_rendered_crds(resolved):
    units, out = resolved
    schemas = ack_schemas(units)
    checked = 0
    for key, docs in out.items():
        for doc in docs:
            if not str(doc.get("apiVersion", "")).split("/")[0].endswith("services.k8s.aws"):
                continue
            schema = schemas.get((doc["apiVersion"], doc["kind"]))
            assert schema is not None, f"{key}: no CRD for {doc['apiVersion']} {doc['kind']}"
            body = {k: v for k, v in doc.items() if k != "metadata"}
            jsonschema.validate(body, schema)
            assert unknown_fields(body["spec"], schema["properties"]["spec"], "spec") == [], key
            checked += 1
    assert checked >= 20  # 13 network resources, 3 roles, cluster, nodegroup, add-on, PIA


def test_unknown_ack_field_is_detected(resolved):
    units, _ = resolved
    schema = ack_schemas(units)[("ec2.services.k8s.aws/v1alpha1", "Subnet")]
    spec = {"cidrBlock": "10.0.0.0/24", "availabilityZoneName": "us-west-2a"}
    assert unknown_fields(spec, schema["properties"]["spec"], "spec") == [
        "spec.availabilityZoneName"
    ]


def test_core_resources_validate_strictly(resolved):
    _, out = resolved
    checked = 0
    for docs in out.values():
        for doc in docs:
            if doc.get("apiVersion") in ("v1", "apps/v1"):
                kubernetes_validate.validate(doc, "1.31", strict=True)
                checked += 1
    assert checked >= 10
