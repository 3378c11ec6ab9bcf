"""Every kubeconfig a user has, each form reaching the real kube-apiserver (`kube_plane`):
KUBECONFIG with several files and --context, exec credential plugins (v1 and v1beta1, token
and certificate), client certificates and CAs as files and as data, insecure-skip-tls-verify,
proxy-url through a real CONNECT proxy, token files, relative paths; and the 401/403
diagnosis from the server's own answers."""

from __future__ import annotations

import base64
import json
import os
import select
import socket
import socketserver
import sys
import threading
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from eksinf.errors import ENVIRONMENT, USAGE, EksinfError
from eksinf.kube import client, kubeconfig
from eksinf.kube.client import KubeAccessError, KubeClient, resource_path
from eksinf.model.names import kubeconfig_path

NAMESPACES = resource_path("v1", "Namespace")


def write(path: Path, config: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    return path


def config(
    server: str, cluster: dict, user: dict, name: str = "local", current: bool = True
) -> dict:
    out = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server, **cluster}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "users": [{"name": name, "user": user}],
    }
    if current:
        out["current-context"] = name
    return out


def assert_admin(kube: KubeClient) -> None:
    """GET /version and a list of namespaces, as an administrator of the real server."""
    assert kube.version()["gitVersion"] == "v1.31.14"
    names = {n["metadata"]["name"] for n in kube.items(NAMESPACES)}
    assert {"default", "kube-system"} <= names


def ca_data(plane) -> str:
    return base64.b64encode(plane.ca_file.read_bytes()).decode()


# ---- KUBECONFIG and --context ---------------------------------------------------------------


def test_kubeconfig_files_merge_as_kubectl_merges_them(kube_plane, tmp_path, monkeypatch):
    """First file to name a cluster, user or context wins, and the first current-context; a
    listed file that does not exist is skipped; relative paths are relative to their file."""
    first = write(
        tmp_path / "a" / "config",
        config(kube_plane.server, {"certificate-authority": str(kube_plane.ca_file)},
               {"token": kube_plane.admin_token}, name="admin"),
    )  # fmt: skip
    second_dir = tmp_path / "b"
    second_dir.mkdir()
    (second_dir / "ca.crt").write_bytes(kube_plane.ca_file.read_bytes())
    second = config(
        "https://127.0.0.1:1",  # a cluster `admin` that the first file's shadows
        {},
        {"token": "shadowed-by-the-first-file"},
        name="admin",
    )
    second["current-context"] = "nobody"  # the first file set one: this one is ignored
    second["clusters"].append(
        {
            "name": "b-cluster",
            "cluster": {"server": kube_plane.server, "certificate-authority": "ca.crt"},
        }
    )
    second["users"].append({"name": "nobody", "user": {"token": kube_plane.no_rights_token}})
    second["contexts"].append(
        {"name": "nobody", "context": {"cluster": "b-cluster", "user": "nobody"}}
    )
    write(second_dir / "config", second)
    listed = [str(tmp_path / "missing"), str(first), str(second_dir / "config")]
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(listed))

    assert_admin(KubeClient.from_kubeconfig(None))  # current-context admin, from the first file
    nobody = KubeClient.from_kubeconfig(None, context="nobody")  # only in the second file
    assert nobody.version()["gitVersion"] == "v1.31.14"  # its relative CA resolved against b/
    with pytest.raises(KubeAccessError) as caught:
        nobody.items(NAMESPACES)
    assert caught.value.status == 403

    with pytest.raises(EksinfError) as unknown:
        KubeClient.from_kubeconfig(None, context="nope")
    assert unknown.value.exit_code == USAGE
    assert "no context 'nope' (it has: admin, nobody)" in unknown.value.message


def test_a_kubeconfig_naming_an_absent_user_or_repeating_a_name_is_refused(tmp_path):
    broken = config("https://127.0.0.1:1", {}, {})
    broken["contexts"][0]["context"]["user"] = "ghost"
    with pytest.raises(EksinfError) as caught:
        kubeconfig.read_kubeconfig(write(tmp_path / "k1", broken))
    assert caught.value.exit_code == USAGE and "names user 'ghost'" in caught.value.message
    twice = config("https://127.0.0.1:1", {}, {})
    twice["users"].append(twice["users"][0])
    with pytest.raises(EksinfError) as caught:
        kubeconfig.read_kubeconfig(write(tmp_path / "k2", twice))
    assert "users names 'local' twice" in caught.value.message
    with pytest.raises(EksinfError) as caught:
        kubeconfig.read_kubeconfig(tmp_path / "absent")
    assert caught.value.exit_code == ENVIRONMENT and "no kubeconfig at" in caught.value.message


