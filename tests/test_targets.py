"""Targets from a kubeconfig, Argo CD installed from the pinned manifest, sync on publish, and
`mgmt up` without kind. The clusters are `FakeKubeApi` (tests/aws_stubs.py): no Kubernetes API
server exists on these machines; Argo CD's reactions (an Application synced after a refresh, a
Deployment becoming Available) are simulated by callbacks, stated in each test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_stubs import FakeKubeApi, ref_path

from eksinf.aws import argocd
from eksinf.hub.local import LocalHub
from eksinf.kube.client import KubeClient, resource_path
from eksinf.model.names import kubeconfig_path

SERVER = resource_path("apps/v1", "Deployment", "argocd", "argocd-server")


def argocd_server(image: str) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "argocd-server", "namespace": "argocd"},
        "spec": {"template": {"spec": {"containers": [{"name": "s", "image": image}]}}},
    }


def becomes_available(api: FakeKubeApi, namespace: str = "argocd") -> None:
    """Simulates the kubelet: argocd-server turns Available once applied."""
    server = ref_path(resource_path("apps/v1", "Deployment", namespace, "argocd-server"))

    def ready(path: str, obj: dict) -> None:
        if path == server and "status" not in obj:
            obj["status"] = {"conditions": [{"type": "Available", "status": "True"}]}

    api.on_patch.append(ready)


def test_absent_argocd_is_installed_from_the_pinned_units(stack_dir, tmp_path):
    with FakeKubeApi() as api:
        becomes_available(api, "gitops")
        kube = KubeClient.from_kubeconfig(api.kubeconfig(tmp_path / "k"))
        said: list[str] = []
        outcome = argocd.ensure(kube, stack_dir / "configs", "gitops", timeout=20, say=said.append)
        assert outcome.action == "installed"
        assert outcome.image == "quay.io/argoproj/argocd:v3.4.7"
        applied = [p for m, p in api.log if m == "PATCH"]
        assert applied[0] == "/api/v1/namespaces/gitops"  # the Namespace first, renamed
        assert applied[1].startswith("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/")
        secrets = {p.rsplit("/", 1)[1] for p in applied if "/secrets/" in p}
        assert secrets == {"argocd-secret", "argocd-notifications-secret"}
        assert all(
            "/namespaces/gitops" in p or "/namespaces/" not in p for p in applied
        )  # every namespaced object moved to --argocd-namespace
        binding = api.objects[
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/argocd-server"
        ]
        assert {s["namespace"] for s in binding["subjects"]} == {"gitops"}
        assert any("installing" in m for m in said)
        again = argocd.ensure(kube, stack_dir / "configs", "gitops")
        assert again.action == "present"


def test_present_argocd_is_left_alone_and_one_below_the_floor_refused(stack_dir, tmp_path):
    with FakeKubeApi() as api:
        api.put(SERVER, argocd_server("quay.io/argoproj/argocd:v3.4.5"))
        kube = KubeClient.from_kubeconfig(api.kubeconfig(tmp_path / "k"))
        outcome = argocd.ensure(kube, stack_dir / "configs", "argocd")
        assert (outcome.action, outcome.detail) == ("present", "left alone")
        assert [m for m, _ in api.log if m != "GET"] == []
        api.put(SERVER, argocd_server("quay.io/argoproj/argocd:v2.14.9"))
        with pytest.raises(Exception) as err:
            argocd.ensure(kube, stack_dir / "configs", "argocd")
        assert err.value.exit_code == 3 and "below the floor 3.1" in err.value.message
        assert [m for m, _ in api.log if m != "GET"] == []


def test_install_wait_is_bounded(stack_dir, tmp_path):
    with FakeKubeApi() as api:  # nothing makes argocd-server Available
        kube = KubeClient.from_kubeconfig(api.kubeconfig(tmp_path / "k"))
        ticks = iter(range(100))
        with pytest.raises(Exception) as err:
            argocd.ensure(
                kube,
                stack_dir / "configs",
                "argocd",
                timeout=3,
                sleep=lambda _s: None,
                clock=lambda: float(next(ticks)),
            )
        assert err.value.exit_code == 1 and "not Available after 3 s" in err.value.message


def sync_on_refresh(api: FakeKubeApi, hub_path: Path) -> list[str]:
    """Simulates Argo CD: an Application given the refresh annotation reports the space's
    latest release digest as Synced (and drops the annotation, as Argo CD does)."""
    refreshed: list[str] = []

    def react(path: str, obj: dict) -> None:
        notes = (obj.get("metadata") or {}).get("annotations") or {}
        if obj.get("kind") == "Application" and notes.pop(argocd.REFRESH_ANNOTATION, None):
            name = obj["metadata"]["name"]
            hub = LocalHub(hub_path)
            try:
                digest = hub.list_releases(name)[-1].manifest_digest
            finally:
                hub.close()
            obj["status"] = {"sync": {"status": "Synced", "revision": digest}}
            refreshed.append(name)

    api.on_patch.append(react)
    return refreshed


def test_target_add_then_deploy_mgmt_publishes_and_triggers_a_refresh(eksinf, stack_dir, tmp_path):
    registry = f"oci-layout:{tmp_path / 'oci'}"
    assert eksinf("install", cwd=stack_dir).code == 0
    assert eksinf("hub", "create-variant", "dev", "platform-profile-base", cwd=stack_dir).code == 0
    with FakeKubeApi(token="m") as api:
        becomes_available(api)
        given = api.kubeconfig(tmp_path / "given.kubeconfig")
        added = eksinf(
            "target", "add", "m1", "--plane", "mgmt", "--kubeconfig", str(given),
            "--oci-registry", registry, "--json", cwd=stack_dir,
        )  # fmt: skip
        assert added.code == 0, added.err
        info = json.loads(added.out)
        assert info["argocd"]["action"] == "installed"
        assert info["applied"] == ["Application argocd/m1-argo-apps"]
        kept = kubeconfig_path(stack_dir, "m1")
        assert info["kubeconfig"] == str(kept) and oct(kept.stat().st_mode)[-3:] == "600"
        # The root app creates one Application per variant from the apps space: simulated by
        # putting them there once the variants exist (what Argo CD's root app would do).
        refreshed = sync_on_refresh(api, stack_dir / ".eksinf" / "hub.db")
        listed = json.loads(eksinf("target", "list", "--json", cwd=stack_dir).out)["targets"]
        assert [(t["target"], t["plane"]) for t in listed] == [("m1/target", "mgmt")]
        dry = eksinf(
            "deploy", "--plane", "mgmt", "--target", "m1/target", "--dry-run", cwd=stack_dir
        )
        assert dry.code == 0, dry.err
        spaces = [
            c for c in ("ack-controllers", "aws-network", "eks-cluster", "karpenter-aws", "argocd")
        ]
        for comp in spaces:
            app = f"{comp}-dev"
            api.put(
                argocd.application_path("argocd", app),
                {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
                 "metadata": {"name": app, "namespace": "argocd"}},
            )  # fmt: skip
        api.put(
            argocd.application_path("argocd", "m1-argo-apps"),
            {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
             "metadata": {"name": "m1-argo-apps", "namespace": "argocd"}},
        )  # fmt: skip
        deployed = eksinf(
            "deploy", "--plane", "mgmt", "--target", "m1/target", "--json", cwd=stack_dir
        )
        assert deployed.code == 0, deployed.err
        body = json.loads(deployed.out)
        assert sorted(body["published"]) == sorted([f"{c}-dev" for c in spaces] + ["m1-argo-apps"])
        sync = body["sync"]
        assert sync["status"] == "synced" and sorted(sync["refreshed"]) == sorted(body["published"])
        assert sorted(refreshed) == sorted(body["published"])
        assert sorted(sync["seconds"]) == sorted(body["published"]) and sync["notSynced"] == []
        again = eksinf("deploy", "--plane", "mgmt", "--target", "m1/target", cwd=stack_dir)
        assert again.code == 0 and "Nothing changed" in again.out
        assert "sync: skipped (nothing published)" in again.out
        nosync = eksinf(
            "deploy", "--plane", "mgmt", "--target", "m1/target", "--no-sync", "--json",
            cwd=stack_dir,
        )  # fmt: skip
        assert json.loads(nosync.out)["sync"] is None


def test_target_add_refuses_an_unusable_context(eksinf, stack_dir, tmp_path):
    with FakeKubeApi() as api:
        given = api.kubeconfig(tmp_path / "given.kubeconfig")
        result = eksinf(
            "target", "add", "m1", "--plane", "mgmt", "--kubeconfig", str(given),
            "--context", "nope", cwd=stack_dir,
        )  # fmt: skip
    assert result.code == 2 and "no context 'nope' (it has: fake)" in result.err
    assert not (stack_dir / ".eksinf" / "hub.db").exists()


def test_mgmt_up_without_kind_names_what_is_missing(eksinf, stack_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # neither kind nor a container runtime
    result = eksinf("mgmt", "up", cwd=stack_dir)
    assert result.code == 4
    assert "mgmt up needs kind and a container runtime (docker or podman or nerdctl)" in result.err
    assert not (stack_dir / ".eksinf").exists()


def app(name: str, sync: str | None, health: str | None) -> dict:
    doc = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": name}}
    if sync:
        doc["status"] = {
            "sync": {"status": sync, "revision": "sha256:1"},
            "health": {"status": health},
        }
    return doc


def test_status_plane_reports_each_state_and_unknown_is_never_healthy(eksinf, stack_dir, tmp_path):
    """FakeKubeApi stands in for both clusters; the objects' status blocks are what Argo CD,
    the ACK controllers, Karpenter and vLLM would have written."""
    from eksinf.aws.ack import ack_objects

    mgmt_objects = ack_objects(stack_dir / "configs", ["aws-network", "eks-cluster"])
    with FakeKubeApi() as api:
        apps = argocd.application_path
        api.put(
            apps("argocd", "ack-controllers-dev"), app("ack-controllers-dev", "Synced", "Healthy")
        )
        api.put(apps("argocd", "aws-network-dev"), app("aws-network-dev", "OutOfSync", "Degraded"))
        vpc = next(o for o in mgmt_objects if o.kind == "VPC")
        cluster = next(o for o in mgmt_objects if o.kind == "Cluster")
        role = next(o for o in mgmt_objects if o.kind == "Role")
        api.put(
            vpc.path, {"status": {"conditions": [{"type": "ACK.ResourceSynced", "status": "True"}]}}
        )
        api.put(cluster.path, {"status": {"conditions": [
            {"type": "ACK.Terminal", "status": "True", "message": "InvalidParameterException: bad subnet"},
            {"type": "ACK.ResourceSynced", "status": "False"}]}})  # fmt: skip
        api.put(role.path, {"metadata": {"name": role.name}})  # no status yet
        config = api.kubeconfig(tmp_path / "k")
        result = eksinf(
            "status", "--plane", "mgmt", "--kubeconfig", str(config), "--json", cwd=stack_dir
        )
        assert result.code == 1  # degraded
        body = json.loads(result.out)
        states = {r["application"]: (r["sync"], r["state"]) for r in body["argocd"]}
        assert states["ack-controllers-dev"] == ("Synced", "healthy")
        assert states["aws-network-dev"] == ("OutOfSync", "degraded")
        assert states["argocd-dev"] == ("Unknown", "unknown")  # absent Application: not Synced
        ack = {r["resource"]: r for r in body["ack"]}
        assert ack[vpc.label]["state"] == "healthy"
        assert (ack[cluster.label]["synced"], ack[cluster.label]["state"]) == (
            "Terminal",
            "degraded",
        )
        assert ack[cluster.label]["message"] == "InvalidParameterException: bad subnet"
        assert (ack[role.label]["synced"], ack[role.label]["state"]) == ("Unknown", "unknown")
        assert body["state"] == "degraded"

    model = "Qwen/Qwen2.5-7B-Instruct-AWQ"
    with FakeKubeApi() as api:
        for comp in ("karpenter", "gpu-runtime", "inference-workloads"):
            api.put(apps("argocd", f"{comp}-dev"), app(f"{comp}-dev", "Synced", "Healthy"))
        api.put("/apis/karpenter.sh/v1/nodepools/quantized-gpu", {
            "metadata": {"name": "quantized-gpu"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}})  # fmt: skip
        api.put("/apis/karpenter.sh/v1/nodeclaims/quantized-gpu-abc", {
            "metadata": {"name": "quantized-gpu-abc", "labels": {
                "karpenter.sh/nodepool": "quantized-gpu",
                "node.kubernetes.io/instance-type": "g6.xlarge"}},
            "status": {"conditions": [{"type": "Launched", "status": "True"},
                                      {"type": "Registered", "status": "True"}]}})  # fmt: skip
        for name, replicas in (("vllm", 1), ("chat", 1), ("smoke-cpu", 0), ("smoke-gpu", 0)):
            api.put(f"/apis/apps/v1/namespaces/inference/deployments/{name}", {
                "metadata": {"name": name}, "spec": {"replicas": replicas},
                "status": {"availableReplicas": replicas}})  # fmt: skip
        proxy = "/api/v1/namespaces/inference/services/vllm:8000/proxy/v1/models"
        api.put(proxy, {"object": "list", "data": [{"id": model, "object": "model"}]})
        config = api.kubeconfig(tmp_path / "w")
        args = ("status", "--plane", "workload", "--kubeconfig", str(config))
        result = eksinf(*args, "--json", cwd=stack_dir)
        assert result.code == 0, result.out
        body = json.loads(result.out)
        (pool,) = body["karpenter"]
        assert (pool["launched"], pool["registered"], pool["instanceTypes"]) == (
            1,
            1,
            ["g6.xlarge"],
        )
        rows = {r["deployment"]: r for r in body["inference"]}
        assert rows["inference/vllm"]["endpoint"]["models"] == [model]
        assert rows["inference/vllm"]["state"] == "healthy"
        assert rows["inference/smoke-gpu"]["message"] == "scaled to 0 (serves nothing)"
        assert body["state"] == "healthy"
        # vLLM up but answering without the profile's model: not serving
        api.put(proxy, {"object": "list", "data": [{"id": "other/model"}]})
        watched = eksinf(*args, "--watch", "0.01", "--count", "2", cwd=stack_dir)
        assert watched.code == 1
        assert watched.out.count("workload plane on") == 2
        assert f"/v1/models: does not list {model}" in watched.out
        api.objects.pop(proxy)  # the proxy answers 404: unknown, not healthy
        unknown = json.loads(eksinf(*args, "--json", cwd=stack_dir).out)
        vllm = next(r for r in unknown["inference"] if r["deployment"] == "inference/vllm")
        assert vllm["state"] == "unknown" and unknown["state"] == "unknown"
    down = json.loads(eksinf(*args, "--json", cwd=stack_dir).out)  # the cluster is gone
    assert down["state"] == "unknown" and down["error"]


def test_release_publish_refreshes_the_target_s_application(eksinf, stack_dir, tmp_path):
    """Argo CD's sync after the refresh annotation is simulated (sync_on_refresh)."""
    registry = f"oci-layout:{tmp_path / 'oci'}"
    assert eksinf("install", cwd=stack_dir).code == 0
    assert eksinf("hub", "create-variant", "dev", "platform-profile-base", cwd=stack_dir).code == 0
    with FakeKubeApi() as api:
        api.put(SERVER, argocd_server("quay.io/argoproj/argocd:v3.4.7"))
        given = api.kubeconfig(tmp_path / "given.kubeconfig")
        add = ("target", "add", "w1", "--plane", "workload", "--kubeconfig", str(given))
        assert eksinf(*add, "--oci-registry", registry, cwd=stack_dir).code == 0
        deploy = ("deploy", "--plane", "workload", "--target", "w1/target", "--sync-timeout", "1")
        deployed = eksinf(*deploy, cwd=stack_dir)
        assert deployed.code == 0, deployed.err
        # Only the root Application (applied by target add) exists, and nothing syncs it here:
        # the wait is bounded and the lag is a warning, not a failure.
        assert "sync: 1 Application(s) refreshed; 0 Synced" in deployed.out
        assert "not yet: w1-argo-apps" in deployed.out
        assert "warning: not Synced within 1 s: w1-argo-apps" in deployed.err
        space = "inference-workloads-dev"
        api.put(
            argocd.application_path("argocd", space),
            {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
             "metadata": {"name": space, "namespace": "argocd"}},
        )  # fmt: skip
        refreshed = sync_on_refresh(api, stack_dir / ".eksinf" / "hub.db")
        fn = ("fn", "set-replicas", "1", "--space", space, "--unit", "vllm")
        assert eksinf(*fn, cwd=stack_dir).code == 0
        published = eksinf("release", "publish", space, cwd=stack_dir)
        assert published.code == 0, published.err
        assert refreshed == [space]
        assert f"sync: {space} Synced at the new release after" in published.out


