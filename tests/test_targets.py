"""Targets from a kubeconfig, Argo CD installed from the pinned manifest, deploy --apply, sync
on publish, and `mgmt up` without kind.

The cluster is the real kube-apiserver of the `kube_plane` fixture (one per session, shared:
each test uses its own Argo CD namespace and target name). A bare API server runs no
controllers, nodes or pods, so what only they do is played by the test and said there:
argocd-server becoming Available (`mark_available`, a write to the Deployment's status), and,
on `FakeKubeApi` (tests/aws_stubs.py), Argo CD syncing an Application after a refresh and the
status blocks controllers write (`status --plane`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import requests
import yaml
from aws_stubs import FakeKubeApi

from eksinf.aws import argocd
from eksinf.hub.local import LocalHub
from eksinf.kube.client import KubeClient, parse_kubeconfig, resource_path
from eksinf.model.names import kubeconfig_path

SERVER = resource_path("apps/v1", "Deployment", "argocd", "argocd-server")


def argocd_server(image: str) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "argocd-server", "namespace": "argocd"},
        "spec": {"template": {"spec": {"containers": [{"name": "s", "image": image}]}}},
    }


def plane_kube(plane, token: str | None = None) -> KubeClient:
    """eksinf's client for the shared local kube-apiserver (admin unless `token`)."""
    return KubeClient.from_auth(parse_kubeconfig(plane.kubeconfig(token), Path("."), "plane"))


def plane_kubeconfig(plane, path: Path, token: str | None = None) -> Path:
    """A kubeconfig file for the shared local kube-apiserver (admin unless `token`)."""
    path.write_text(yaml.safe_dump(plane.kubeconfig(token)))
    return path


def kubectl(config: Path, *args: str) -> dict:
    """The real kubectl, reading through `config`; its JSON answer."""
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(config), *args, "-o", "json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def mark_available(plane, namespace: str, name: str = "argocd-server") -> None:
    """Stands in for the kubelet and the Deployment controller, which a bare API server does
    not run: writes the Available condition into the Deployment's status subresource, as the
    controller would once its pods run. Everything else in these tests is the real server."""
    kube = plane_kube(plane)
    path = kube.path(resource_path("apps/v1", "Deployment", namespace, name))
    resp = requests.patch(
        f"{kube.server}{path}/status",
        json={"status": {"conditions": [{"type": "Available", "status": "True",
                                          "reason": "MinimumReplicasAvailable"}]}},
        headers={"Content-Type": "application/merge-patch+json",
                 "Authorization": f"Bearer {plane.admin_token}"},
        verify=str(plane.ca_file), timeout=10,
    )  # fmt: skip
    assert resp.status_code == 200, resp.text


def ack_credentials(plane) -> None:
    """The ACK controllers' credentials Secret (what `eksinf creds use-existing` writes), which
    the mgmt deploy checks for first: created on the real server, idempotently."""
    kube = plane_kube(plane)
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ack-system"}})
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "aws-creds", "namespace": "ack-system"},
            "stringData": {"credentials": "[default]\n"},
        }
    )


def install_argocd(plane, stack_dir: Path, namespace: str) -> argocd.ArgoOutcome:
    """The pinned Argo CD installed into `namespace` of the real server; its becoming
    Available is `mark_available`'s, at the installer's first wait."""
    return argocd.ensure(
        plane_kube(plane),
        stack_dir / "configs",
        namespace,
        sleep=lambda _s: mark_available(plane, namespace),
    )


def test_absent_argocd_is_installed_from_the_pinned_units(stack_dir, kube_plane):
    said: list[str] = []
    kube = plane_kube(kube_plane)
    outcome = argocd.ensure(
        kube,
        stack_dir / "configs",
        "gitops-install",
        timeout=20,
        say=said.append,
        sleep=lambda _s: mark_available(kube_plane, "gitops-install"),
    )
    assert outcome.action == "installed"
    assert outcome.image == "quay.io/argoproj/argocd:v3.4.7"  # read back from the server
    assert any("installing" in m for m in said)
    ns = "gitops-install"
    assert kube.get(resource_path("v1", "Namespace", None, ns)) is not None  # renamed
    crd = kube.get(
        resource_path("apiextensions.k8s.io/v1", "CustomResourceDefinition", None,
                      "applications.argoproj.io")
    )  # fmt: skip
    assert crd is not None
    secrets = {
        s["metadata"]["name"]
        for s in kube.items(resource_path("v1", "Secret", ns))
        if s["metadata"]["name"].startswith("argocd-")
    }
    assert secrets == {"argocd-secret", "argocd-notifications-secret"}
    accounts = kube.items(resource_path("v1", "ServiceAccount", ns))
    assert "argocd-server" in {a["metadata"]["name"] for a in accounts}  # moved to the namespace
    binding = kube.get(
        resource_path("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", None, "argocd-server")
    )
    assert {s["namespace"] for s in binding["subjects"]} == {ns}
    again = argocd.ensure(kube, stack_dir / "configs", ns)
    assert (again.action, again.image) == ("present", "quay.io/argoproj/argocd:v3.4.7")


