"""Switching a running stack from the Go original to eksinf deletes nothing in AWS.

The original's objects are listed in ../shared/reference/eks-inference-original-objects.json
(kind, namespace, name, AWS name, unit). Argo CD prunes what a release no longer holds, and ACK
deletes the AWS resource of a pruned object, so every ACK object of the original must be in
eksinf's releases under the same identity, with the same AWS name.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, control_plane

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


# ---- the switch on a real API server --------------------------------------------------------
#
# Argo CD itself cannot run here (no container runtime), so its sync is played by this file, in
# the two steps that decide what is deleted: every object of the new release is applied
# (server-side, as the stack's Applications ask: `ServerSideApply=true`), then every live object
# that the Application tracks and the new release no longer holds is deleted (prune on). Argo CD
# 3.x tracks by annotation (the default `application.resourceTrackingMethod`, which neither the
# original nor eksinf changes): `argocd.argoproj.io/tracking-id: <app>:<group>/<Kind>:<ns>/<name>`,
# and an object counts as the app's only when that id names the object itself. Both tools name
# a component's Application `<component>-<variant>` (eksinf: model.names.variant_space), so the
# original's objects are tracked by the very Applications eksinf's releases are synced through.
# The API server, the CRDs, the objects, the applies and the deletes are real (kube-apiserver
# v1.31 with eksinf's kube client); the pruning decision is Argo CD's rule, written out below.

TRACKING = "argocd.argoproj.io/tracking-id"
VARIANT = "dev"


def tracking_id(app: str, doc: dict) -> str:
    group = doc["apiVersion"].rpartition("/")[0]
    meta = doc["metadata"]
    return f"{app}:{group}/{doc['kind']}:{meta.get('namespace') or ''}/{meta['name']}"


def tracked(doc: dict, app: str) -> dict:
    """`doc` as Argo CD leaves it after syncing it through `app`: its tracking id written in."""
    out = copy.deepcopy(doc)
    notes = out.setdefault("metadata", {}).setdefault("annotations", {})
    notes[TRACKING] = tracking_id(app, out)
    return out


def ident(doc: dict) -> tuple[str, str, str, str]:
    meta = doc["metadata"]
    return (doc["apiVersion"], doc["kind"], meta.get("namespace") or "", meta["name"])


def is_ack(api_version: str) -> bool:
    return api_version.rpartition("/")[0].endswith(".services.k8s.aws")


def release(root: Path) -> dict[str, dict[str, list[dict]]]:
    """eksinf's releases of `root`, {component: {unit: objects}}, as the hub publishes them (the
    profile's values written in), CRDs included; hub-only components (the profile) are never
    applied."""
    stack = load_stack(root)
    units = resolve_units(
        read_units(stack.configs_dir), load_profile(stack).spec, load_bindings(stack)
    )
    planes = {c.name: c.plane for c in stack.components}
    out: dict[str, dict[str, list[dict]]] = {}
    for r in resources(units):
        component, unit = r.unit.split("/")
        if planes[component] != "hub":
            out.setdefault(component, {}).setdefault(unit, []).append(copy.deepcopy(r.doc))
    return out


def objects(units: dict[str, list[dict]]) -> list[dict]:
    return [d for docs in units.values() for d in docs]


# The original's unit -> eksinf's (docs/migrating.md).
UNIT_RENAMES = {"00-namespace": "namespace", "vllm-qwen": "vllm"}


def original_objects(original_all: list[dict], new: dict[str, dict[str, list[dict]]]) -> dict:
    """The original's live objects, per component. The reference lists each object's identity
    (and AWS name), not its body: the body is eksinf's object of the same identity, else eksinf's
    one object of that kind in the unit that replaced it (`vllm-qwen`'s Deployment and Service
    are eksinf's `vllm` ones under the original's name). The profile is never applied."""
    out: dict[str, list[dict]] = {}
    for o in original_all:
        if o["kind"] == "PlatformProfile":
            continue
        key = (o["apiVersion"], o["kind"], o["namespace"], o["name"])
        same = [d for d in objects(new[o["component"]]) if ident(d) == key]
        if not same:
            unit = new[o["component"]][UNIT_RENAMES.get(o["unit"], o["unit"])]
            same = [d for d in unit if (d["apiVersion"], d["kind"]) == key[:2]]
            assert len(same) == 1, f"no body for {key}: {[ident(d) for d in same]}"
        doc = copy.deepcopy(same[0])
        doc["metadata"]["name"] = o["name"]
        if o["awsName"]:
            doc["spec"]["name"] = o["awsName"]
        out.setdefault(o["component"], []).append(doc)
    return out


def sync(kube, component: str, docs: list[dict], kinds: set[tuple[str, str]]) -> list[tuple]:
    """Argo CD's sync of `<component>-<variant>` with prune on: apply every object of the release
    (tracked), then delete what the app tracks and the release no longer holds. Returns the
    identities deleted."""
    from eksinf.kube.apply import apply_all
    from eksinf.kube.client import object_ref, resource_path
    from eksinf.model.names import variant_space

    app = variant_space(component, VARIANT)
    apply_all(kube, [tracked(d, app) for d in docs], force=True)
    wanted = {ident(d) for d in docs}
    pruned = []
    for api_version, kind in sorted(kinds | {(d["apiVersion"], d["kind"]) for d in docs}):
        for live in kube.items(resource_path(api_version, kind)):
            live.setdefault("apiVersion", api_version)
            live.setdefault("kind", kind)
            notes = live["metadata"].get("annotations") or {}
            if notes.get(TRACKING) != tracking_id(app, live) or ident(live) in wanted:
                continue
            assert kube.delete(object_ref(live))
            pruned.append(ident(live))
    return pruned


@pytest.fixture(scope="module")
def original_all() -> list[dict]:
    return json.loads(REFERENCE.read_text())


@pytest.fixture(scope="module")
def own_plane():
    """A control plane of this module's own: the original's objects have fixed names (the vllm
    Service among them) that other tests create too, and a bare kube-apiserver has no namespace
    controller to clear them after, so they are kept off the session's shared server."""
    yield from control_plane()


