"""kube.apply against the real kube-apiserver (`kube_plane`): the apply order, CRDs served
before their objects, what changed read from the server, and conflicts with another field
manager refused unless forced. Names are unique to this file: the server is shared."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from eksinf.kube.apply import apply_all, apply_order
from eksinf.kube.client import KubeClient, KubeError, parse_kubeconfig, resource_path

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.apply-test.eksinf.dev"},
    "spec": {
        "group": "apply-test.eksinf.dev",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}
                        },
                    }
                },
            }
        ],
    },
}


def docs(size: int) -> list[dict]:
    """A custom resource, its namespace (wave -30) and its CRD, listed in the wrong order."""
    return [
        {"apiVersion": "apply-test.eksinf.dev/v1", "kind": "Widget",
         "metadata": {"name": "w", "namespace": "apply-test"}, "spec": {"size": size}},
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": "apply-test", "annotations": {"argocd.argoproj.io/sync-wave": "5"}}},
        CRD,
    ]  # fmt: skip


def kube_for(plane) -> KubeClient:
    return KubeClient.from_auth(parse_kubeconfig(plane.kubeconfig(), Path("."), "plane"))


def test_order_is_crds_then_namespaces_then_waves() -> None:
    ordered = apply_order(
        [
            {
                "kind": "ConfigMap",
                "metadata": {"annotations": {"argocd.argoproj.io/sync-wave": "-5"}},
            },
            {"kind": "Deployment", "metadata": {}},
            *docs(1),
        ]
    )
    assert [d["kind"] for d in ordered] == [
        "CustomResourceDefinition", "Namespace", "ConfigMap", "Deployment", "Widget",
    ]  # fmt: skip


def test_a_new_crd_s_objects_apply_in_one_pass_and_a_rerun_changes_nothing(kube_plane) -> None:
    kube = kube_for(kube_plane)
    kube.resources("apply-test.eksinf.dev/v1")  # discovery read before the CRD exists: forgotten
    first = {a.label: a.action for a in apply_all(kube, docs(1))}
    assert first["Widget apply-test/w"] in ("created", "configured")
    again = apply_all(kube, docs(1))
    assert {a.action for a in again} == {"unchanged"}
    changed = {a.label: a.action for a in apply_all(kube, docs(2))}
    assert changed["Widget apply-test/w"] == "configured"
    assert changed["CustomResourceDefinition widgets.apply-test.eksinf.dev"] == "unchanged"


def test_a_field_another_manager_owns_is_a_conflict_unless_forced(kube_plane, tmp_path) -> None:
    """kubectl (manager kubectl-create) makes the ConfigMap; eksinf's apply of another value for
    the same key is refused by the server (409) and reported, exit 3; --force-conflicts takes it."""
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump(kube_plane.kubeconfig()))
    kube = kube_for(kube_plane)
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "conflict-test"}})
    subprocess.run(
        ["kubectl", "--kubeconfig", str(config), "-n", "conflict-test", "create", "configmap",
         "c", "--from-literal=mode=theirs"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    mine = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "conflict-test"},
        "data": {"mode": "ours"},
    }
    with pytest.raises(KubeError) as err:
        apply_all(kube, [mine])
    assert (err.value.status, err.value.exit_code) == (409, 3)
    assert err.value.message.startswith(
        "applying ConfigMap conflict-test/c: HTTP 409: Apply failed with 1 conflict: conflict "
        'with "kubectl-create"'
    )
    assert ".data.mode" in err.value.message
    assert "--force-conflicts" in err.value.hint
    ref = resource_path("v1", "ConfigMap", "conflict-test", "c")
    assert kube.get(ref)["data"] == {"mode": "theirs"}  # refused: nothing written
    (taken,) = apply_all(kube, [mine], force=True)
    assert taken.action == "configured"
    assert kube.get(ref)["data"] == {"mode": "ours"}


# ---- an endpoint that answers JSON that is not an object -------------------------------------
# The real kube-apiserver never answers a list at /version; a stand-in HTTP server on 127.0.0.1
# does, to show what eksinf does with an endpoint that is not a Kubernetes API server.


def test_an_answer_that_is_json_but_not_an_object_is_an_environment_error():
    import http.server
    import threading

    from eksinf.errors import ENVIRONMENT
    from eksinf.kube.client import KubeClient, KubeError
    from eksinf.kube.kubeconfig import KubeAuth

    class ListAnswers(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the handler's protocol)
            body = b'["not", "an", "object"]'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ListAnswers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        kube = KubeClient(KubeAuth(server=f"http://127.0.0.1:{server.server_port}", token="t"))
        with pytest.raises(KubeError) as err:
            kube.version()
        assert err.value.exit_code == ENVIRONMENT
        assert "JSON that is not an object (a list)" in err.value.message
    finally:
        server.shutdown()
