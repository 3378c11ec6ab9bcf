"""OCI push/pull against a real docker-registry on 127.0.0.1 and an OCI image-layout directory."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
import requests
from conftest import free_port, start_registry

from eksinf.errors import ENVIRONMENT, FAILURE, USAGE, EksinfError
from eksinf.model.digest import oci_digest
from eksinf.publish.bundle import bundle_bytes
from eksinf.publish.oci import (
    ARTIFACT_TYPE,
    EMPTY_MEDIA_TYPE,
    LAYER_MEDIA_TYPE,
    Ref,
    list_tags,
    parse_ref,
    pull,
    push,
)

BLOB = bundle_bytes({"a.yaml": b"a: 1\n", "b.yaml": b"b: 2\n"})
ANNOTATIONS = {
    "org.opencontainers.image.version": "1.0.0",
    "org.opencontainers.image.revision": "abc123",
    "org.opencontainers.image.source": "https://example.invalid/stack",
    "org.opencontainers.image.title": "demo",
    "org.opencontainers.image.description": "demo bundle",
}


def do_push(ref: str, blob: bytes = BLOB, tags=("latest", "1.0.0")):
    return push(ref, blob, title="demo.tar.gz", annotations=ANNOTATIONS, tags=list(tags))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("oci-layout:/tmp/x", Ref("layout", "/tmp/x", "", None, None)),
        ("oci-layout:rel/dir:v1", Ref("layout", "rel/dir", "", "v1", None)),
        ("127.0.0.1:5000/a/b", Ref("registry", "127.0.0.1:5000", "a/b", None, None)),
        ("oci://ghcr.io/o/configs/x:latest", Ref("registry", "ghcr.io", "o/configs/x", "latest")),
        (
            "localhost:1/r@sha256:" + "0" * 64,
            Ref("registry", "localhost:1", "r", None, "sha256:" + "0" * 64),
        ),
    ],
)
def test_parse_ref(text, expected):
    assert parse_ref(text) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("karpenter", "no repository"),
        ("docker/karpenter", "not a registry host"),
        ("ghcr.io/Upper/x", "lowercase"),
        ("ghcr.io/x:bad tag", "not a valid tag"),
        ("ghcr.io/x@sha256:12", "digest"),
        ("oci-layout:", "no directory"),
    ],
)
def test_parse_ref_rejects_bad_references(text, why):
    with pytest.raises(EksinfError) as err:
        parse_ref(text)
    assert err.value.exit_code == USAGE and why in err.value.message


def test_registry_push_pull_round_trip(registry, tmp_path):
    ref = f"{registry}/stack/roundtrip"
    result = do_push(ref)
    assert not result.unchanged
    assert result.layer_digest == oci_digest(BLOB)
    pulled = pull(f"{ref}:1.0.0")
    assert pulled.blob == BLOB
    assert pulled.title == "demo.tar.gz"
    assert pulled.manifest_digest == result.manifest_digest
    assert pulled.annotations["org.opencontainers.image.created"] == "1970-01-01T00:00:00Z"
    assert pulled.annotations["org.opencontainers.image.revision"] == "abc123"
    assert list_tags(ref) == ["1.0.0", "latest"]
    raw = requests.get(
        f"http://{registry}/v2/stack/roundtrip/manifests/latest",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
        timeout=10,
    ).json()
    assert raw["artifactType"] == ARTIFACT_TYPE
    assert raw["config"]["mediaType"] == EMPTY_MEDIA_TYPE
    assert [layer["mediaType"] for layer in raw["layers"]] == [LAYER_MEDIA_TYPE]


def test_second_push_is_unchanged_with_the_same_digest(registry):
    ref = f"{registry}/stack/again"
    first = do_push(ref)
    second = do_push(ref)
    assert second.unchanged and not first.unchanged
    assert second.manifest_digest == first.manifest_digest


def test_same_content_new_revision_keeps_the_published_manifest(registry):
    ref = f"{registry}/stack/revisions"
    first = do_push(ref)
    later = push(
        ref,
        BLOB,
        title="demo.tar.gz",
        annotations={**ANNOTATIONS, "org.opencontainers.image.revision": "def456"},
        tags=["latest", "1.0.0"],
    )
    assert later.unchanged and later.manifest_digest == first.manifest_digest
    assert pull(ref).annotations["org.opencontainers.image.revision"] == "abc123"


def test_immutable_tag_with_different_content_is_refused(registry):
    ref = f"{registry}/stack/immutable"
    first = do_push(ref)
    with pytest.raises(EksinfError) as err:
        do_push(ref, bundle_bytes({"a.yaml": b"a: changed\n"}))
    assert err.value.exit_code == FAILURE
    assert "1.0.0" in err.value.message and "immutable" in err.value.message
    assert pull(ref).manifest_digest == first.manifest_digest  # latest did not move


def test_latest_moves_when_content_changes(registry):
    ref = f"{registry}/stack/moving"
    do_push(ref, tags=["latest", "1"])
    changed = bundle_bytes({"a.yaml": b"a: 2\n"})
    second = do_push(ref, changed, tags=["latest", "2"])
    assert not second.unchanged
    assert pull(ref).blob == changed
    assert pull(f"{ref}:1").blob == BLOB
    assert list_tags(ref) == ["1", "2", "latest"]


def test_wrong_digest_on_pull_fails(registry):
    ref = f"{registry}/stack/digest"
    result = do_push(ref)
    assert pull(ref, expect_digest=result.manifest_digest).blob == BLOB
    assert pull(f"{ref}@{result.manifest_digest}").blob == BLOB
    wrong = "sha256:" + "1" * 64
    with pytest.raises(EksinfError) as err:
        pull(ref, expect_digest=wrong)
    assert err.value.exit_code == FAILURE and wrong in err.value.message


def test_missing_tag_is_a_clear_failure(registry):
    with pytest.raises(EksinfError) as err:
        pull(f"{registry}/stack/nothing-here:v9")
    assert err.value.exit_code == FAILURE and "not found" in err.value.message


def test_registry_down_is_an_environment_error():
    host = f"127.0.0.1:{free_port()}"  # nothing listens here
    for call in (
        lambda: do_push(f"{host}/x"),
        lambda: pull(f"{host}/x"),
        lambda: list_tags(f"{host}/x"),
    ):
        with pytest.raises(EksinfError) as err:
            call()
        assert err.value.exit_code == ENVIRONMENT
        assert f"registry {host} is unreachable" in err.value.message


def test_layout_round_trip_matches_registry_manifest(registry, tmp_path):
    layout = tmp_path / "layout"
    result = do_push(f"oci-layout:{layout}")
    registry_result = do_push(f"{registry}/stack/same-as-layout")
    assert result.manifest_digest == registry_result.manifest_digest
    assert pull(f"oci-layout:{layout}:1.0.0").blob == BLOB
    assert do_push(f"oci-layout:{layout}").unchanged
    assert list_tags(f"oci-layout:{layout}") == ["1.0.0", "latest"]
    assert json.loads((layout / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    index = json.loads((layout / "index.json").read_text())
    names = [m["annotations"]["org.opencontainers.image.ref.name"] for m in index["manifests"]]
    assert names == ["1.0.0", "latest"]
    blob_file = layout / "blobs" / "sha256" / result.layer_digest.split(":")[1]
    assert blob_file.read_bytes() == BLOB
    assert not [p for p in layout.rglob("*.tmp")]


def test_layout_pull_detects_a_tampered_layer(tmp_path):
    layout = tmp_path / "layout"
    result = do_push(f"oci-layout:{layout}")
    (layout / "blobs" / "sha256" / result.layer_digest.split(":")[1]).write_bytes(b"evil")
    with pytest.raises(EksinfError) as err:
        pull(f"oci-layout:{layout}")
    assert err.value.exit_code == FAILURE and "does not match its digest" in err.value.message


def test_credentials_come_from_the_environment_then_docker_config(tmp_path, monkeypatch):
    from eksinf.publish.registry_auth import registry_credentials

    config = tmp_path / "docker"
    config.mkdir()
    (config / "config.json").write_text(
        json.dumps({"auths": {"ghcr.io": {"auth": "dXNlcjpzM2NyM3Q="}}})  # user:s3cr3t
    )
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    monkeypatch.delenv("EKSINF_REGISTRY_USERNAME", raising=False)
    assert registry_credentials("ghcr.io") == ("user", "s3cr3t")
    assert registry_credentials("quay.io") is None
    monkeypatch.setenv("EKSINF_REGISTRY_USERNAME", "ci")
    monkeypatch.setenv("EKSINF_REGISTRY_PASSWORD", "token")
    assert registry_credentials("ghcr.io") == ("ci", "token")


# ---- the CLI: bundle, push, pull, tags ------------------------------------------------------


def test_cli_bundle_json_is_reproducible_and_carries_provenance(eksinf, stack_dir):
    first = eksinf("bundle", "--json", cwd=stack_dir)
    second = eksinf("bundle", "--json", cwd=stack_dir)
    assert first.code == 0, first.err
    assert first.out == second.out
    bundles = json.loads(first.out)["bundles"]
    karpenter = next(b for b in bundles if b["component"] == "karpenter")
    assert karpenter["title"] == "karpenter.tar.gz"
    prov = karpenter["provenance"]
    assert prov["bundleSha256"] == karpenter["sha256"] and len(prov["tarSha256"]) == 64
    assert prov["tool"]["version"] and "sourceCommit" in prov
    assert [c["chart"] for c in prov["charts"]] == ["karpenter"]


def test_cli_push_pull_round_trip_against_the_registry(eksinf, stack_dir, registry, tmp_path):
    base = f"{registry}/cli/eks-inference"
    pushed = eksinf("push", "--registry", base, "-c", "karpenter", "--json", cwd=stack_dir)
    assert pushed.code == 0, pushed.err
    (entry,) = json.loads(pushed.out)["pushed"]
    assert entry["ref"] == f"{base}/karpenter" and not entry["unchanged"]
    assert "karpenter: pushed" in pushed.err

    again = eksinf("push", "--registry", base, "-c", "karpenter", "--json", cwd=stack_dir)
    (second,) = json.loads(again.out)["pushed"]
    assert second["unchanged"] and second["manifestDigest"] == entry["manifestDigest"]
    assert "karpenter: unchanged" in again.err

    tags = eksinf("tags", f"{base}/karpenter", "--json")
    assert json.loads(tags.out)["tags"] == sorted(["latest", entry["version"]])

    out = tmp_path / "pulled"
    pulled = eksinf(
        "pull",
        f"{base}/karpenter:{entry['version']}",
        "--out",
        str(out),
        "--digest",
        entry["manifestDigest"],
        "--json",
    )
    assert pulled.code == 0, pulled.err
    info = json.loads(pulled.out)
    annotations = info["annotations"]
    assert annotations["org.opencontainers.image.version"] == entry["version"]
    assert annotations["org.opencontainers.image.title"] == "karpenter"
    assert "karpenter@1.14.0=sha256:" in annotations["io.eksinf.charts"]
    committed = stack_dir / "configs" / "karpenter"
    assert info["files"] == sorted(p.name for p in committed.iterdir())
    for name in info["files"]:
        assert (out / name).read_bytes() == (committed / name).read_bytes()


def test_cli_pull_with_a_wrong_digest_exits_1(eksinf, stack_dir, registry, tmp_path):
    base = f"{registry}/cli/wrong-digest"
    assert eksinf("push", "--registry", base, "-c", "gpu-runtime", cwd=stack_dir).code == 0
    wrong = "sha256:" + "2" * 64
    result = eksinf("pull", f"{base}/gpu-runtime", "--out", str(tmp_path / "o"), "--digest", wrong)
    assert result.code == FAILURE
    assert f"expected {wrong}" in result.err
    assert not (tmp_path / "o").exists()


def test_cli_push_to_a_registry_that_is_down_exits_4(eksinf, stack_dir):
    host = f"127.0.0.1:{free_port()}"
    result = eksinf("push", "--registry", f"{host}/x", "-c", "karpenter", cwd=stack_dir)
    assert result.code == ENVIRONMENT
    assert f"eksinf: registry {host} is unreachable" in result.err


def test_cli_push_defaults_to_a_layout_under_the_stack(eksinf, stack_dir, monkeypatch, tmp_path):
    monkeypatch.delenv("EKSINF_REGISTRY", raising=False)
    result = eksinf("push", "-c", "gpu-runtime", "--json", cwd=stack_dir)
    assert result.code == 0, result.err
    layout = stack_dir / ".eksinf" / "oci" / "gpu-runtime"
    assert json.loads(result.out)["registry"] == f"oci-layout:{stack_dir / '.eksinf' / 'oci'}"
    assert (layout / "index.json").is_file()
    pulled = eksinf("pull", f"oci-layout:{layout}", "--out", str(tmp_path / "o"))
    assert pulled.code == 0, pulled.err


def test_cli_push_refuses_a_base_with_a_tag(eksinf, stack_dir, registry):
    result = eksinf("push", "--registry", f"{registry}/x:v1", cwd=stack_dir)
    assert result.code == USAGE and "names a tag or digest" in result.err


def test_cli_bundle_of_an_unknown_component_exits_3(eksinf, stack_dir):
    result = eksinf("bundle", "-c", "nope", cwd=stack_dir)
    assert result.code == 3 and "unknown component 'nope'" in result.err


# ---- a registry that requires credentials (htpasswd, Basic auth) ----------------------------

# bcrypt of "s3cr3t-pw" (cost 4), precomputed so the test needs no bcrypt library.
HTPASSWD = "ci:$2b$04$YZvU72L.tDrx3Q3wEge.i.nypLDmiboeXx2XgTWIe9bLqU1Ee0GSS\n"


@pytest.fixture(scope="module")
def auth_registry(tmp_path_factory):
    """docker-registry on 127.0.0.1 with htpasswd auth; a second instance, not the shared one."""
    root = tmp_path_factory.mktemp("auth-registry")
    (root / "htpasswd").write_text(HTPASSWD)
    auth = f"auth: {{htpasswd: {{realm: eksinf-test, path: {root / 'htpasswd'}}}}}\n"
    with start_registry(root, extra_config=auth, ready_status=401) as host:
        yield host


@pytest.fixture
def no_credentials(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "no-docker-config"))
    monkeypatch.delenv("EKSINF_REGISTRY_USERNAME", raising=False)
    monkeypatch.delenv("EKSINF_REGISTRY_PASSWORD", raising=False)
    monkeypatch.setattr(
        "eksinf.publish.registry._SESSIONS", {}
    )  # no Basic auth cached from another test


def test_registry_without_credentials_is_an_environment_error(auth_registry, no_credentials):
    with pytest.raises(EksinfError) as err:
        do_push(f"{auth_registry}/secure/none")
    assert err.value.exit_code == ENVIRONMENT
    assert f"registry {auth_registry} refused" in err.value.message and "(401)" in err.value.message
    assert "EKSINF_REGISTRY_USERNAME" in err.value.hint


def test_registry_credentials_from_the_environment(auth_registry, no_credentials, monkeypatch):
    monkeypatch.setenv("EKSINF_REGISTRY_USERNAME", "ci")
    monkeypatch.setenv("EKSINF_REGISTRY_PASSWORD", "s3cr3t-pw")
    result = do_push(f"{auth_registry}/secure/env")
    assert pull(f"{auth_registry}/secure/env").blob == BLOB
    assert pull(f"{auth_registry}/secure/env").manifest_digest == result.manifest_digest


def test_registry_credentials_from_the_docker_config(
    auth_registry, no_credentials, monkeypatch, tmp_path
):
    config = tmp_path / "docker"
    config.mkdir()
    auth = base64.b64encode(b"ci:s3cr3t-pw").decode()
    (config / "config.json").write_text(json.dumps({"auths": {auth_registry: {"auth": auth}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    do_push(f"{auth_registry}/secure/docker-config")
    assert list_tags(f"{auth_registry}/secure/docker-config") == ["1.0.0", "latest"]


def test_wrong_password_is_an_environment_error(auth_registry, no_credentials, monkeypatch):
    monkeypatch.setenv("EKSINF_REGISTRY_USERNAME", "ci")
    monkeypatch.setenv("EKSINF_REGISTRY_PASSWORD", "wrong")
    with pytest.raises(EksinfError) as err:
        list_tags(f"{auth_registry}/secure/env")
    assert err.value.exit_code == ENVIRONMENT and "refused" in err.value.message


def test_cli_version_tag_is_immutable(eksinf, stack_dir, registry):
    base = f"{registry}/cli/immutable"
    args = ("push", "--registry", base, "-c", "gpu-runtime", "--version", "1.0.0", "--json")
    first = eksinf(*args, cwd=stack_dir)
    assert first.code == 0, first.err
    unit = sorted((stack_dir / "configs" / "gpu-runtime").glob("*.yaml"))[0]
    unit.write_text(unit.read_text() + "# a change\n")
    second = eksinf(*args, cwd=stack_dir)
    assert second.code == FAILURE
    assert f"{base}/gpu-runtime:1.0.0 already holds different content" in second.err
    assert json.loads(second.out)["exit"] == FAILURE  # --json: one error object on stdout
    latest = pull(f"{base}/gpu-runtime")
    assert latest.manifest_digest == json.loads(first.out)["pushed"][0]["manifestDigest"]


# ---- a registry that answers what docker-registry never would -----
# The real docker-registry cannot be made to send oversized, trickling or malformed answers, or a
# plain-HTTP token realm on another host: `Hostile` is a stand-in HTTP server on 127.0.0.1 that
# answers each path as a test says, in the distribution API's shape, and records what it was sent.

LAYER_DIGEST = oci_digest(BLOB)


def manifest_with(**layer_fields) -> bytes:
    layer = {"mediaType": LAYER_MEDIA_TYPE, "digest": LAYER_DIGEST, "size": len(BLOB)}
    layer.update(layer_fields)
    return json.dumps({"schemaVersion": 2, "layers": [layer]}).encode()


class Hostile:
    def __init__(self) -> None:
        import contextlib
        import http.server
        import threading

        self.routes: dict[str, object] = {}
        self.seen: list[tuple[str, dict[str, str]]] = []
        hostile = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                hostile.seen.append((path, dict(self.headers)))
                answer = hostile.routes.get(path, (404, {}, b"{}"))
                if callable(answer):
                    answer(self)
                    return
                status, headers, body = answer
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                if "Content-Length" not in headers and headers.get("close") != "1":
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client stops reading where it must
                    self.wfile.write(body)

            do_HEAD = do_GET

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address) -> None:
                pass  # a client that hung up: what these tests cause on purpose

        self.server = Server(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hostile(no_credentials):
    server = Hostile()
    yield server
    server.close()


@pytest.fixture
def untouched(stack_dir, tmp_path):
    """The stack (with its hub and cache folders, if any) and a decoy folder, byte-compared
    after the test; the --out folder must never appear."""
    from safety import fingerprint

    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "keep.yaml").write_text("mine: 1\n")
    before = fingerprint(stack_dir, decoy)
    yield tmp_path / "out"
    assert fingerprint(stack_dir, decoy) == before
    assert not (tmp_path / "out").exists()


def one_line_error(result, code: int) -> str:
    """The CLI failed with `code`, with one `eksinf:` line (plus at most a hint), no traceback."""
    assert result.code == code, (result.code, result.err)
    assert "Traceback" not in result.err + result.out
    lines = [line for line in result.err.splitlines() if not line.startswith("  hint: ")]
    assert len(lines) == 1 and lines[0].startswith("eksinf: "), result.err
    return lines[0]


def test_a_plain_http_token_realm_on_another_host_gets_no_credentials(
    eksinf, hostile, monkeypatch, stack_dir, untouched
):
    monkeypatch.setenv("EKSINF_REGISTRY_USERNAME", "ci")
    monkeypatch.setenv("EKSINF_REGISTRY_PASSWORD", "s3cr3t")
    challenge = {"WWW-Authenticate": 'Bearer realm="http://auth.example.invalid/token",service="r"'}
    hostile.routes["/v2/x/tags/list"] = (401, challenge, b"{}")
    line = one_line_error(eksinf("tags", f"{hostile.host}/x", cwd=stack_dir), ENVIRONMENT)
    assert "http://auth.example.invalid/token: plain HTTP to another machine" in line
    assert all("Authorization" not in headers for _, headers in hostile.seen)


def test_a_loopback_token_realm_is_used(eksinf, hostile, monkeypatch, stack_dir):
    monkeypatch.setenv("EKSINF_REGISTRY_USERNAME", "ci")
    monkeypatch.setenv("EKSINF_REGISTRY_PASSWORD", "s3cr3t")

    def tags(handler) -> None:
        ok = handler.headers.get("Authorization") == "Bearer t0k"
        body = b'{"tags": ["b", "a"]}' if ok else b"{}"
        handler.send_response(200 if ok else 401)
        realm = f'Bearer realm="http://{hostile.host}/token",service="r"'
        handler.send_header("WWW-Authenticate", realm)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    hostile.routes["/v2/x/tags/list"] = tags
    hostile.routes["/token"] = (200, {}, b'{"token": "t0k"}')
    result = eksinf("tags", f"{hostile.host}/x", "--json", cwd=stack_dir)
    assert result.code == 0, result.err
    assert json.loads(result.out)["tags"] == ["a", "b"]
    (token_headers,) = [h for path, h in hostile.seen if path == "/token"]
    assert token_headers["Authorization"] == "Basic " + base64.b64encode(b"ci:s3cr3t").decode()


@pytest.mark.parametrize("close_delimited", [False, True])
def test_a_manifest_over_4_mib_is_refused(eksinf, hostile, close_delimited, untouched):
    headers = {"close": "1"} if close_delimited else {}
    hostile.routes["/v2/x/manifests/latest"] = (200, headers, b" " * (4 * 1024 * 1024 + 1))
    line = one_line_error(eksinf("pull", f"{hostile.host}/x", "--out", str(untouched)), FAILURE)
    assert f"manifest {hostile.host}/x:latest is larger than 4194304 bytes" in line


@pytest.mark.parametrize(
    ("blob", "why"),
    [
        (BLOB + b"x" * 100_000, f"is larger than {len(BLOB)} bytes"),
        (BLOB[:-1], "does not match its digest"),
        (bytes(len(BLOB)), "does not match its digest"),
    ],
)
def test_a_blob_is_read_only_up_to_its_declared_size(eksinf, hostile, blob, why, untouched):
    hostile.routes["/v2/x/manifests/latest"] = (200, {}, manifest_with())
    hostile.routes[f"/v2/x/blobs/{LAYER_DIGEST}"] = (200, {"close": "1"}, blob)
    line = one_line_error(eksinf("pull", f"{hostile.host}/x", "--out", str(untouched)), FAILURE)
    assert why in line


def test_a_trickling_registry_meets_the_deadline(eksinf, hostile, monkeypatch, untouched):
    import time as clock

    monkeypatch.setattr("eksinf.publish.registry.DEADLINE", 1.0)

    def trickle(handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        for _ in range(40):  # 8 s at most, whatever the client does
            try:
                handler.wfile.write(b" ")
                handler.wfile.flush()
            except OSError:
                return
            clock.sleep(0.2)

    hostile.routes["/v2/x/manifests/latest"] = trickle
    line = one_line_error(eksinf("pull", f"{hostile.host}/x", "--out", str(untouched)), ENVIRONMENT)
    assert "no answer within the 1 s deadline" in line


@pytest.mark.parametrize(
    ("manifest", "why"),
    [
        (b"<html>", "manifest is not JSON"),
        (b"[1, 2]", "manifest is a JSON list, not an object"),
        (json.dumps({"layers": "x"}).encode(), "expected exactly one layer, found none"),
        (json.dumps({"layers": ["x"]}).encode(), "the layer is a JSON str"),
        (manifest_with(digest=5), "layer digest 5 is not sha256:<64 hex>"),
        (manifest_with(digest="sha256:../../etc/passwd"), "is not sha256:<64 hex>"),
        (manifest_with(size="big"), "layer size 'big' is not a whole number"),
        (manifest_with(size=True), "layer size True is not a whole number"),
        (manifest_with(size=1e300), "is not a whole number"),
        (manifest_with(size=-1), "layer size -1"),
        (manifest_with(annotations=[]), "layer annotations are not a map"),
        (
            json.dumps(
                {"layers": json.loads(manifest_with())["layers"], "annotations": [1]}
            ).encode(),
            "manifest annotations are not a map of strings",
        ),
    ],
)
def test_malformed_manifests_are_one_line_errors(eksinf, hostile, manifest, why, untouched):
    hostile.routes["/v2/x/manifests/latest"] = (200, {}, manifest)
    hostile.routes[f"/v2/x/blobs/{LAYER_DIGEST}"] = (200, {}, BLOB)
    line = one_line_error(eksinf("pull", f"{hostile.host}/x", "--out", str(untouched)), FAILURE)
    assert why in line
    assert not [path for path, _ in hostile.seen if "/blobs/" in path]  # refused before


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"<html>not json</html>", "is not JSON"),
        (b'{"tags": [1, 2]}', 'is not {"tags": [strings]}'),
        (b'{"tags": "latest"}', 'is not {"tags": [strings]}'),
        (b"[]", 'is not {"tags": [strings]}'),
    ],
)
def test_malformed_tag_lists_are_one_line_errors(eksinf, hostile, body, why, stack_dir, untouched):
    hostile.routes["/v2/x/tags/list"] = (200, {}, body)
    line = one_line_error(eksinf("tags", f"{hostile.host}/x", cwd=stack_dir), FAILURE)
    assert why in line
    as_json = eksinf("tags", f"{hostile.host}/x", "--json", cwd=stack_dir)
    assert json.loads(as_json.out)["exit"] == FAILURE and why in json.loads(as_json.out)["error"]


def test_a_registry_error_body_is_quoted_short_and_on_one_line(eksinf, hostile, stack_dir):
    hostile.routes["/v2/x/tags/list"] = (500, {"close": "1"}, b"boom\nline two " * 100_000)
    line = one_line_error(eksinf("tags", f"{hostile.host}/x", cwd=stack_dir), FAILURE)
    assert "HTTP 500 boom line two" in line and len(line) < 400


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "a JSON list, not an object"),
        ('{"auths": []}', "field auths is not an object"),
        ('{"auths": {"HOST": {"auth": "!!!"}}}', "auths.HOST.auth is not base64 of user:password"),
        ('{"auths": {"HOST": {"auth": "bm9jb2xvbg=="}}}', "auths.HOST.auth is not base64"),
        ('{"auths": {"HOST": {"username": 5}}}', "auths.HOST.username and .password must be"),
    ],
)
def test_a_malformed_docker_config_is_a_one_line_error(
    eksinf, hostile, monkeypatch, tmp_path, config, why, stack_dir, untouched
):
    folder = tmp_path / "docker"
    folder.mkdir()
    (folder / "config.json").write_text(config.replace("HOST", hostile.host))
    monkeypatch.setenv("DOCKER_CONFIG", str(folder))
    line = one_line_error(eksinf("tags", f"{hostile.host}/x", cwd=stack_dir), ENVIRONMENT)
    assert f"{folder / 'config.json'}: " in line and why.replace("HOST", hostile.host) in line
    assert hostile.seen == []  # refused before anything was sent


@pytest.mark.parametrize(
    "digest", ["sha256:../../../../etc/passwd", "sha256:" + "A" * 64, "md5:abc", 7, None]
)
def test_layout_digests_are_checked_before_any_path_is_built(
    eksinf, tmp_path, digest, stack_dir, untouched
):
    layout = tmp_path / "layout"
    do_push(f"oci-layout:{layout}")
    index = json.loads((layout / "index.json").read_text())
    for entry in index["manifests"]:
        entry["digest"] = digest
    (layout / "index.json").write_text(json.dumps(index))
    line = one_line_error(
        eksinf("pull", f"oci-layout:{layout}", "--out", str(untouched), cwd=stack_dir), FAILURE
    )
    assert f"digest {digest!r} is not sha256:<64 hex>" in line


def test_a_layout_manifest_naming_a_traversing_layer_is_refused(
    eksinf, tmp_path, stack_dir, untouched
):
    layout = tmp_path / "layout"
    do_push(f"oci-layout:{layout}")
    evil = manifest_with(digest="sha256:../../../../../../etc/passwd")
    (layout / "blobs" / "sha256" / oci_digest(evil).split(":")[1]).write_bytes(evil)
    index = json.loads((layout / "index.json").read_text())
    for entry in index["manifests"]:
        entry["digest"] = oci_digest(evil)
    (layout / "index.json").write_text(json.dumps(index))
    line = one_line_error(
        eksinf("pull", f"oci-layout:{layout}", "--out", str(untouched), cwd=stack_dir), FAILURE
    )
    assert "layer digest 'sha256:../../../../../../etc/passwd' is not sha256:<64 hex>" in line


# ---- Docker credential helpers (credHelpers, credsStore) ---------------------------------------
# A helper is any program `docker-credential-<name>` on PATH speaking the helpers' protocol; these
# are small real programs (a shell script each) standing in for ECR's, a keychain's or pass's.


def _helper(bin_dir: Path, name: str, body: str) -> Path:
    program = bin_dir / f"docker-credential-{name}"
    program.write_text("#!/bin/sh\n" + body)
    program.chmod(0o755)
    return program


@pytest.fixture
def helpers(tmp_path, no_credentials, monkeypatch):
    """A bin folder first on PATH, and a DOCKER_CONFIG to write; returns (bin, write_config)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    config = tmp_path / "docker"
    config.mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(config))

    def write_config(doc: dict) -> None:
        (config / "config.json").write_text(json.dumps(doc))

    return bin_dir, write_config


