"""Honest outputs: line endings, chart archives, misspelt repositories, dry runs and
--json say what is true, through the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer
from safety import fingerprint

from eksinf.cli.app import whole_app
from eksinf.errors import CONTRACT, FAILURE
from eksinf.publish.bundle import bundle_bytes
from eksinf.publish.oci import push


@pytest.fixture(autouse=True)
def _mirror(chart_mirror: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EKSINF_CHART_MIRROR", str(chart_mirror))


def test_crlf_sources_are_normalised_and_verify_and_lint_agree(stack_dir, eksinf):
    source = stack_dir / "render/aws-network/network.yaml"
    committed = (stack_dir / "configs/aws-network/network.yaml").read_bytes()
    source.write_bytes(source.read_bytes().replace(b"\n", b"\r\n"))
    assert eksinf("render", cwd=stack_dir).code == 0
    assert (stack_dir / "configs/aws-network/network.yaml").read_bytes() == committed
    assert eksinf("verify", cwd=stack_dir).code == 0
    lint = eksinf("lint", cwd=stack_dir)
    assert lint.code == 0, lint.out


@pytest.fixture
def mirror(chart_mirror: Path, tmp_path: Path) -> Path:
    """A writable copy of the chart mirror, without its SHA256SUMS (a mirror need not publish
    one), so the archive checks themselves are what refuses a bad copy."""
    copy = tmp_path / "mirror"
    shutil.copytree(chart_mirror, copy)
    (copy / "SHA256SUMS").unlink()
    return copy


def test_charts_lock_refuses_a_truncated_archive(stack_dir, eksinf, mirror, tmp_path):
    archive = mirror / "karpenter-1.14.0.tgz"
    archive.write_bytes(archive.read_bytes()[:4000])
    before = fingerprint(stack_dir)
    result = eksinf("charts", "lock", "--chart-mirror", str(mirror), cwd=stack_dir)
    assert result.code == CONTRACT, result.err
    assert "chart archive karpenter-1.14.0.tgz from mirror: not a readable .tgz" in result.err
    assert fingerprint(stack_dir) == before  # charts.lock untouched


def test_a_mirror_that_publishes_sums_refuses_a_bad_copy_first(
    stack_dir, eksinf, chart_mirror, tmp_path
):
    copy = tmp_path / "summed"
    shutil.copytree(chart_mirror, copy)
    archive = copy / "karpenter-1.14.0.tgz"
    archive.write_bytes(archive.read_bytes()[:4000])
    before = fingerprint(stack_dir)
    result = eksinf("charts", "lock", "--chart-mirror", str(copy), cwd=stack_dir)
    assert result.code == CONTRACT, result.err
    assert "karpenter-1.14.0.tgz: sha256" in result.err
    assert "disagrees with the mirror's SHA256SUMS" in result.err
    assert fingerprint(stack_dir) == before


def test_charts_lock_refuses_an_archive_of_another_chart(stack_dir, eksinf, mirror):
    shutil.copy(mirror / "nvidia-device-plugin-0.19.3.tgz", mirror / "karpenter-1.14.0.tgz")
    before = fingerprint(stack_dir)
    result = eksinf("charts", "lock", "--chart-mirror", str(mirror), cwd=stack_dir)
    assert result.code == CONTRACT, result.err
    assert "its Chart.yaml says nvidia-device-plugin 0.19.3, not karpenter 1.14.0" in result.err
    assert fingerprint(stack_dir) == before


def test_a_misspelt_repository_is_an_error(eksinf, registry, tmp_path):
    layout = tmp_path / "layout" / "gpu-runtime"
    blob = bundle_bytes({"u.yaml": b"kind: A\n"})
    push(f"oci-layout:{layout}", blob, title="x.tar.gz", annotations={}, tags=["v1"])
    push(f"{registry}/safety/gpu-runtime", blob, title="x.tar.gz", annotations={}, tags=["v1"])
    assert eksinf("tags", f"oci-layout:{layout}").out.split() == ["v1"]
    for ref in (
        f"oci-layout:{tmp_path / 'layout' / 'gpu-runtim'}",
        f"{registry}/safety/gpu-runtim",
    ):
        result = eksinf("tags", ref)
        assert result.code == FAILURE and "no repository" in result.err, result.err
        assert result.out == ""
        as_json = eksinf("tags", ref, "--json")
        assert json.loads(as_json.out)["exit"] == FAILURE
    pulled = eksinf("pull", f"{registry}/safety/gpu-runtim:v1", "--out", str(tmp_path / "o"))
    assert pulled.code == FAILURE and "not found" in pulled.err
    assert not (tmp_path / "o").exists()


def test_hub_upload_dry_run_says_so_and_changes_nothing(stack_dir, eksinf, tmp_path):
    assert eksinf("install", cwd=stack_dir).code == 0
    before = fingerprint(stack_dir / ".eksinf")
    units = tmp_path / "units"
    units.mkdir()
    (units / "x.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n")
    result = eksinf("hub", "upload", "aws-network", str(units), "--dry-run", cwd=stack_dir)
    assert result.code == 0, result.err
    assert "would be uploaded (dry run)" in result.out and "uploaded:" not in result.out
    assert "(dry run; nothing changed)" in result.err
    assert fingerprint(stack_dir / ".eksinf") == before


def _json_commands() -> list[list[str]]:
    def walk(command, path):
        if getattr(command, "commands", None):
            for name, sub in sorted(command.commands.items()):
                yield from walk(sub, [*path, name])
        elif any("--json" in getattr(p, "opts", []) for p in command.params):
            yield path

    return list(walk(typer.main.get_command(whole_app()), []))


@pytest.mark.parametrize("command", _json_commands(), ids=" ".join)
def test_json_prints_one_object_even_on_failure(command, eksinf, tmp_path, monkeypatch):
    # outside any stack, without arguments or cloud: almost every command fails, and each must
    # still print exactly one JSON object on stdout
    monkeypatch.setenv("EKSINF_AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    result = eksinf(*command, "--json", cwd=tmp_path)
    body = json.loads(result.out)  # one document, nothing else
    assert isinstance(body, dict)
    if result.code != 0:  # eksinf's envelope, or a command's own report naming the error
        assert body["error"], body
        assert body.get("exit", result.code) == result.code