def test_present_argocd_is_left_alone_and_one_below_the_floor_refused(stack_dir, kube_plane):
    kube = plane_kube(kube_plane)
    ns = "argo-present"
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    server = argocd_server("quay.io/argoproj/argocd:v3.4.5")
    server["metadata"]["namespace"] = ns
    server["spec"]["selector"] = {"matchLabels": {"app": "s"}}
    server["spec"]["template"]["metadata"] = {"labels": {"app": "s"}}

    def written() -> list[tuple[str, str, str]]:
        return [
            (kind, o["metadata"]["name"], o["metadata"]["resourceVersion"])
            for kind in ("Deployment", "ServiceAccount", "ConfigMap")
            for o in kube.items(
                resource_path("v1" if kind != "Deployment" else "apps/v1", kind, ns)
            )
        ]

    kube.apply(server)
    before = written()
    outcome = argocd.ensure(kube, stack_dir / "configs", ns)
    assert (outcome.action, outcome.detail) == ("present", "left alone")
    assert written() == before  # nothing applied
    server["spec"]["template"]["spec"]["containers"][0]["image"] = "quay.io/argoproj/argocd:v2.14.9"
    kube.apply(server)
    before = written()
    with pytest.raises(Exception) as err:
        argocd.ensure(kube, stack_dir / "configs", ns)
    assert err.value.exit_code == 3 and "below the floor 3.1" in err.value.message
    assert written() == before


def test_install_wait_is_bounded_and_says_what_the_cluster_lacks(stack_dir, kube_plane):
    """The real server runs no pods: argocd-server never becomes Available. The clock is
    stepped (one second a look) so the bound is reached without waiting for it."""
    kube = plane_kube(kube_plane)
    ticks = iter(range(100))
    with pytest.raises(Exception) as err:
        argocd.ensure(
            kube,
            stack_dir / "configs",
            "argo-bounded",
            timeout=3,
            sleep=lambda _s: None,
            clock=lambda: float(next(ticks)),
        )
    assert err.value.exit_code == 4
    assert err.value.message == (
        "argocd-server in argo-bounded not Available after 3 s: the cluster has no nodes, no "
        "argocd-server pod exists (no controller has created one: is the cluster's controller "
        "manager running?)"
    )
    assert "re-run the same command" in err.value.hint


def test_a_pending_argocd_pod_is_named_with_its_phase(kube_plane):
    """A Pod object the real server accepts and nothing schedules (no scheduler, no node)."""
    kube = plane_kube(kube_plane)
    ns = "argo-pending"
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    # no controller manager makes the namespace's default ServiceAccount, which admission needs
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": ns},
        }
    )
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "argocd-server-0",
                "namespace": ns,
                "labels": {"app.kubernetes.io/name": "argocd-server"},
            },
            "spec": {"containers": [{"name": "server", "image": "argocd:test"}]},
        }
    )
    assert argocd.why_not_available(kube, ns) == (
        "the cluster has no nodes; pods not ready: argocd-server-0 Pending"
    )


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
    """FakeKubeApi: Argo CD creating the child Applications and syncing them after a refresh
    (sync_on_refresh) is what a bare API server cannot do. The same flow against the real
    server, without Argo CD's reactions: the tests at the end of this file."""
    registry = f"oci-layout:{tmp_path / 'oci'}"
    assert eksinf("install", cwd=stack_dir).code == 0
    assert eksinf("hub", "create-variant", "dev", "platform-profile-base", cwd=stack_dir).code == 0
    with FakeKubeApi(token="m") as api:
        # Argo CD is present (its install on the real server: the tests above and below)
        api.put(SERVER, argocd_server("quay.io/argoproj/argocd:v3.4.7"))
        # the ACK controllers' credentials (eksinf creds use-existing): the mgmt deploy needs them
        api.put(
            "/api/v1/namespaces/ack-system/secrets/aws-creds",
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "aws-creds"}, "data": {}},
        )
        given = api.kubeconfig(tmp_path / "given.kubeconfig")
        added = eksinf(
            "target", "add", "m1", "--plane", "mgmt", "--kubeconfig", str(given),
            "--oci-registry", registry, "--json", cwd=stack_dir,
        )  # fmt: skip
        assert added.code == 0, added.err
        info = json.loads(added.out)
        assert info["argocd"]["action"] == "present"
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