# ---- TLS and static credentials ------------------------------------------------------------


def test_ca_and_client_certificate_as_files_and_as_data(kube_plane, tmp_path):
    cert, key = kube_plane.client_cert("eksinf-cert-admin")
    as_files = config(
        kube_plane.server,
        {"certificate-authority": str(kube_plane.ca_file)},
        {"client-certificate": str(cert), "client-key": str(key)},
    )
    assert_admin(KubeClient.from_kubeconfig(write(tmp_path / "files", as_files)))
    as_data = config(
        kube_plane.server,
        {"certificate-authority-data": ca_data(kube_plane)},
        {
            "client-certificate-data": base64.b64encode(cert.read_bytes()).decode(),
            "client-key-data": base64.b64encode(key.read_bytes()).decode(),
        },
    )
    assert_admin(KubeClient.from_kubeconfig(write(tmp_path / "data", as_data)))


def test_the_kubeconfig_ca_is_checked_and_insecure_skip_tls_verify_skips_it(
    kube_plane, tmp_path, monkeypatch, capfd
):
    # a CA bundle in the environment never replaces the kubeconfig's (requests would let it)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "no-such-bundle.pem"))
    wrong_ca = tmp_path / "wrong-ca.crt"
    wrong_ca.write_bytes(kube_plane.folder.joinpath("client-ca.crt").read_bytes())
    wrong = config(kube_plane.server, {"certificate-authority": str(wrong_ca)},
                   {"token": kube_plane.admin_token})  # fmt: skip
    with pytest.raises(EksinfError) as caught:
        KubeClient.from_kubeconfig(write(tmp_path / "wrong", wrong)).version()
    assert caught.value.exit_code == ENVIRONMENT and "unreachable" in caught.value.message
    insecure = config(kube_plane.server, {"insecure-skip-tls-verify": True},
                      {"token": kube_plane.admin_token})  # fmt: skip
    monkeypatch.setattr(client, "_UNVERIFIED", set())  # as in a new process
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # urllib3's per-request warning would fail the test
        assert_admin(KubeClient.from_kubeconfig(write(tmp_path / "insecure", insecure)))
        assert_admin(KubeClient.from_kubeconfig(write(tmp_path / "insecure", insecure)))
    said = capfd.readouterr().err
    # said once, in eksinf's words, however many requests and clients
    assert said.count("certificate is not verified") == 1, said
    assert f"{kube_plane.server}: the server's certificate is not verified" in said


def test_token_file_and_relative_paths_resolve_against_the_kubeconfig_folder(
    kube_plane, tmp_path, monkeypatch
):
    folder = tmp_path / "kube"
    folder.mkdir()
    (folder / "ca.crt").write_bytes(kube_plane.ca_file.read_bytes())
    (folder / "token").write_text(kube_plane.admin_token + "\n")
    path = write(
        folder / "config",
        config(kube_plane.server, {"certificate-authority": "ca.crt"},
               {"token": "the-file-wins", "tokenFile": "token"}),
    )  # fmt: skip
    monkeypatch.chdir(tmp_path)  # not the kubeconfig's folder
    assert_admin(KubeClient.from_kubeconfig(path))
    cert, key = kube_plane.client_cert("eksinf-relative")
    (folder / "me.crt").write_bytes(cert.read_bytes())
    (folder / "me.key").write_bytes(key.read_bytes())
    relative = config(kube_plane.server, {"certificate-authority": "ca.crt"},
                      {"client-certificate": "me.crt", "client-key": "me.key"})  # fmt: skip
    assert_admin(KubeClient.from_kubeconfig(write(folder / "certs", relative)))