def _answers(user: str, secret: str, record: Path) -> str:
    """A helper body that records the server it was asked about and answers these credentials."""
    return (
        f'read server; printf %s "$server" > {record}; [ "$1" = get ] || exit 9\n'
        f'printf \'{{"ServerURL":"%s","Username":"{user}","Secret":"{secret}"}}\' "$server"\n'
    )


def test_a_credential_helper_for_the_host_is_asked_and_wins(auth_registry, helpers, tmp_path):
    bin_dir, write_config = helpers
    asked = tmp_path / "asked"
    _helper(bin_dir, "registry", _answers("ci", "s3cr3t-pw", asked))
    _helper(bin_dir, "store", _answers("ci", "wrong", tmp_path / "store-asked"))
    # credHelpers names the host's helper; it wins over credsStore and over a wrong auths entry
    bad = base64.b64encode(b"ci:wrong").decode()
    write_config(
        {
            "credHelpers": {auth_registry: "registry"},
            "credsStore": "store",
            "auths": {auth_registry: {"auth": bad}},
        }
    )
    do_push(f"{auth_registry}/secure/helper")
    assert list_tags(f"{auth_registry}/secure/helper") == ["1.0.0", "latest"]
    assert asked.read_text() == auth_registry  # the protocol: the server on stdin
    assert not (tmp_path / "store-asked").exists()