@pytest.fixture(scope="module")
def switched(own_plane, original_all):
    """A server holding the original's objects, each tracked by its Application, switched to
    eksinf's releases component by component. Returns (client, {component: pruned})."""
    from eksinf.kube.apply import apply_all
    from eksinf.kube.client import KubeClient, parse_kubeconfig

    kube = KubeClient.from_auth(parse_kubeconfig(own_plane.kubeconfig(), Path("."), "plane"))
    new = release(REPO)
    before = original_objects(original_all, new)
    # The kinds exist, as on the original's cluster: the CRDs of the original's components (the
    # server is shared by the session: nothing beyond what the switch needs is created).
    crds = [
        d
        for component in before
        for d in objects(new[component])
        if d["kind"] == "CustomResourceDefinition"
    ]
    apply_all(kube, crds, force=True)
    for component, docs in before.items():
        app = f"{component}-{VARIANT}"
        apply_all(kube, [tracked(d, app) for d in docs], force=True)
    kinds = {(o["apiVersion"], o["kind"]) for o in original_all if o["kind"] != "PlatformProfile"}
    pruned = {c: sync(kube, c, objects(new[c]), kinds) for c in sorted(before)}
    return kube, pruned


def test_switching_to_eksinf_prunes_no_aws_backed_object(switched, original_all):
    from eksinf.kube.client import resource_path

    kube, pruned = switched
    gone = [key for keys in pruned.values() for key in keys]
    # what Argo CD deletes: the model server's Deployment and Service, renamed with their unit
    # (`vllm-qwen` -> `vllm`; a workload, recreated at once under the new name), and nothing else
    assert sorted(gone) == [
        ("apps/v1", "Deployment", "inference", "vllm-qwen"),
        ("v1", "Service", "inference", "vllm-qwen"),
    ]
    assert [key for key in gone if is_ack(key[0]) or key[1] == "Namespace"] == []
    for o in original_all:
        if not is_ack(o["apiVersion"]):
            continue
        live = kube.get(resource_path(o["apiVersion"], o["kind"], o["namespace"], o["name"]))
        assert live is not None, o
        assert "deletionTimestamp" not in live["metadata"], o
        if o["awsName"]:
            assert live["spec"]["name"] == o["awsName"], o
        # tracked by the same Application: Argo CD keeps syncing it, never prunes it
        assert live["metadata"]["annotations"][TRACKING] == tracking_id(
            f"{o['component']}-{VARIANT}",
            {**live, "apiVersion": o["apiVersion"], "kind": o["kind"]},
        )


def git(root: Path, *args: str) -> None:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1"}  # fmt: skip
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={**os.environ, **env})  # fmt: skip


NATGW = ("ec2.services.k8s.aws/v1alpha1", "NATGateway", "aws-inference", "inference-demo-natgw")