def test_target_add_refuses_an_unusable_context(eksinf, stack_dir, tmp_path, kube_plane):
    given = plane_kubeconfig(kube_plane, tmp_path / "given.kubeconfig")
    result = eksinf(
        "target", "add", "m1", "--plane", "mgmt", "--kubeconfig", str(given),
        "--context", "nope", cwd=stack_dir,
    )  # fmt: skip
    assert result.code == 2 and "no context 'nope' (it has: local)" in result.err
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
    """FakeKubeApi: Argo CD's sync after the refresh annotation (sync_on_refresh) is what a bare
    API server cannot do; the missing-Application case runs on the real server below."""
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


def test_mgmt_up_creates_the_kind_cluster_once_and_adds_it(
    eksinf, stack_dir, tmp_path, monkeypatch, kube_plane
):
    """`kind` and `docker` are stand-in scripts on PATH (stated in FAKE_KIND) handing out the
    real local server's kubeconfig. It runs no pods: the first `mgmt up` installs Argo CD and
    says, exit 4, that it cannot become Available; `mark_available` then plays the controller
    and the second run finds the cluster and Argo CD and converges."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kind").write_text(FAKE_KIND)
    (bin_dir / "docker").write_text("#!/bin/sh\nexit 0\n")
    for tool in ("kind", "docker"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_KIND_DIR", str(tmp_path))
    plane_kubeconfig(kube_plane, tmp_path / "kubeconfig")
    up = ("mgmt", "up", "--oci-registry", "oci-layout:x", "--argocd-namespace", "argo-mgmt-up")
    first = eksinf(*up, "--argocd-timeout", "0", cwd=stack_dir)
    assert first.code == 4, first.err
    assert "argocd-server in argo-mgmt-up not Available after 0 s: the cluster has no nodes" in (
        first.err
    )
    assert (tmp_path / "clusters").read_text() == "eksinf-mgmt\n"
    mark_available(kube_plane, "argo-mgmt-up")
    again = eksinf(*up, "--json", cwd=stack_dir)
    assert again.code == 0, again.err
    body = json.loads(again.out)
    assert (body["cluster"], body["created"], body["target"]) == (
        "eksinf-mgmt",
        False,
        "mgmt/target",
    )
    assert (body["argocd"]["action"], body["argocd"]["image"]) == (
        "present",
        "quay.io/argoproj/argocd:v3.4.7",
    )
    assert (tmp_path / "clusters").read_text() == "eksinf-mgmt\n"  # not created twice


def test_target_add_records_its_kind_and_refuses_an_unknown_one(
    eksinf, stack_dir, tmp_path, kube_plane
):
    """--kind is stored with the target (its space's TargetKind label) and read back by
    `target list`; the default is eks; an unknown kind is a usage error that writes nothing."""
    install_argocd(kube_plane, stack_dir, "argo-kinds")
    given = plane_kubeconfig(kube_plane, tmp_path / "given.kubeconfig")
    add = ("target", "add", "m1", "--plane", "mgmt", "--kubeconfig", str(given),
           "--argocd-namespace", "argo-kinds")  # fmt: skip
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


# ---- target add and deploy against the real API server (kube_plane) ----------------------


def mgmt_objects(stack_dir: Path) -> list[dict]:
    """Every object of the mgmt plane (eks kind) in the stack's configs/."""
    from eksinf.model.configs import read_configs
    from eksinf.model.stack import load_stack

    stack = load_stack(stack_dir)
    names = [c.name for c in stack.select(plane="mgmt", kind="eks")]
    return [d for u in read_configs(stack.configs_dir, names) for d in u.docs if d]


def test_target_add_then_deploy_mgmt_applies_to_the_real_server(
    eksinf, stack_dir, tmp_path, kube_plane
):
    """target add, then deploy --plane mgmt --apply, against a real kube-apiserver: kubectl sees
    the plane's objects, and a second deploy changes nothing. The server runs no pods, so
    argocd-server never becomes Available by itself: the first target add says so and exits 4,
    then `mark_available` plays the controller and the re-run converges."""
    registry = f"oci-layout:{tmp_path / 'oci'}"
    namespace = "argo-accept"
    assert eksinf("install", cwd=stack_dir).code == 0
    assert eksinf("hub", "create-variant", "dev", "platform-profile-base", cwd=stack_dir).code == 0
    given = plane_kubeconfig(kube_plane, tmp_path / "given.kubeconfig")
    add = (
        "target", "add", "accept", "--plane", "mgmt", "--kubeconfig", str(given),
        "--oci-registry", registry, "--argocd-namespace", namespace,
    )  # fmt: skip
    waited = eksinf(*add, "--argocd-timeout", "1", cwd=stack_dir)
    assert waited.code == 4, waited.err
    assert f"argocd-server in {namespace} not Available after 1 s" in waited.err
    assert "the cluster has no nodes, no argocd-server pod exists" in waited.err
    assert not (stack_dir / ".eksinf" / "clusters" / "accept.kubeconfig").exists()
    assert json.loads(eksinf("target", "list", "--json", cwd=stack_dir).out) == {"targets": []}
    seen = kubectl(given, "get", "deployment", "argocd-server", "-n", namespace)
    assert seen["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":v3.4.7")

    mark_available(kube_plane, namespace)
    added = eksinf(*add, "--json", cwd=stack_dir)
    assert added.code == 0, added.err
    info = json.loads(added.out)
    assert (info["argocd"]["action"], info["argocd"]["image"]) == (
        "present",
        "quay.io/argoproj/argocd:v3.4.7",
    )  # the version read back from the server
    assert info["applied"] == [f"Application {namespace}/accept-argo-apps"]
    assert kubectl(given, "get", "application", "accept-argo-apps", "-n", namespace)["spec"]

    ack_credentials(kube_plane)
    deploy = ("deploy", "--plane", "mgmt", "--target", "accept/target", "--apply", "--no-sync")
    first = eksinf(*deploy, "--json", cwd=stack_dir)
    assert first.code == 0, first.err
    applied = json.loads(first.out)["applied"]
    total = applied["created"] + applied["configured"] + applied["unchanged"]
    assert total == len(mgmt_objects(stack_dir))
    vpcs = kubectl(given, "get", "vpcs.ec2.services.k8s.aws", "-A")["items"]
    assert [v["metadata"]["namespace"] for v in vpcs] == ["aws-inference"]
    crds = {c["metadata"]["name"] for c in kubectl(given, "get", "crd")["items"]}
    assert {"vpcs.ec2.services.k8s.aws", "clusters.eks.services.k8s.aws"} <= crds
    deployments = kubectl(given, "get", "deployments", "-n", "ack-system", "--show-managed-fields")[
        "items"
    ]
    assert deployments, "no ACK controller Deployment on the server"
    managers = {m["manager"] for d in deployments for m in d["metadata"]["managedFields"]}
    assert managers == {"eksinf"}

    def versions() -> dict[str, tuple]:
        out = {}
        for kind in ("crd", "vpcs.ec2.services.k8s.aws", "deployments", "configmaps", "roles"):
            for item in kubectl(given, "get", kind, "-A")["items"]:
                meta = item["metadata"]
                key = f"{kind} {meta.get('namespace', '')}/{meta['name']}"
                out[key] = (meta["resourceVersion"], meta.get("generation"))
        return out

    before = versions()
    second = eksinf(*deploy, cwd=stack_dir)
    assert second.code == 0, second.err
    assert f"0 created, 0 configured, {total} unchanged." in second.out
    assert "Nothing changed." in second.out
    assert versions() == before

    # status reads the same server: the ACK objects exist with no status (no controller runs
    # here) and no Application exists, so every row is unknown; none is degraded or healthy
    status = ("status", "--plane", "mgmt", "--argocd-namespace", namespace, "--json")
    body = json.loads(eksinf(*status, "--kubeconfig", str(given), cwd=stack_dir).out)
    assert body["state"] == "unknown"
    ack_kinds = {
        d["kind"] for d in mgmt_objects(stack_dir) if ".services.k8s.aws/" in d["apiVersion"]
    }
    assert {r["resource"].split()[0] for r in body["ack"]} == ack_kinds
    assert {r["state"] for r in body["ack"]} == {"unknown"}
    assert {(r["sync"], r["state"]) for r in body["argocd"]} == {("Unknown", "unknown")}
    nobody = plane_kubeconfig(kube_plane, tmp_path / "nobody", kube_plane.no_rights_token)
    denied = eksinf(*status, "--kubeconfig", str(nobody), cwd=stack_dir)
    # nothing could be read: status stops with the server's 403 diagnosed (exit 4), never
    # a table of absent rows
    assert denied.code == 4
    body = json.loads(denied.out)
    assert 'user "eksinf-nobody" may not' in body["error"] and body["exit"] == 4


@pytest.mark.parametrize(
    ("token", "status"), [("no-rights", 403), ("unknown", 401)], ids=["403", "401"]
)
def test_target_add_without_rights_or_with_an_unknown_token_is_diagnosed(
    eksinf, stack_dir, tmp_path, kube_plane, token, status
):
    """The real server's own answers: a user with no RBAC bindings (403) and a token it does not
    know (401). Both are environment errors (exit 4) that change nothing."""
    bearer = kube_plane.no_rights_token if token == "no-rights" else "not-a-token-it-knows"
    given = plane_kubeconfig(kube_plane, tmp_path / "given.kubeconfig", bearer)
    result = eksinf(
        "target", "add", f"t{status}", "--plane", "mgmt", "--kubeconfig", str(given),
        "--argocd-namespace", f"argo-{status}", cwd=stack_dir,
    )  # fmt: skip
    assert result.code == 4, result.err
    assert str(status) in result.err.splitlines()[0]
    assert not kubeconfig_path(stack_dir, f"t{status}").exists()
    assert json.loads(eksinf("target", "list", "--json", cwd=stack_dir).out) == {"targets": []}
    admin = plane_kube(kube_plane)
    assert admin.get(resource_path("v1", "Namespace", None, f"argo-{status}")) is None


def test_sync_on_publish_without_applications_waits_for_none(
    eksinf, stack_dir, tmp_path, kube_plane
):
    """On the real server only the root Application exists (target add applied it) and nothing
    syncs it: the wait for it is bounded, and a published space without an Application yet is
    said to have none, never "not Synced within N s" after no wait at all."""
    ns = "argo-sync"
    install_argocd(kube_plane, stack_dir, ns)
    assert eksinf("install", cwd=stack_dir).code == 0
    assert eksinf("hub", "create-variant", "dev", "platform-profile-base", cwd=stack_dir).code == 0
    given = plane_kubeconfig(kube_plane, tmp_path / "given.kubeconfig")
    add = ("target", "add", "w2", "--plane", "workload", "--kubeconfig", str(given),
           "--argocd-namespace", ns, "--oci-registry", f"oci-layout:{tmp_path / 'oci'}")  # fmt: skip
    assert eksinf(*add, cwd=stack_dir).code == 0
    deployed = eksinf(
        "deploy", "--plane", "workload", "--target", "w2/target", "--sync-timeout", "1",
        "--argocd-namespace", ns, "--json", cwd=stack_dir,
    )  # fmt: skip
    assert deployed.code == 0, deployed.err
    sync = json.loads(deployed.out)["sync"]
    assert (sync["status"], sync["refreshed"], sync["notSynced"]) == (
        "timeout",
        ["w2-argo-apps"],
        ["w2-argo-apps"],
    )
    assert "inference-workloads-dev" in sync["absent"]
    space = "inference-workloads-dev"
    fn = ("fn", "set-replicas", "1", "--space", space, "--unit", "vllm")
    assert eksinf(*fn, cwd=stack_dir).code == 0
    published = eksinf("release", "publish", space, "--argocd-namespace", ns, cwd=stack_dir)
    assert published.code == 0, published.err
    assert f"sync: no Application {space} in {ns} to refresh" in published.out
    assert "not Synced within" not in published.out + published.err


def test_a_deploy_failing_partway_leaves_nothing_bound(eksinf, stack_dir, tmp_path, kube_plane):
    """A target whose registry is unreachable (a closed loopback port): deploy fails at its
    first push, exit 4, and the variants it created are gone, so the target can be removed and
    added again with the right registry."""
    from conftest import free_port

    ns = "argo-rollback"
    install_argocd(kube_plane, stack_dir, ns)
    assert eksinf("install", cwd=stack_dir).code == 0
    assert eksinf("hub", "create-variant", "dev", "platform-profile-base", cwd=stack_dir).code == 0
    given = plane_kubeconfig(kube_plane, tmp_path / "given.kubeconfig")
    add = ("target", "add", "rb", "--plane", "mgmt", "--kubeconfig", str(given),
           "--argocd-namespace", ns)  # fmt: skip
    closed = f"127.0.0.1:{free_port()}/eksinf"
    assert eksinf(*add, "--oci-registry", closed, cwd=stack_dir).code == 0
    ack_credentials(kube_plane)
    failed = eksinf(
        "deploy", "--plane", "mgmt", "--target", "rb/target", "--no-sync", cwd=stack_dir
    )
    assert failed.code == 4, failed.err
    assert "rollback: deleted ack-controllers-dev" in failed.err
    hub = LocalHub(stack_dir / ".eksinf" / "hub.db")
    try:
        variants = [s.slug for s in hub.list_spaces() if s.slug.endswith("-dev")]
        assert variants == ["platform-profile-dev"]
        apps = {
            u.slug: hub.unit_data("rb-argo-apps", u.slug) for u in hub.list_units("rb-argo-apps")
        }
        assert {k for k, v in apps.items() if v.strip()} == {"root"}  # children emptied
    finally:
        hub.close()
    removed = eksinf("target", "remove", "rb", "--yes", cwd=stack_dir)
    assert removed.code == 0, removed.err
    good = f"oci-layout:{tmp_path / 'oci'}"
    assert eksinf(*add, "--oci-registry", good, cwd=stack_dir).code == 0
    # --apply without the target's kept kubeconfig is refused before anything is created
    kept = kubeconfig_path(stack_dir, "rb")
    kept.rename(tmp_path / "kept")
    deploy = ("deploy", "--plane", "mgmt", "--target", "rb/target", "--no-sync")
    refused = eksinf(*deploy, "--apply", cwd=stack_dir)
    assert refused.code == 2 and "target rb/target has no kept kubeconfig" in refused.err
    hub = LocalHub(stack_dir / ".eksinf" / "hub.db")
    try:
        assert not hub.space_exists("ack-controllers-dev")
    finally:
        hub.close()
    (tmp_path / "kept").rename(kept)
    again = eksinf(*deploy, cwd=stack_dir)
    assert again.code == 0, again.err


def test_target_add_failing_after_the_cluster_leaves_no_hub_half(
    eksinf, stack_dir, tmp_path, kube_plane, monkeypatch
):
    """The kept kubeconfig cannot be written (simulated: write_kubeconfig raises, as a full
    disk would): the target space made by this run goes again, so a re-run starts clean."""
    from eksinf.errors import EksinfError
    from eksinf.kube import client

    ns = "argo-half"
    install_argocd(kube_plane, stack_dir, ns)
    given = plane_kubeconfig(kube_plane, tmp_path / "given.kubeconfig")
    add = ("target", "add", "half", "--plane", "mgmt", "--kubeconfig", str(given),
           "--argocd-namespace", ns, "--oci-registry", "oci-layout:x")  # fmt: skip

    def refuse(_path, _config):
        raise EksinfError("no space left on device", exit_code=4)

    monkeypatch.setattr(client, "write_kubeconfig", refuse)
    failed = eksinf(*add, cwd=stack_dir)
    assert failed.code == 4 and "no space left on device" in failed.err
    hub = LocalHub(stack_dir / ".eksinf" / "hub.db")
    try:
        assert [s.slug for s in hub.list_spaces() if "half" in s.slug] == []
    finally:
        hub.close()
    monkeypatch.undo()
    assert eksinf(*add, cwd=stack_dir).code == 0
