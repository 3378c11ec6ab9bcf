"""Switching a running stack from the Go original to eksinf deletes nothing in AWS.

The original's objects are listed in ../shared/reference/eks-inference-original-objects.json
(kind, namespace, name, AWS name, unit). Argo CD prunes what a release no longer holds, and ACK
deletes the AWS resource of a pruned object, so every ACK object of the original must be in
eksinf's releases under the same identity, with the same AWS name.
"""

from __future__ import annotations

import json

import pytest
from conftest import REPO

from eksinf.links import load_bindings, resolve_units
from eksinf.model.awsobjects import read_lock
from eksinf.model.configs import read_units, resources
from eksinf.model.profile import load_profile
from eksinf.model.stack import load_stack

REFERENCE = REPO.parent / "shared" / "reference" / "eks-inference-original-objects.json"


@pytest.fixture(scope="module")
def original() -> list[dict]:
    if not REFERENCE.is_file():
        pytest.fail(f"{REFERENCE} is missing: clone the repo beside ../shared")
    return [o for o in json.loads(REFERENCE.read_text()) if ".services.k8s.aws/" in o["apiVersion"]]


@pytest.fixture(scope="module")
def shipped() -> dict[tuple[str, str, str, str], dict]:
    """eksinf's ACK objects as the hub publishes them (the profile's values written in)."""
    stack = load_stack(REPO)
    units = resolve_units(
        read_units(stack.configs_dir), load_profile(stack).spec, load_bindings(stack)
    )
    return {
        (r.api_version, r.kind, r.namespace or "", r.name): r.doc
        for r in resources(units)
        if r.group.endswith(".services.k8s.aws")
    }


def test_every_original_ack_object_ships_under_its_own_identity(original, shipped):
    assert len(original) == 20
    wanted = {(o["apiVersion"], o["kind"], o["namespace"], o["name"]) for o in original}
    assert wanted - set(shipped) == set()  # nothing Argo CD would prune
    assert set(shipped) - wanted == set()  # nothing new created beside the original's


def test_every_original_aws_name_is_kept(original, shipped):
    """A changed AWS name of a SecurityGroup, Role or Cluster is a replacement: delete, create."""
    for o in original:
        if not o["awsName"]:
            continue
        doc = shipped[(o["apiVersion"], o["kind"], o["namespace"], o["name"])]
        assert doc["spec"]["name"] == o["awsName"], (o["kind"], o["name"])


def test_the_lock_guards_every_original_object(original):
    recorded = {(o.kind, o.namespace, o.name) for o in read_lock(REPO) if not o.retired}
    assert {(o["kind"], o["namespace"], o["name"]) for o in original} <= recorded