def rename_natgw(root: Path) -> None:
    """Rename the NAT gateway's object to `natgw` in a copy of the stack: the object, the route
    that names it and its binding, in render/ and configs/ alike."""
    for rel in (
        "render/aws-network/network.yaml",
        "render/aws-network/links/bindings.yaml",
        "configs/aws-network/network.yaml",
    ):
        path = root / rel
        assert "inference-demo-natgw\n" in path.read_text()
        path.write_text(path.read_text().replace("inference-demo-natgw\n", "natgw\n"))


def test_a_renamed_ack_object_would_be_pruned_and_lint_refuses_it(switched, stack_dir, eksinf):
    """The guard's reason, on the server: a release that renames the NAT gateway's object makes
    Argo CD prune the original's (and ACK delete the NAT gateway behind it). eksinf refuses to
    ship that release: lint exits 3 and says what to do."""
    from eksinf.errors import CONTRACT
    from eksinf.kube.client import resource_path

    rename_natgw(stack_dir)
    result = eksinf("lint", cwd=stack_dir)
    assert result.code == CONTRACT, result.out + result.err
    assert "aws-object-removed" in result.out
    assert "NATGateway aws-inference/inference-demo-natgw" in result.out
    # the steps: keep the name, or retire the entry on purpose
    assert "Keep its name" in result.out and "retired: <why>" in result.out

    kube, _ = switched
    old = NATGW
    assert kube.get(resource_path(*old)) is not None
    pruned = sync(kube, "aws-network", objects(release(stack_dir)["aws-network"]), set())
    assert pruned == [old]
    assert kube.get(resource_path(*old)) is None  # ACK would now delete the NAT gateway


def test_renaming_an_ack_object_fails_lint_and_diff_names_the_aws_resource(
    stack_dir, eksinf, chart_mirror
):
    """The same rename as a pull request would make it: `eksinf lint` exits 3 and `eksinf diff`
    against the base puts `aws-resource-deleted` first, naming the object and the AWS resource."""
    from eksinf.errors import CONTRACT

    (stack_dir / ".gitignore").write_text(".eksinf/\n")
    git(stack_dir, "init", "-q", "-b", "main")
    git(stack_dir, "add", "-A")
    git(stack_dir, "commit", "-q", "-m", "base")
    rename_natgw(stack_dir)

    lint = eksinf("lint", "--json", cwd=stack_dir)
    assert lint.code == CONTRACT, lint.err
    removed = [f for f in json.loads(lint.out)["findings"] if f["check"] == "aws-object-removed"]
    assert [f["places"] for f in removed] == [
        ["aws-objects.lock ec2.services.k8s.aws NATGateway aws-inference/inference-demo-natgw"]
    ]

    base = ("--stack", str(stack_dir), "diff", "main", "--chart-mirror", str(chart_mirror))
    diff = eksinf(*base, "--format", "json")
    assert diff.code == 0, diff.err
    findings = json.loads(diff.out)["findings"]
    assert findings[0]["class"] == "aws-resource-deleted", findings
    deleted = [f for f in findings if f["class"] == "aws-resource-deleted"]
    assert len(deleted) == 1 and "inference-demo-natgw" in deleted[0]["resource"], deleted
    assert "NATGateway" in deleted[0]["resource"] + deleted[0]["reason"]
    text = eksinf(*base).out
    assert "⛔ aws-resource-deleted: " in text


# ---- docs/migrating.md holds the whole table ------------------------------------------------

DOC = REPO / "docs" / "migrating.md"


def test_the_doc_maps_every_object_and_unit_of_the_original(original_all):
    """Each of the original's objects is listed in the row of its component and unit, and that
    row names the unit's eksinf name when it changed."""
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[1].startswith("`"):
            rows[(cells[0], cells[1].split("`")[1])] = cells
    for o in original_all:
        row = rows.get((o["component"], o["unit"]))
        assert row is not None, f"no row for unit {o['component']}/{o['unit']} in {DOC.name}"
        where = f"{o['namespace']}/" if o["namespace"] else ""
        assert f"{o['kind']} `{where}{o['name']}`" in row[2], (o, row)
        renamed = UNIT_RENAMES.get(o["unit"])
        if renamed:
            assert f"`{o['unit']}` → `{renamed}`" in row[1], row


def test_the_doc_names_every_flag_of_the_original():
    """Every flag of cli/original.py's table is in docs/migrating.md, in a code span."""
    from eksinf.cli.original import FLAGS

    text = DOC.read_text()
    spans = " ".join(re.findall(r"`([^`]+)`", text))
    missing = [f.flag for f in FLAGS if not re.search(rf"{re.escape(f.flag)}(?![\w-])", spans)]
    assert missing == []
