"""Argo CD manifests the hub generates are valid Applications (the one schema,
schemas/argocd-application.schema.json, closed to typos) and say what we mean."""

from __future__ import annotations

import jsonschema
import pytest

from eksinf.core.yamldump import dump_docs
from eksinf.core.yamlio import load_docs
from eksinf.hub.protocol import UploadSource
from eksinf.publish import argo


def validate(text: str) -> dict:
    (doc,) = load_docs(text)
    jsonschema.validate(doc, argo.application_schema())
    return doc


def test_root_application_is_valid_and_self_heals_without_prune():
    doc = validate(argo.root_application("c1-argo-apps", "127.0.0.1:5000/hub"))
    assert doc["spec"]["source"]["repoURL"] == "oci://127.0.0.1:5000/hub/space/c1-argo-apps"
    assert doc["spec"]["syncPolicy"]["automated"] == {"selfHeal": True}
    assert "CreateNamespace=false" in doc["spec"]["syncPolicy"]["syncOptions"]


@pytest.mark.parametrize("ships_namespace", [True, False])
def test_child_application_prunes_and_creates_namespace_only_when_needed(ships_namespace):
    doc = validate(
        argo.child_application(
            "karpenter-dev",
            "oci-layout:/x",
            namespace="kube-system",
            ships_namespace=ships_namespace,
        )
    )
    assert doc["spec"]["syncPolicy"]["automated"]["prune"] is True
    assert doc["spec"]["source"]["repoURL"] == "oci://oci-layout.invalid/space/karpenter-dev"
    wanted = f"CreateNamespace={'false' if ships_namespace else 'true'}"
    assert wanted in doc["spec"]["syncPolicy"]["syncOptions"]


def test_schema_rejects_a_misspelt_field():
    doc = load_docs(argo.root_application("a", "r"))[0]
    doc["spec"]["syncPolicy"]["automated"] = {"selfheal": True}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, argo.application_schema())


def test_variant_on_a_target_gets_a_valid_child_application(local_hub, tmp_path):
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu"}}
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "d", "namespace": "gpu"},
    }
    source = UploadSource(
        "t", {"namespace.yaml": dump_docs([ns]).encode(), "ds.yaml": dump_docs([ds]).encode()}
    )
    local_hub.variant_upload("gpu", "base", source)
    local_hub.variant_upload(
        "bare", "base", UploadSource("t", {"ds.yaml": dump_docs([ds]).encode()})
    )
    local_hub.create_space("c1")
    local_hub.create_target("c1", "target", "127.0.0.1:5000/hub")
    local_hub.variant_create("dev", "gpu-base", target="c1/target")
    local_hub.variant_create("dev", "bare-base", target="c1/target")
    root = validate(local_hub.unit_data("c1-argo-apps", "root"))
    assert root["metadata"]["name"] == "c1-argo-apps"
    shipped = validate(local_hub.unit_data("c1-argo-apps", "gpu-dev"))
    assert "CreateNamespace=false" in shipped["spec"]["syncPolicy"]["syncOptions"]
    assert shipped["spec"]["destination"]["namespace"] == "gpu"
    bare = validate(local_hub.unit_data("c1-argo-apps", "bare-dev"))
    assert "CreateNamespace=true" in bare["spec"]["syncPolicy"]["syncOptions"]
    assert local_hub.get_space("c1-argo-apps").release_target == "c1/target"
