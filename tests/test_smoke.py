"""The committed stack renders, verifies and reports its components."""

import json


def test_verify_is_clean_on_committed_stack(eksinf, stack_dir, chart_mirror):
    result = eksinf("verify", "--chart-mirror", str(chart_mirror), cwd=stack_dir)
    assert result.code == 0, result.err
    assert "in sync" in result.err


def test_components_json_lists_planes_in_order(eksinf, stack_dir):
    result = eksinf("components", "--json", cwd=stack_dir)
    assert result.code == 0
    rows = json.loads(result.out)["components"]
    planes = [r["plane"] for r in rows]
    assert planes == sorted(planes, key=["hub", "mgmt", "workload"].index)
    assert {"karpenter", "gpu-runtime", "ack-controllers"} <= {r["name"] for r in rows}