FAKE_KIND = """#!/bin/sh
# A stand-in for kind (no container runtime here): it records clusters in a file and hands out
# the kubeconfig of the FakeKubeApi the test started.
state="$FAKE_KIND_DIR/clusters"
case "$1 $2" in
  "get clusters") cat "$state" 2>/dev/null || echo "No kind clusters found." >&2 ;;
  "get kubeconfig") cat "$FAKE_KIND_DIR/kubeconfig" ;;
  "create cluster") echo "$4" >> "$state"; cp "$FAKE_KIND_DIR/kubeconfig" "$6" ;;
  *) echo "unexpected: $*" >&2; exit 9 ;;
esac
"""


def test_mgmt_up_creates_the_kind_cluster_once_and_installs_argocd(
    eksinf, stack_dir, tmp_path, monkeypatch
):
    """`kind` and `docker` are stand-in scripts on PATH (stated in FAKE_KIND); the cluster is
    FakeKubeApi, argocd-server's availability simulated."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kind").write_text(FAKE_KIND)
    (bin_dir / "docker").write_text("#!/bin/sh\nexit 0\n")
    for tool in ("kind", "docker"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_KIND_DIR", str(tmp_path))
    with FakeKubeApi() as api:
        becomes_available(api)
        api.kubeconfig(tmp_path / "kubeconfig")
        first = eksinf("mgmt", "up", "--oci-registry", "oci-layout:x", "--json", cwd=stack_dir)
        assert first.code == 0, first.err
        body = json.loads(first.out)
        assert (body["cluster"], body["created"], body["target"]) == (
            "eksinf-mgmt",
            True,
            "mgmt/target",
        )
        assert body["argocd"]["action"] == "installed"
        assert (tmp_path / "clusters").read_text() == "eksinf-mgmt\n"
        again = eksinf("mgmt", "up", "--oci-registry", "oci-layout:x", "--json", cwd=stack_dir)
        assert again.code == 0, again.err
        body = json.loads(again.out)
        assert body["created"] is False and body["argocd"]["action"] == "present"
        assert (tmp_path / "clusters").read_text() == "eksinf-mgmt\n"  # not created twice


def test_target_add_records_its_kind_and_refuses_an_unknown_one(eksinf, stack_dir, tmp_path):
    """--kind is stored with the target (its space's TargetKind label) and read back by
    `target list`; the default is eks; an unknown kind is a usage error that writes nothing."""
    with FakeKubeApi(token="m") as api:
        becomes_available(api)
        given = api.kubeconfig(tmp_path / "given.kubeconfig")
        add = ("target", "add", "m1", "--plane", "mgmt", "--kubeconfig", str(given))
        bad = eksinf(*add, "--kind", "gke", cwd=stack_dir)
        assert bad.code == 2 and "unknown target kind 'gke'" in bad.err
        assert "--kind eks or --kind eks-byo" in bad.err
        assert not (stack_dir / ".eksinf" / "hub.db").exists()
        plain = eksinf(*add, "--json", cwd=stack_dir)
        assert plain.code == 0, plain.err
        assert json.loads(plain.out)["kind"] == "eks"
        byo = eksinf(*add, "--kind", "eks-byo", "--json", cwd=stack_dir)
        assert byo.code == 0, byo.err
        assert json.loads(byo.out)["kind"] == "eks-byo"
    listed = json.loads(eksinf("target", "list", "--json", cwd=stack_dir).out)["targets"]
    assert [(t["target"], t["kind"]) for t in listed] == [("m1/target", "eks-byo")]
    hub = LocalHub(stack_dir / ".eksinf" / "hub.db")
    assert hub.get_space("m1").labels["TargetKind"] == "eks-byo"