class _ConnectProxy(socketserver.ThreadingTCPServer):
    """A tiny HTTP CONNECT proxy on 127.0.0.1 that records each tunnel it opens."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Tunnel)
        self.tunnels: list[str] = []


class _Tunnel(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.request.recv(4096)
            if not chunk or len(head) > 16384:
                return
            head += chunk
        method, target = head.split(b"\r\n", 1)[0].decode().split(" ")[:2]
        if method != "CONNECT":
            self.request.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        self.server.tunnels.append(target)  # type: ignore[attr-defined]
        host, port = target.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as upstream:
            self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            ends = [self.request, upstream]
            while True:
                ready, _, _ = select.select(ends, [], [], 10)
                if not ready:
                    return
                for end in ready:
                    data = end.recv(65536)
                    if not data:
                        return
                    (upstream if end is self.request else self.request).sendall(data)


@pytest.fixture
def connect_proxy() -> Iterator[_ConnectProxy]:
    proxy = _ConnectProxy()
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    yield proxy
    proxy.shutdown()
    proxy.server_close()


def test_proxy_url_tunnels_every_request_through_the_proxy(kube_plane, tmp_path, connect_proxy):
    port = connect_proxy.server_address[1]
    through = config(
        kube_plane.server,
        {"certificate-authority": str(kube_plane.ca_file), "proxy-url": f"http://127.0.0.1:{port}"},
        {"token": kube_plane.admin_token},
    )
    assert_admin(KubeClient.from_kubeconfig(write(tmp_path / "proxied", through)))
    assert connect_proxy.tunnels and set(connect_proxy.tunnels) == {kube_plane.server[8:]}
    gone = dict(through)
    gone["clusters"] = [
        {"name": "local", "cluster": {**through["clusters"][0]["cluster"], "proxy-url": "http://127.0.0.1:1"}}
    ]  # fmt: skip
    with pytest.raises(EksinfError) as caught:
        KubeClient.from_kubeconfig(write(tmp_path / "no-proxy", gone)).version()
    assert "through proxy http://127.0.0.1:1" in caught.value.message


def test_a_loopback_server_is_never_reached_through_the_environment_proxy(
    kube_plane, tmp_path, connect_proxy, monkeypatch
):
    """$HTTPS_PROXY set for the internet (and no NO_PROXY) does not swallow a loopback API
    server, as client-go never proxies loopback; a kubeconfig's own proxy-url still would."""
    port = connect_proxy.server_address[1]
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{port}")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    direct = config(
        kube_plane.server, {"certificate-authority": str(kube_plane.ca_file)},
        {"token": kube_plane.admin_token},
    )  # fmt: skip
    assert_admin(KubeClient.from_kubeconfig(write(tmp_path / "direct", direct)))
    assert connect_proxy.tunnels == []


# ---- exec credential plugins ---------------------------------------------------------------

PLUGIN = """\
import json, os, sys
from pathlib import Path
here = Path(__file__).parent
runs = here / "runs"
runs.write_text(str(int(runs.read_text()) + 1 if runs.exists() else 1))
(here / "exec-info.json").write_text(os.environ["KUBERNETES_EXEC_INFO"])
(here / "env.txt").write_text(os.environ.get("PLUGIN_GREETING", ""))
status = json.loads((here / "status.json").read_text())
print(json.dumps({"apiVersion": sys.argv[1], "kind": "ExecCredential", "status": status}))
"""


