"""Bases and releases say what they are: `eksinf push` publishes a base
(placeholders; input to `install --from`), a hub space publishes a release (resolved; what
Argo CD, Flux and kubectl apply consume). Pulling a base warns."""

from __future__ import annotations

import json

import yaml

from eksinf.model import placeholder


def _placeholders_in(folder) -> int:
    return sum(
        1
        for path in folder.glob("*.yaml")
        for doc in yaml.safe_load_all(path.read_text())
        if doc
        for _ in placeholder.scan(doc)
    )


def test_a_pushed_bundle_is_a_base_and_pulling_it_warns(eksinf, stack_dir, tmp_path):
    layout = f"oci-layout:{tmp_path / 'oci'}"
    pushed = eksinf("push", "--registry", layout, "-c", "karpenter", "--json", cwd=stack_dir)
    assert pushed.code == 0, pushed.err
    expected = _placeholders_in(stack_dir / "configs/karpenter")
    assert expected > 0

    pulled = eksinf("pull", f"{layout}/karpenter", "--out", str(tmp_path / "base"), "--json")
    assert pulled.code == 0, pulled.err
    info = json.loads(pulled.out)
    assert info["kind"] == "base"
    assert info["annotations"]["io.eksinf.artifact.kind"] == "base"
    assert info["annotations"]["io.eksinf.placeholders"] == str(expected)
    assert (
        f"is a base bundle ({expected} placeholder values): not for kubectl apply"
        in info["warning"]
    )
    assert "warning: " in pulled.err and "eksinf install --from" in pulled.err


def test_a_hub_release_is_marked_a_release_and_pulls_without_warning(eksinf, stack_dir, tmp_path):
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    ref = f"oci-layout:{stack_dir / '.eksinf/oci'}/space/karpenter-sandbox"
    out = tmp_path / "release"
    pulled = eksinf("pull", ref, "--out", str(out), "--json")
    assert pulled.code == 0, pulled.err
    info = json.loads(pulled.out)
    assert info["kind"] == "release" and info["warning"] is None
    assert info["annotations"]["com.confighub.space"] == "karpenter-sandbox"
    assert "warning" not in pulled.err
    assert _placeholders_in(out) == 0
