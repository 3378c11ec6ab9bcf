"""No half-done work: a `charts lock` that fails writes nothing, a sandbox
name is checked against every rule before anything is created, and `push` refuses a bundle that
`pull` would refuse. Through the CLI, with the stack, a decoy folder, the cache and the hub
fingerprinted before and after."""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
from pathlib import Path

import pytest
from safety import fingerprint

from eksinf.errors import CONTRACT, ENVIRONMENT, USAGE


@pytest.fixture
def world(stack_dir: Path, tmp_path: Path):
    """(stack, snapshot): snapshot fingerprints the stack (its hub in .eksinf/ included), a
    decoy folder and the cache."""
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "notes.txt").write_text("mine\n")
    cache = Path(os.environ["EKSINF_CACHE_DIR"])
    return stack_dir, lambda: fingerprint(stack_dir, decoy, cache)


def _repackaged(archive: bytes) -> bytes:
    """The same chart and version with one more file: a different archive `charts lock` pins."""
    out = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as src,
        tarfile.open(fileobj=out, mode="w:gz") as dst,
    ):
        for info in src.getmembers():
            dst.addfile(info, src.extractfile(info) if info.isfile() else None)
        extra = b"repackaged\n"
        info = tarfile.TarInfo("karpenter/EXTRA.txt")
        info.size = len(extra)
        dst.addfile(info, io.BytesIO(extra))
    return out.getvalue()


def test_a_charts_lock_that_fails_writes_nothing(
    world, eksinf, chart_mirror, tmp_path, monkeypatch
):
    """The charts pin (to a new archive), then an upstream manifest cannot be fetched: charts.lock
    keeps its old charts section too, rather than half of a new lock."""
    stack, snapshot = world
    mirror = tmp_path / "mirror" / "charts"
    shutil.copytree(chart_mirror, mirror)
    (mirror / "SHA256SUMS").unlink()
    archive = mirror / "karpenter-1.14.0.tgz"
    archive.write_bytes(_repackaged(archive.read_bytes()))
    (tmp_path / "mirror" / "manifests").mkdir()  # no manifest in the mirror: fetched by URL
    monkeypatch.delenv("EKSINF_MANIFEST_MIRROR", raising=False)
    for proxy in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.setenv(proxy, "http://127.0.0.1:9")  # nothing listens: offline, at once
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    before = snapshot()
    result = eksinf("charts", "lock", "--chart-mirror", str(mirror), cwd=stack)
    assert result.code == ENVIRONMENT, result.err
    assert "is unreachable" in result.err
    assert snapshot() == before  # charts.lock byte-identical: not even the charts section


LONG = "a" * 110  # `a...-mgmt-argo-apps` fits in 128 characters; `a...-workload-argo-apps` not


@pytest.mark.parametrize(
    ("args", "space"),
    [
        (["--name", LONG], f"{LONG}-workload-argo-apps"),
        (["--name", "dev", "--variant", "a" * 110], f"inference-workloads-{'a' * 110}"),
        (["--name", "dev\n"], "dev\n-mgmt"),
        (["--name", "dév"], "dév-mgmt"),
    ],
)
def test_a_sandbox_name_is_checked_before_anything_is_created(world, eksinf, args, space):
    stack, snapshot = world
    spaces = eksinf("hub", "spaces", "--json", cwd=stack)  # the hub exists, empty
    assert spaces.code == 0, spaces.err
    before = snapshot()
    result = eksinf("sandbox", "up", *args, cwd=stack)
    assert result.code == USAGE, result.err
    assert f"bad space name {space!r}" in result.err
    assert "would make space" in result.err
    assert snapshot() == before
    assert eksinf("hub", "spaces", "--json", cwd=stack).out == spaces.out


def test_push_refuses_a_bundle_pull_would_refuse(world, eksinf, tmp_path):
    """A component of more files than pull unpacks (configs/ may hold up to 20 000 entries; a
    bundle at most MAX_MEMBERS) bundled and pushed fine before, and no pull could read it."""
    from eksinf.publish.bundle import MAX_MEMBERS

    stack, snapshot = world
    folder = stack / "configs/aws-network"
    for i in range(MAX_MEMBERS + 1 - len(list(folder.iterdir()))):
        (folder / f"extra-{i:05}.yaml").write_text("")
    layout = tmp_path / "layout"
    # the stack and the decoy; the cache may keep the bundles' compressed bytes (derived data)
    cache = os.environ["EKSINF_CACHE_DIR"]

    def outside_cache() -> dict[str, str]:
        return {k: v for k, v in snapshot().items() if not k.startswith(cache)}

    before = outside_cache()
    for command in (["push", "--registry", f"oci-layout:{layout}"], ["bundle"]):
        result = eksinf(*command, "--json", cwd=stack)
        assert result.code == CONTRACT, result.err
        assert "bundle aws-network: `eksinf pull` would refuse it: bundle member" in result.err
        assert f"(too-many-members): more than {MAX_MEMBERS} entries" in result.err
        assert json.loads(result.out)["exit"] == CONTRACT
        assert outside_cache() == before
        assert not layout.exists()  # nothing pushed, no bundles/ written