def test_the_default_store_is_asked_and_a_miss_falls_back_to_auths(
    auth_registry, helpers, tmp_path
):
    from eksinf.publish.registry_auth import registry_credentials

    bin_dir, write_config = helpers
    _helper(bin_dir, "store", _answers("ci", "s3cr3t-pw", tmp_path / "asked"))
    write_config({"credsStore": "store"})
    assert registry_credentials(auth_registry) == ("ci", "s3cr3t-pw")
    # a helper holding nothing for the server says so, as docker's helpers do: auths is next
    _helper(bin_dir, "empty", "echo 'credentials not found in native keychain'; exit 1\n")
    good = base64.b64encode(b"ci:from-auths").decode()
    write_config({"credsStore": "empty", "auths": {auth_registry: {"auth": good}}})
    assert registry_credentials(auth_registry) == ("ci", "from-auths")
    write_config({"credsStore": "empty"})
    assert registry_credentials(auth_registry) is None


@pytest.mark.parametrize(
    ("config", "body", "said"),
    [
        ({"credsStore": "absent"}, None, "docker-credential-absent, which is not on PATH"),
        ({"credsStore": "../../bin/sh"}, None, "is not a credential helper name"),
        ({"credHelpers": ["x"]}, None, "credHelpers is not an object"),
        ({"credsStore": "broken"}, "echo 'keychain locked' >&2; exit 1\n", "keychain locked"),
        ({"credsStore": "broken"}, "echo not-json\n", "did not print JSON"),
        ({"credsStore": "broken"}, "head -c 2000000 /dev/zero\n", "printed over"),
    ],
)
def test_a_helper_that_cannot_answer_is_an_environment_error(helpers, config, body, said):
    from eksinf.publish.registry_auth import registry_credentials

    bin_dir, write_config = helpers
    if body is not None:
        _helper(bin_dir, "broken", body)
    write_config(config)
    with pytest.raises(EksinfError) as err:
        registry_credentials("registry.example")
    assert err.value.exit_code == ENVIRONMENT and said in err.value.message
    assert "config.json" in err.value.message


def test_an_identity_token_is_refused_with_the_way_out(helpers, tmp_path):
    from eksinf.publish.registry_auth import registry_credentials

    bin_dir, write_config = helpers
    _helper(bin_dir, "oauth", _answers("<token>", "refresh-token", tmp_path / "asked"))
    write_config({"credsStore": "oauth"})
    with pytest.raises(EksinfError) as err:
        registry_credentials("registry.example")
    assert err.value.exit_code == ENVIRONMENT and "identity token" in err.value.message
    assert "EKSINF_REGISTRY_USERNAME" in err.value.hint
