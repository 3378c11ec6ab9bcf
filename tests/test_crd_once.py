"""Each CRD once, each resource id once per plane.

A CRD that two charts of one component emit is written once, in the first chart's CRD unit; a
different definition under the same name is exit 3 naming both sources; conservation counts the
shared copies. verify and lint fail on any resource id (group, kind, namespace, name) that a
plane holds twice.
"""

from __future__ import annotations

import json

import yaml
from chartkit import CONFIGMAP, ChartSource, crd, publish_stack

from eksinf.errors import CONTRACT

SHARED = crd("Shared", group="runtime.example.com")


def _names(path) -> list[str]:
    return [d["metadata"]["name"] for d in yaml.safe_load_all(path.read_text()) if d]


def test_a_crd_two_charts_ship_is_written_once_in_the_first_charts_unit(tmp_path, registry, eksinf):
    one = ChartSource(
        "one", templates={"cm.yaml": CONFIGMAP}, crds={"s.yaml": SHARED, "a.yaml": crd("Alpha")}
    )
    two = ChartSource(
        "two", templates={"cm.yaml": CONFIGMAP}, crds={"s.yaml": SHARED, "b.yaml": crd("Beta")}
    )
    root = publish_stack(tmp_path, registry, [("one", one), ("two", two)])
    result = eksinf("render", "--json", cwd=root)
    assert result.code == 0, result.err
    assert sorted(_names(root / "configs/apps/one-crds.yaml")) == [
        "alphas.example.com",
        "shareds.runtime.example.com",
    ]
    assert _names(root / "configs/apps/two-crds.yaml") == ["betas.example.com"]
    report = {c["chart"]: c for c in json.loads(result.out)["charts"]}
    # conservation: chart two emitted 2 CRDs, wrote 1, and 1 is counted as written elsewhere
    assert report["two"]["crds"] == 2
    assert report["two"]["sharedCrds"] == {"shareds.runtime.example.com": "one-crds.yaml"}
    assert report["one"]["sharedCrds"] == {}

    result = eksinf("render", cwd=root)
    assert (
        "apps: two: 1 resources + 2 CRDs (1 already written once, in one-crds.yaml)" in result.err
    )
    assert eksinf("verify", cwd=root).code == 0


def test_two_definitions_of_one_crd_name_name_both_sources(tmp_path, registry, eksinf):
    other = SHARED.replace(
        "{type: object}", "{type: object, x-kubernetes-preserve-unknown-fields: true}"
    )
    assert other != SHARED
    one = ChartSource("one", crds={"s.yaml": SHARED})
    two = ChartSource("two", crds={"shared-v2.yaml": other})
    root = publish_stack(tmp_path, registry, [("one", one), ("two", two)])
    result = eksinf("render", cwd=root)
    assert result.code == CONTRACT
    assert (
        "apps: CRD shareds.runtime.example.com is defined differently by chart one "
        "(one/crds/s.yaml) and chart two (two/crds/shared-v2.yaml)"
    ) in result.err
    assert not (root / "configs").exists()


def test_verify_and_lint_fail_on_a_resource_id_twice_in_a_plane(stack_dir, chart_mirror, eksinf):
    unit = stack_dir / "render/inference-workloads/namespace.yaml"
    (stack_dir / "render/inference-workloads/again.yaml").write_text(unit.read_text())
    assert eksinf("render", "--chart-mirror", str(chart_mirror), cwd=stack_dir).code == 0
    ns = yaml.safe_load(unit.read_text())["metadata"]["name"]

    result = eksinf("verify", "--chart-mirror", str(chart_mirror), cwd=stack_dir)
    assert result.code == CONTRACT
    assert (
        f"Namespace {ns} appears 2 times in plane workload: "
        "configs/inference-workloads/again.yaml, configs/inference-workloads/namespace.yaml"
    ) in result.err

    result = eksinf("lint", "--json", cwd=stack_dir)
    findings = [f for f in json.loads(result.out)["findings"] if f["check"] == "unique-ids"]
    assert [f["message"] for f in findings] == [f"Namespace {ns} appears 2 times in plane workload"]
    assert findings[0]["places"] == [
        f"configs/inference-workloads/again.yaml Namespace /{ns}",
        f"configs/inference-workloads/namespace.yaml Namespace /{ns}",
    ]
    assert result.code == CONTRACT


def test_the_same_name_in_another_group_or_plane_is_not_a_duplicate(stack_dir, eksinf):
    from eksinf.build.validate import ids

    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "a"}}
    other_group = {**cm, "apiVersion": "example.com/v1"}
    assert (
        ids.duplicates([("mgmt", "u1", cm), ("workload", "u2", cm), ("mgmt", "u3", other_group)])
        == []
    )
    [dup] = ids.duplicates([("mgmt", "u1", cm), ("mgmt", "u2", cm)])
    assert dup.places == ("u1", "u2") and str(dup.id) == "ConfigMap a/x"
