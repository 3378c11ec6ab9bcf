"""The local control plane is a real kube-apiserver: it serves, authenticates and authorizes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import requests

from eksinf.errors import ENVIRONMENT, EksinfError
from eksinf.kube import localplane


def _get(plane: localplane.LocalPlane, path: str, token: str) -> int:
    resp = requests.get(
        plane.server + path,
        headers={"Authorization": f"Bearer {token}"},
        verify=str(plane.ca_file),
        timeout=10,
    )
    return resp.status_code


def test_the_plane_authenticates_and_authorizes_as_a_cluster(kube_plane) -> None:
    assert _get(kube_plane, "/version", kube_plane.admin_token) == 200
    assert _get(kube_plane, "/api/v1/namespaces", kube_plane.admin_token) == 200
    assert _get(kube_plane, "/api/v1/namespaces", kube_plane.no_rights_token) == 403
    assert _get(kube_plane, "/api/v1/namespaces", "not-a-known-token") == 401


def test_a_tampered_tool_mirror_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(localplane.APISERVER_ENV, raising=False)
    mirror = tmp_path / "tools"
    mirror.mkdir()
    (mirror / localplane.APISERVER_ARCHIVE).write_bytes(b"not the server")
    (mirror / "SHA256SUMS").write_text(f"{'0' * 64}  {localplane.APISERVER_ARCHIVE}\n")
    with pytest.raises(EksinfError) as caught:
        localplane.apiserver_binary(mirror)
    assert caught.value.exit_code == ENVIRONMENT
    assert "SHA256SUMS" in caught.value.message
    assert not (tmp_path / "cache" / "tools").exists()


def test_a_tampered_cached_binary_is_never_run(tmp_path: Path, monkeypatch) -> None:
    """The unpacked binary is code kept in the cache: a replaced one is unpacked again."""
    mirror = Path(__file__).resolve().parents[2] / "shared" / "tools"
    if not (mirror / localplane.APISERVER_ARCHIVE).is_file():
        pytest.skip(f"no tool mirror at {mirror}")
    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(localplane.APISERVER_ENV, raising=False)
    first = localplane.apiserver_binary(mirror)
    first.write_bytes(b"#!/bin/sh\necho owned\n")
    again = localplane.apiserver_binary(mirror)
    assert localplane._sha256_file(again) == localplane.APISERVER_SHA256
    shutil.rmtree(tmp_path / "cache")
