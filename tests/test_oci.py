"""OCI push/pull against a real docker-registry on 127.0.0.1 and an OCI image-layout directory."""

from __future__ import annotations

import json
import socket

import pytest
import requests

from eksinf.bundle import bundle_bytes
from eksinf.errors import ENVIRONMENT, FAILURE, USAGE, EksinfError
from eksinf.oci import (
    ARTIFACT_TYPE,
    EMPTY_MEDIA_TYPE,
    LAYER_MEDIA_TYPE,
    Ref,
    digest_of,
    list_tags,
    parse_ref,
    pull,
    push,
)


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
    assert result.layer_digest == digest_of(BLOB)
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
    host = f"127.0.0.1:{unused_port()}"  # nothing listens here
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
    from eksinf.oci import registry_credentials

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