def plugin(folder: Path, api_version: str, status: dict, **extra) -> dict:
    """A kubeconfig user whose exec plugin (a script in `folder`) prints `status`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plugin.py").write_text(PLUGIN)
    (folder / "status.json").write_text(json.dumps(status))
    return {
        "exec": {
            "apiVersion": f"client.authentication.k8s.io/{api_version}",
            "command": sys.executable,
            "args": [str(folder / "plugin.py"), f"client.authentication.k8s.io/{api_version}"],
            "env": [{"name": "PLUGIN_GREETING", "value": "hello"}],
            **extra,
        }
    }


def runs(folder: Path) -> int:
    return int((folder / "runs").read_text())


@pytest.mark.parametrize("api_version", ["v1", "v1beta1"])
def test_an_exec_plugin_token_is_used_and_kept_until_it_expires(kube_plane, tmp_path, api_version):
    later = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    folder = tmp_path / "plugin"
    user = plugin(folder, api_version,
                  {"token": kube_plane.admin_token, "expirationTimestamp": later},
                  provideClusterInfo=True, interactiveMode="Never")  # fmt: skip
    cluster = {"certificate-authority-data": ca_data(kube_plane)}
    path = write(tmp_path / "config", config(kube_plane.server, cluster, user))
    assert_admin(KubeClient.from_kubeconfig(path))
    assert_admin(KubeClient.from_kubeconfig(path))
    assert runs(folder) == 1  # one credential for the whole process until it expires
    info = json.loads((folder / "exec-info.json").read_text())
    assert info["apiVersion"] == f"client.authentication.k8s.io/{api_version}"
    assert info["kind"] == "ExecCredential" and info["spec"]["interactive"] is False
    assert info["spec"]["cluster"]["server"] == kube_plane.server
    assert info["spec"]["cluster"]["certificate-authority-data"] == ca_data(kube_plane)
    assert (folder / "env.txt").read_text() == "hello"


def test_an_expired_exec_credential_is_minted_again(kube_plane, tmp_path):
    folder = tmp_path / "plugin"
    user = plugin(folder, "v1", {"token": kube_plane.admin_token,
                                 "expirationTimestamp": "2020-01-01T00:00:00Z"})  # fmt: skip
    cluster = {"certificate-authority": str(kube_plane.ca_file)}
    kube = KubeClient.from_kubeconfig(
        write(tmp_path / "config", config(kube_plane.server, cluster, user))
    )
    kube.version()
    kube.version()
    assert runs(folder) == 2


def test_an_exec_plugin_may_answer_with_a_client_certificate(kube_plane, tmp_path):
    cert, key = kube_plane.client_cert("eksinf-exec-cert")
    folder = tmp_path / "plugin"
    status = {"clientCertificateData": cert.read_text(), "clientKeyData": key.read_text()}
    user = plugin(folder, "v1beta1", status)
    cluster = {"certificate-authority": str(kube_plane.ca_file)}
    assert_admin(
        KubeClient.from_kubeconfig(
            write(tmp_path / "config", config(kube_plane.server, cluster, user))
        )
    )


def test_a_401_to_a_plugin_token_mints_once_more_then_names_the_plugin(kube_plane, tmp_path):
    folder = tmp_path / "plugin"
    user = plugin(folder, "v1", {"token": "revoked-token"})
    cluster = {"certificate-authority": str(kube_plane.ca_file)}
    path = write(tmp_path / "config", config(kube_plane.server, cluster, user))
    with pytest.raises(KubeAccessError) as caught:
        KubeClient.from_kubeconfig(path).version()
    assert caught.value.status == 401 and runs(folder) == 2
    assert f"exec plugin `{sys.executable} {folder / 'plugin.py'}" in caught.value.message


def test_the_kept_kubeconfig_inlines_certificates_and_keeps_references_absolute(
    kube_plane, tmp_path, monkeypatch
):
    """What target add and enroll keep: one context, certificates inlined, a token file and an
    exec command made absolute, so it reaches the same cluster from any folder."""
    folder = tmp_path / "kube"
    folder.mkdir()
    (folder / "ca.crt").write_bytes(kube_plane.ca_file.read_bytes())
    (folder / "token").write_text(kube_plane.admin_token)
    (folder / "bin").mkdir()
    two = config(kube_plane.server, {"certificate-authority": "ca.crt"}, {"tokenFile": "token"})
    two["users"].append({"name": "login", "user": {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": "bin/login"}}})  # fmt: skip
    two["contexts"].append({"name": "login", "context": {"cluster": "local", "user": "login"}})
    merged, label = kubeconfig.load(write(folder / "config", two))
    kept = kubeconfig.one_context(merged, None, label)
    assert [c["name"] for c in kept["contexts"]] == ["local"]
    assert [u["name"] for u in kept["users"]] == ["local"]
    cluster = kept["clusters"][0]["cluster"]
    assert "certificate-authority" not in cluster
    assert (
        base64.b64decode(cluster["certificate-authority-data"]) == kube_plane.ca_file.read_bytes()
    )
    assert kept["users"][0]["user"]["tokenFile"] == str(folder / "token")
    login = kubeconfig.one_context(merged, "login", label)
    assert login["users"][0]["user"]["exec"]["command"] == str(folder / "bin" / "login")
    monkeypatch.chdir(tmp_path)
    assert_admin(KubeClient.from_kubeconfig(write(tmp_path / "kept", kept)))


def test_a_failing_exec_plugin_is_named_with_its_stderr_never_no_access(kube_plane, tmp_path):
    script = tmp_path / "login.py"
    script.write_text(
        "import sys\nsys.stderr.write('error: the SSO session has expired\\n')\nsys.exit(3)\n"
    )
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                     "args": [str(script)]}}  # fmt: skip
    path = write(
        tmp_path / "config", config(kube_plane.server, {"insecure-skip-tls-verify": True}, user)
    )
    with pytest.raises(EksinfError) as caught:
        KubeClient.from_kubeconfig(path).version()
    assert not isinstance(caught.value, KubeAccessError)
    assert caught.value.exit_code == ENVIRONMENT
    assert f"`{sys.executable} {script}` exited with 3" in caught.value.message
    assert "the SSO session has expired" in caught.value.message


def test_an_exec_plugin_is_bounded_in_time_and_output(tmp_path, monkeypatch):
    monkeypatch.setattr(kubeconfig, "EXEC_TIMEOUT", 1.0)
    monkeypatch.setattr(kubeconfig, "EXEC_MAX_OUTPUT", 1000)
    for name, body, said in (
        ("slow", "import time\ntime.sleep(30)\n", "did not finish within 1 s"),
        ("loud", "print('x' * 100000)\n", "printed more than 1000 bytes"),
        ("odd", "print('{}')\n", "not an ExecCredential"),
        ("missing", None, "was not found"),
    ):
        script = tmp_path / f"{name}.py"
        if body is not None:
            script.write_text(body)
        command, args = (sys.executable, [str(script)]) if body else (str(script), [])
        user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": command,
                         "args": args, "installHint": "install the login tool"}}  # fmt: skip
        path = write(tmp_path / f"{name}.config", config("https://127.0.0.1:1", {}, user))
        with pytest.raises(EksinfError) as caught:
            KubeClient.from_kubeconfig(path).version()
        assert caught.value.exit_code == ENVIRONMENT and said in caught.value.message, name
    assert caught.value.hint == "install the login tool"


# ---- 401 and 403, diagnosed from the server's answers ---------------------------------------


def test_401_and_403_are_diagnosed_from_the_real_answers(kube_plane, tmp_path):
    cluster = {"certificate-authority": str(kube_plane.ca_file)}
    nobody = KubeClient.from_kubeconfig(
        write(
            tmp_path / "nobody",
            config(kube_plane.server, cluster, {"token": kube_plane.no_rights_token}),
        )
    )
    with pytest.raises(KubeAccessError) as forbidden:
        nobody.items(NAMESPACES)
    error = forbidden.value
    assert error.status == 403 and error.exit_code == ENVIRONMENT
    assert (
        f'cluster {kube_plane.server}: user "eksinf-nobody" may not list namespaces at the '
        "cluster scope (HTTP 403 Forbidden on GET /api/v1/namespaces): authenticated, but RBAC "
        "denies it"
    ) == error.message
    assert '--clusterrole=cluster-admin --user="eksinf-nobody"' in error.hint
    assert "access policy" in error.hint
    with pytest.raises(KubeAccessError) as namespaced:
        nobody.items(resource_path("v1", "ConfigMap", "kube-system"))
    assert "may not list configmaps in namespace kube-system" in namespaced.value.message
    assert "rolebinding eksinf --namespace kube-system" in namespaced.value.hint

    stranger = KubeClient.from_kubeconfig(
        write(
            tmp_path / "stranger",
            config(kube_plane.server, cluster, {"token": "not-a-known-token"}),
        )
    )
    with pytest.raises(KubeAccessError) as unauthorized:
        stranger.version()
    error = unauthorized.value
    assert error.status == 401 and error.exit_code == ENVIRONMENT
    assert error.message == (
        f"cluster {kube_plane.server} does not recognise the credentials of context local "
        '(kubeconfig user "local", token): HTTP 401 Unauthorized on GET /version'
    )
    assert "expired" in error.hint and "access entry" in error.hint


def test_target_add_surfaces_the_diagnosis_and_binds_nothing(
    eksinf, stack_dir, kube_plane, tmp_path, monkeypatch
):
    cluster = {"certificate-authority": str(kube_plane.ca_file)}
    two = config(kube_plane.server, cluster, {"token": kube_plane.no_rights_token}, name="nobody")
    two["users"].append({"name": "stranger", "user": {"token": "not-a-known-token"}})
    two["contexts"].append(
        {"name": "stranger", "context": {"cluster": "nobody", "user": "stranger"}}
    )
    given = write(tmp_path / "given.kubeconfig", two)
    add = ("target", "add", "m1", "--plane", "mgmt", "--kubeconfig", str(given))
    forbidden = eksinf(*add, cwd=stack_dir)
    assert forbidden.code == ENVIRONMENT
    assert 'user "eksinf-nobody" may not get deployments.apps in namespace argocd' in forbidden.err
    # without --kubeconfig: KUBECONFIG's files (a missing one skipped), and --context
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "absent"), str(given)]))
    unauthorized = eksinf(*add[:5], "--context", "stranger", cwd=stack_dir)
    assert unauthorized.code == ENVIRONMENT
    assert "does not recognise the credentials of context stranger" in unauthorized.err
    assert not kubeconfig_path(stack_dir, "m1").exists()
    listed = eksinf("target", "list", "--json", cwd=stack_dir)
    assert json.loads(listed.out) == {"targets": []}


def serve_applications(plane, stack_dir: Path) -> None:
    """Create Argo CD's Application CRD (as the admin) and wait, bounded, until it is served:
    a kind the server does not serve is never read, so it could not be forbidden."""
    import time

    from eksinf.core.yamlio import load_docs

    crds = load_docs((stack_dir / "configs" / "argocd" / "argocd-crds.yaml").read_text())
    crd = next(d for d in crds if d["metadata"]["name"] == "applications.argoproj.io")
    admin = KubeClient.from_auth(
        kubeconfig.parse_kubeconfig(plane.kubeconfig(), stack_dir, "admin")
    )
    admin.apply(crd)
    for _ in range(150):
        admin.forget_discovery()
        if "Application" in (admin.resources("argoproj.io/v1alpha1") or {}):
            return
        time.sleep(0.2)
    raise AssertionError("the Application CRD was not served within 30 s")


def test_status_plane_surfaces_the_diagnosis(eksinf, stack_dir, kube_plane, tmp_path):
    serve_applications(kube_plane, stack_dir)
    cluster = {"certificate-authority": str(kube_plane.ca_file)}
    two = config(kube_plane.server, cluster, {"token": kube_plane.no_rights_token}, name="nobody")
    two["users"].append({"name": "stranger", "user": {"token": "not-a-known-token"}})
    two["contexts"].append(
        {"name": "stranger", "context": {"cluster": "nobody", "user": "stranger"}}
    )
    given = write(tmp_path / "k", two)
    status = ("status", "--plane", "mgmt", "--kubeconfig", str(given))
    forbidden = eksinf(*status, cwd=stack_dir)
    assert forbidden.code == ENVIRONMENT
    assert (
        'user "eksinf-nobody" may not get applications.argoproj.io in namespace argocd'
        in forbidden.err
    )
    unauthorized = eksinf(*status, "--context", "stranger", cwd=stack_dir)
    assert unauthorized.code == ENVIRONMENT
    assert "does not recognise the credentials of context stranger" in unauthorized.err


def test_the_contract_reads_carry_the_diagnosis_and_its_fix(kube_plane, tmp_path):
    """enroll's contract reads the endpoint and Argo CD through the same client: a 403 there
    is the RBAC diagnosis, a 401 the credentials one, each with its fix, never "unreachable"."""
    from eksinf.aws.contract.facts import Facts, _gather_kube

    cluster = {"certificate-authority": str(kube_plane.ca_file)}
    facts = Facts(region="us-west-2", cluster_name="local")
    nobody = config(kube_plane.server, cluster, {"token": kube_plane.no_rights_token})
    _gather_kube(KubeClient.from_kubeconfig(write(tmp_path / "n", nobody)), facts, "argocd")
    assert facts.version == "v1.31.14"  # /version is public to every authenticated user
    assert facts.argocd_status == 403
    assert 'user "eksinf-nobody" may not get deployments.apps in namespace argocd' in (
        facts.argocd_error
    )

    stranger = config(kube_plane.server, cluster, {"token": "not-a-known-token"})
    _gather_kube(KubeClient.from_kubeconfig(write(tmp_path / "s", stranger)), facts, "argocd")
    assert facts.endpoint_status == 401 and "does not recognise" in facts.endpoint_error
    assert "expired" in facts.endpoint_hint  # the endpoint-reachable check's fix


def test_a_kubeconfig_is_never_stored_in_the_cache(tmp_path, monkeypatch):
    """Parses of large YAML texts are cached on disk; a kubeconfig names credentials."""
    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))
    secret = "s3cr3t-" + "x" * 64
    big = config("https://127.0.0.1:1", {"certificate-authority-data": "QUFB" * 2000},
                 {"token": secret})  # fmt: skip
    assert kubeconfig.read_kubeconfig(write(tmp_path / "big", big)).token == secret
    stored = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert not any(secret.encode() in p.read_bytes() for p in stored)
