"""The manifest renderer: Argo CD's upstream install.yaml, pinned by sha256 in charts.lock and
read from the offline mirror (../shared/manifests, its SHA256SUMS as published there)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import MIRROR

from eksinf.build import guard, manifests
from eksinf.build.render import render_stack
from eksinf.core.yamlio import load_docs
from eksinf.errors import CONTRACT, EksinfError
from eksinf.model.configs import SYNC_WAVE
from eksinf.model.resources import CLUSTER_SCOPED_KINDS
from eksinf.model.stack import load_stack

MANIFEST_MIRROR = MIRROR.parent / "manifests"
ARGOCD_FILE = "argo-cd-v3.4.7-install.yaml"
IEC_FILE = "hyperpod-inference-operator-2.2.2/inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml"


def mirror_sum(name: str) -> str:
    for line in (MANIFEST_MIRROR / "SHA256SUMS").read_text().splitlines():
        digest, file = line.split()
        if file == name:
            return digest
    raise AssertionError(f"{name} not in SHA256SUMS")


def argocd_output(result):
    (out,) = [o for o in result.outputs if o.component.name == "argocd"]
    return out


def test_argocd_renders_from_the_pinned_manifest(stack_dir):
    result = render_stack(load_stack(stack_dir), MIRROR, components=["argocd"])
    out = argocd_output(result)
    (made,) = out.manifests
    assert made.sha256 == mirror_sum(ARGOCD_FILE)  # the lock pins the mirror's published digest
    assert (made.resources, made.crds) == (54, 3)  # 59 upstream documents, 2 left out
    assert made.excluded == ("Secret/argocd-notifications-secret", "Secret/argocd-secret")
    units = {u.filename: u for u in out.units}
    assert sorted(units) == ["argocd-controller.yaml", "argocd-crds.yaml", "namespace.yaml"]
    docs = [d for u in units.values() for d in u.docs]
    assert not [d for d in docs if d["kind"] == "Secret"]
    for doc in docs:
        meta = doc["metadata"]
        if doc["kind"] in CLUSTER_SCOPED_KINDS:
            assert "namespace" not in meta, doc["kind"]
        else:  # upstream leaves it to `kubectl apply -n`; the unit must say it
            assert meta["namespace"] == "argocd", f"{doc['kind']}/{meta['name']}"
    waves = {
        d["kind"]: d["metadata"]["annotations"][SYNC_WAVE] for d in units["argocd-crds.yaml"].docs
    }
    assert waves == {"CustomResourceDefinition": "-20"}
    server = next(
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "argocd-server"
    )
    assert server["metadata"]["annotations"][SYNC_WAVE] == "-10"


def test_the_guard_sees_argocd_like_any_other_component(stack_dir):
    """Without its exclude entries the two upstream Secrets are `secret` hazards."""
    path = stack_dir / "components.yaml"
    text = path.read_text()
    start = text.index("        exclude:\n")
    end = text.index("\n\n", start)
    path.write_text(text[:start] + text[end + 1 :])
    result = render_stack(load_stack(stack_dir), MIRROR, components=["argocd"])
    found = {(f.hazard, f.resource) for f in guard.check(result).blocking}
    assert found == {
        ("secret", "Secret/argocd/argocd-secret"),
        ("secret", "Secret/argocd/argocd-notifications-secret"),
    }


def copy_mirror(tmp_path: Path) -> Path:
    mirror = tmp_path / "manifests"
    mirror.mkdir()
    shutil.copy2(MANIFEST_MIRROR / ARGOCD_FILE, mirror / ARGOCD_FILE)
    return mirror


def test_a_manifest_that_differs_from_the_lock_is_refused(stack_dir, tmp_path, monkeypatch):
    mirror = copy_mirror(tmp_path)
    with (mirror / ARGOCD_FILE).open("a") as fh:
        fh.write("# edited\n")
    monkeypatch.setenv(manifests.MIRROR_ENV, str(mirror))
    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))  # no cached good copy
    with pytest.raises(EksinfError) as err:
        render_stack(load_stack(stack_dir), None, components=["argocd"])
    assert err.value.exit_code == CONTRACT
    assert f"charts.lock pins {mirror_sum(ARGOCD_FILE)}" in err.value.message


def test_a_mirror_copy_that_disagrees_with_its_sha256sums_is_refused(tmp_path):
    mirror = copy_mirror(tmp_path)
    (mirror / "SHA256SUMS").write_text(f"{'0' * 64}  {ARGOCD_FILE}\n")
    stack = load_stack(Path(__file__).resolve().parents[1])
    spec = next(m for c in stack.components for m in c.manifests)
    with pytest.raises(EksinfError) as err:
        manifests.fetch(spec, mirror)
    assert err.value.exit_code == CONTRACT and "SHA256SUMS" in err.value.message


def test_a_handwritten_unit_may_not_take_a_manifest_units_name(stack_dir):
    (stack_dir / "render/argocd/argocd-crds.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: argocd}\n"
    )
    with pytest.raises(EksinfError) as err:
        render_stack(load_stack(stack_dir), MIRROR, components=["argocd"])
    assert err.value.exit_code == CONTRACT
    assert "render/argocd/argocd-crds.yaml: name collides with a rendered manifest unit" in (
        err.value.message
    )


def test_a_stale_exclude_entry_is_an_error(stack_dir):
    path = stack_dir / "components.yaml"
    path.write_text(path.read_text().replace("Secret/argocd-secret", "Secret/argocd-gone"))
    with pytest.raises(EksinfError) as err:
        render_stack(load_stack(stack_dir), MIRROR, components=["argocd"])
    assert err.value.exit_code == CONTRACT
    assert "excludes Secret/argocd-gone, which argocd v3.4.7" in err.value.message


def test_charts_lock_keeps_both_sections(stack_dir):
    stack = load_stack(stack_dir)
    before = (stack_dir / "charts.lock").read_text()
    _, pinned = manifests.lock(stack, MIRROR, MANIFEST_MIRROR)  # the same pins: same bytes
    assert [(p.name, p.sha256, p.pinned_from) for p in pinned] == [
        ("argocd", mirror_sum(ARGOCD_FILE), "mirror"),
        ("hyperpod-inferenceendpointconfigs", mirror_sum(IEC_FILE), "mirror"),
    ]
    assert (stack_dir / "charts.lock").read_text() == before
    assert load_docs(before)[0]["charts"]
