"""The drift gate on a copy of the committed stack, rendered from the offline chart mirror."""

from __future__ import annotations

import json

import yaml
from chartkit import ChartSource, publish_stack
from test_guard import SECRET

from eksinf.errors import CONTRACT, FAILURE

CHANGED_UNIT = "gpu-runtime/nvidia-device-plugin-controller.yaml"


def edit_values(stack_dir) -> None:
    path = stack_dir / "render/gpu-runtime/values/nvidia-device-plugin.yaml"
    values = yaml.safe_load(path.read_text()) or {}
    values.setdefault("nodeSelector", {})["drift-test"] = "yes"
    path.write_text(yaml.safe_dump(values))


def verify(eksinf, stack_dir, chart_mirror, *args):
    return eksinf("verify", "--chart-mirror", str(chart_mirror), *args, cwd=stack_dir)


def test_clean_stack_verifies(eksinf, stack_dir, chart_mirror):
    result = verify(eksinf, stack_dir, chart_mirror)
    assert result.code == 0, result.err
    assert result.out == ""
    assert "configs/ is in sync with its sources" in result.err


def test_values_edit_without_render_is_drift(eksinf, stack_dir, chart_mirror):
    edit_values(stack_dir)
    result = verify(eksinf, stack_dir, chart_mirror)
    assert result.code == FAILURE
    assert f"--- configs/{CHANGED_UNIT}" in result.out
    assert f"+++ rendered/{CHANGED_UNIT}" in result.out
    assert "+        drift-test: 'yes'" in result.out
    # the values file is an input, so the provenance record's inputs digest moves too
    assert "eksinf: configs/ is out of sync with its sources: 2 changed, 0 missing, 0 stale" in (
        result.err
    )
    assert "Run `eksinf render` and commit the result." in result.err

    fixed = eksinf("render", "--chart-mirror", str(chart_mirror), cwd=stack_dir)
    assert fixed.code == 0, fixed.err
    assert verify(eksinf, stack_dir, chart_mirror).code == 0


def test_binding_and_hazard_allow_edits_are_not_drift(eksinf, stack_dir, chart_mirror):
    # links/ and HAZARDS.allow are read live (lint, hub, guard) and never reach configs/, so the
    # inputs digest leaves them out; a values edit still moves it.
    for rel in ("render/karpenter/links/bindings.yaml", "render/karpenter/HAZARDS.allow"):
        path = stack_dir / rel
        path.write_text(path.read_text() + "# reviewed again\n")
    result = verify(eksinf, stack_dir, chart_mirror)
    assert result.code == 0, result.out + result.err
    assert "configs/ is in sync with its sources" in result.err
    lint = eksinf("lint", cwd=stack_dir)
    assert lint.code == 0, lint.out + lint.err
    assert "configs-stale" not in lint.out + lint.err

    edit_values(stack_dir)
    drifted = verify(eksinf, stack_dir, chart_mirror)
    assert drifted.code == FAILURE
    assert "--- configs/provenance.json" in drifted.out


def test_verify_json_names_the_changed_unit(eksinf, stack_dir, chart_mirror):
    edit_values(stack_dir)
    result = verify(eksinf, stack_dir, chart_mirror, "--json")
    assert result.code == FAILURE
    report = json.loads(result.out)  # stdout is nothing but the JSON document
    assert report["clean"] is False
    assert report["changed"] == [CHANGED_UNIT, "provenance.json"]
    assert report["added"] == [] and report["removed"] == []
    assert report["guard"] == {"ok": True}


def test_stale_and_missing_units(eksinf, stack_dir, chart_mirror):
    (stack_dir / "configs/karpenter/old-unit.yaml").write_text("kind: Old\n")
    (stack_dir / "configs/ack-controllers/iam-crds.yaml").unlink()
    result = verify(eksinf, stack_dir, chart_mirror, "--json")
    assert result.code == FAILURE
    report = json.loads(result.out)
    assert report["removed"] == ["karpenter/old-unit.yaml"]
    assert report["added"] == ["ack-controllers/iam-crds.yaml"]
    assert report["changed"] == []


def test_diff_is_capped_unless_full(eksinf, stack_dir, chart_mirror):
    (stack_dir / "configs/ack-controllers/iam-crds.yaml").unlink()
    capped = verify(eksinf, stack_dir, chart_mirror)
    assert capped.code == FAILURE
    lines = capped.out.splitlines()
    assert len(lines) == 61
    assert lines[-1].startswith("... ") and lines[-1].endswith(" more diff lines (use --full)")

    full = verify(eksinf, stack_dir, chart_mirror, "--full")
    assert full.code == FAILURE
    assert "more diff lines" not in full.out
    hidden = int(lines[-1].split()[1])
    assert len(full.out.splitlines()) == 60 + hidden


def test_verify_one_component(eksinf, stack_dir, chart_mirror):
    edit_values(stack_dir)
    other = verify(eksinf, stack_dir, chart_mirror, "--component", "karpenter", "--json")
    assert other.code == 0, other.err
    karpenter_units = len(list((stack_dir / "configs/karpenter").iterdir()))
    assert json.loads(other.out)["checked"] == karpenter_units
    same = verify(eksinf, stack_dir, chart_mirror, "--component", "gpu-runtime", "--json")
    assert same.code == FAILURE
    assert json.loads(same.out)["changed"] == [CHANGED_UNIT]


def test_provenance_drift_is_reported(eksinf, stack_dir, chart_mirror):
    path = stack_dir / "configs/provenance.json"
    record = json.loads(path.read_text())
    record["kubeVersion"] = "0.0.0"
    path.write_text(json.dumps(record))
    result = verify(eksinf, stack_dir, chart_mirror, "--json")
    assert result.code == FAILURE
    assert json.loads(result.out)["changed"] == ["provenance.json"]


def test_unhandled_hazard_fails_verify_even_when_in_sync(tmp_path, registry, eksinf):
    chart = ChartSource("verifyguard", templates={"secret.yaml": SECRET}, values={"token": "t"})
    root = publish_stack(tmp_path, registry, [("app", chart)])
    assert eksinf("render", "--skip-guard", cwd=root).code == 0
    result = eksinf("verify", cwd=root)
    assert result.code == CONTRACT
    assert "HAZARD secret: apps/app-controller.yaml: Secret/apps/creds" in result.err
