"""The hyperpod-eks target kind: the model rendered as the HyperPod inference
operator's InferenceEndpointConfig, checked against the operator's CRD as pinned offline
(../shared/manifests/hyperpod-inference-operator-2.2.2, chart 2.2.2 of aws/sagemaker-hyperpod-cli
at commit 011ca927123e, whose field names the unit uses)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import MIRROR

from eksinf import links
from eksinf.build import manifests
from eksinf.build.validate.admission import crds_of
from eksinf.build.validate.provided import cluster_crd_units
from eksinf.errors import CONTRACT, EksinfError
from eksinf.model.configs import read_units
from eksinf.model.profile import load_profile
from eksinf.model.resources import find_resource
from eksinf.model.stack import load_stack

MODEL = "configs/hyperpod-inference/model.yaml"
IEC = ("inference.sagemaker.aws.amazon.com/v1", "InferenceEndpointConfig")


def edit_model(root: Path, change) -> None:
    path = root / MODEL
    [doc] = [d for d in yaml.safe_load_all(path.read_text()) if d]
    change(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def findings(eksinf, root: Path) -> tuple[int, list[dict]]:
    result = eksinf("validate", "--json", cwd=root)
    report = json.loads(result.out)
    found = [
        f
        for part in ("raw", "resolved")
        for f in report[part]["findings"]
        if f["status"] == "invalid" and f["unit"].endswith(MODEL)
    ]
    return result.code, found


def test_the_pinned_crd_is_the_mirror_copy_and_serves_v1(stack_dir):
    crds = crds_of(cluster_crd_units(load_stack(stack_dir)))
    assert IEC in crds and "hyperpod-inference clusterCRDs" in crds[IEC].source
    spec = crds[IEC].schema["properties"]["spec"]
    assert {"modelName", "modelSourceConfig", "worker"} <= set(spec["required"])


def test_the_committed_model_is_admitted_raw_and_resolved(stack_dir, eksinf):
    code, found = findings(eksinf, stack_dir)
    assert code == 0 and found == []


def test_the_profile_values_reach_the_model(stack_dir):
    stack = load_stack(stack_dir)
    profile = load_profile(stack)
    units = links.resolve_units(
        read_units(stack.configs_dir), profile.spec, links.load_bindings(stack)
    )
    doc = find_resource(
        units["hyperpod-inference/model"], "InferenceEndpointConfig", "inference-hyperpod/vllm"
    )
    assert doc is not None and profile.hyperpod is not None
    spec = doc["spec"]
    # instanceType and instanceTypes are mutually exclusive in the CRD: only the list is set,
    # the profile's type first, then its fallbacks in order.
    assert "instanceType" not in spec
    assert spec["instanceTypes"] == ["ml.g5.2xlarge", "ml.g6.2xlarge"]
    assert tuple(spec["instanceTypes"]) == profile.hyperpod.instance_types
    assert spec["modelSourceConfig"]["huggingFaceModel"]["modelId"] == profile.spec["modelId"]
    assert spec["tlsConfig"]["tlsCertificateOutputS3Uri"] == profile.hyperpod.tls_certificate_s3_uri
    assert spec["modelName"] == spec["endpointName"] == profile.name


@pytest.mark.parametrize(
    ("change", "path", "rule"),
    [
        (
            lambda d: d["spec"]["modelSourceConfig"].update(modelSourceType="hf"),
            "spec.modelSourceConfig.modelSourceType",
            "enum",
        ),
        (
            lambda d: d["spec"]["worker"]["modelInvocationPort"].update(containerPort="8000"),
            "spec.worker.modelInvocationPort.containerPort",
            "type: integer",
        ),
        (
            lambda d: d["spec"]["worker"].update(imageName="vllm"),
            "spec.worker.imageName",
            "unknown field",
        ),
        (
            lambda d: d["spec"]["worker"].pop("modelVolumeMount"),
            "spec.worker.modelVolumeMount",
            "required",
        ),
    ],
)
def test_a_broken_model_is_refused_by_the_pinned_crd(stack_dir, eksinf, change, path, rule):
    edit_model(stack_dir, change)
    code, found = findings(eksinf, stack_dir)
    assert code == CONTRACT
    assert any(f["path"] == path and rule in f["rule"] for f in found), found


def test_an_instance_type_the_crd_refuses_is_caught_after_resolving(stack_dir, eksinf):
    """The profile checks its own format; the CRD's pattern (`^ml\\..*`) judges the resolved
    value, so a profile that bypassed the check still cannot publish."""
    path = stack_dir / "render/platform-profile/profile.yaml"
    path.write_text(
        path.read_text().replace("instanceType: ml.g5.2xlarge", "instanceType: g5.2xlarge")
    )
    result = eksinf("validate", "--json", cwd=stack_dir)
    assert result.code == CONTRACT
    assert "spec.hyperpod.instanceType" in json.loads(result.out)["error"]


def test_a_pinned_crd_that_differs_from_the_lock_is_refused(stack_dir, tmp_path, monkeypatch):
    stack = load_stack(stack_dir)
    [spec] = [s for c in stack.components for s in c.cluster_crds]
    mirror = tmp_path / "mirror"
    (mirror / spec.mirror_file).parent.mkdir(parents=True)
    shutil.copy2(MIRROR.parent / "manifests" / spec.mirror_file, mirror / spec.mirror_file)
    with (mirror / spec.mirror_file).open("a") as fh:
        fh.write("# edited\n")
    monkeypatch.setenv(manifests.MIRROR_ENV, str(mirror))
    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))  # no cached good copy
    with pytest.raises(EksinfError) as err:
        crds_of(cluster_crd_units(stack))
    assert err.value.exit_code == CONTRACT and "charts.lock pins" in err.value.message


def test_a_hyperpod_sandbox_publishes_the_model_as_an_inference_endpoint_config(eksinf, stack_dir):
    """Acceptance: `sandbox up --target-kind hyperpod-eks` publishes a workload release holding
    the InferenceEndpointConfig (and no Karpenter, device plugin or Deployment of the eks
    variant), and that release passes the admission `eksinf validate` runs, against the
    pinned CRD. The eks sandbox beside it never gets the HyperPod component."""
    from eksinf.build.validate.release import ReleaseGate
    from eksinf.core.yamlio import load_docs
    from eksinf.hub.local import LocalHub
    from eksinf.publish import bundle, oci

    up = eksinf(
        "sandbox", "up", "--target-kind", "hyperpod-eks", "--name", "hp", "--json", cwd=stack_dir
    )
    assert up.code == 0, up.err
    planes = {p["plane"]: p for p in json.loads(up.out)["planes"]}
    assert planes["workload"]["kind"] == "hyperpod-eks"
    assert planes["workload"]["published"] == ["hyperpod-inference-hp", "hp-workload-argo-apps"]
    assert not [
        s for s in planes["mgmt"]["published"] if s.startswith(("aws-network", "eks-cluster"))
    ]

    hub = LocalHub(stack_dir / ".eksinf" / "hub.db")
    (release,) = hub.list_releases("hyperpod-inference-hp")
    pulled = oci.pull(release.ref, expect_digest=release.manifest_digest)
    out = stack_dir / "pulled"
    bundle.safe_unpack(pulled.blob, out)
    units = {p.stem: [d for d in load_docs(p.read_text()) if d] for p in sorted(out.glob("*.yaml"))}
    hub.close()
    assert sorted(units) == ["model", "namespace"]
    (iec,) = units["model"]
    assert (iec["apiVersion"], iec["kind"]) == IEC
    profile = load_profile(load_stack(stack_dir))
    assert tuple(iec["spec"]["instanceTypes"]) == profile.hyperpod.instance_types
    report = ReleaseGate(load_stack(stack_dir)).check("hyperpod-inference-hp", units)
    assert report.ok and report.by_schema.get("crd") == 1, [f.line() for f in report.findings]

    eks = eksinf("sandbox", "up", "--json", cwd=stack_dir)  # the default sandbox, kind eks
    assert eks.code == 0, eks.err
    workload = next(p for p in json.loads(eks.out)["planes"] if p["plane"] == "workload")
    assert "hyperpod-inference-sandbox" not in workload["created"]
    assert "karpenter-sandbox" in workload["created"]


def test_a_sandbox_keeps_its_kind(eksinf, stack_dir):
    assert eksinf("sandbox", "up", "--name", "hp", cwd=stack_dir).code == 0
    again = eksinf("sandbox", "up", "--name", "hp", "--target-kind", "hyperpod-eks", cwd=stack_dir)
    assert again.code == CONTRACT
    assert "exists as kind eks, not hyperpod-eks" in again.err


def test_a_component_naming_an_unknown_kind_is_refused(stack_dir):
    path = stack_dir / "components.yaml"
    path.write_text(path.read_text().replace("kinds: [hyperpod-eks]", "kinds: [hyperpod]"))
    with pytest.raises(EksinfError) as err:
        load_stack(stack_dir)
    assert err.value.exit_code == CONTRACT
    assert "'hyperpod-inference': unknown target kind(s) hyperpod" in err.value.message
    assert "hyperpod-eks" in err.value.hint
