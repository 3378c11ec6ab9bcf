"""Inputs stay inside the stack: a link anywhere in render/ or configs/, a linked
component folder, or a values path leaving its component folder is exit 3 naming the file and
where it points; the outside file never reaches configs/, a bundle, the hub or the output."""

from __future__ import annotations

from pathlib import Path

import pytest
from safety import fingerprint

from eksinf.errors import CONTRACT

SECRET = "aws_secret_access_key: AKIAOUTSIDE-SECRET\n"


@pytest.fixture(autouse=True)
def _mirror(chart_mirror: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EKSINF_CHART_MIRROR", str(chart_mirror))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A decoy folder beside the stack holding a 'credentials' YAML file."""
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "creds.yaml").write_text(f"apiVersion: v1\nkind: ConfigMap\n# {SECRET}")
    return decoy


def assert_refused(result, *needles: str) -> None:
    assert result.code == CONTRACT, (result.code, result.err)
    for needle in needles:  # lint reports it as a finding on stdout, the others on stderr
        assert needle in result.out + result.err, result.err
    assert "AKIAOUTSIDE" not in result.out + result.err


@pytest.mark.parametrize("command", [("render",), ("verify",), ("lint",), ("guard",)])
def test_a_linked_unit_in_render_is_refused(stack_dir, outside, eksinf, tmp_path, command):
    link = stack_dir / "render/aws-network/stolen.yaml"
    link.symlink_to(outside / "creds.yaml")
    before = fingerprint(tmp_path)
    result = eksinf(*command, cwd=stack_dir)
    assert_refused(result, "render/aws-network/stolen.yaml: is a symbolic link", str(outside))
    assert fingerprint(tmp_path) == before


def test_a_linked_component_folder_is_refused(stack_dir, outside, eksinf, tmp_path):
    real = stack_dir / "render/aws-network"
    real.rename(outside / "aws-network")
    (stack_dir / "render/aws-network").symlink_to(outside / "aws-network")
    before = fingerprint(tmp_path)
    result = eksinf("render", cwd=stack_dir)
    assert_refused(result, "render/aws-network: is a symbolic link")
    assert fingerprint(tmp_path) == before


def test_a_linked_values_file_is_refused(stack_dir, outside, eksinf, tmp_path):
    values = stack_dir / "render/gpu-runtime/values/nvidia-device-plugin.yaml"
    values.unlink()
    values.symlink_to(outside / "creds.yaml")
    before = fingerprint(tmp_path)
    result = eksinf("render", cwd=stack_dir)
    assert_refused(
        result, "render/gpu-runtime/values/nvidia-device-plugin.yaml: is a symbolic link"
    )
    assert fingerprint(tmp_path) == before


def test_a_values_path_leaving_its_component_folder_is_refused(stack_dir, eksinf, tmp_path):
    components = stack_dir / "components.yaml"
    text = components.read_text()
    assert "values: [values/nvidia-device-plugin.yaml]" in text
    components.write_text(
        text.replace(
            "values: [values/nvidia-device-plugin.yaml]", "values: [../../../../etc/passwd]"
        )
    )
    before = fingerprint(tmp_path)
    result = eksinf("render", cwd=stack_dir)
    assert_refused(result, "values file resolves outside render/gpu-runtime/", "/etc/passwd")
    assert "root:" not in result.err
    assert fingerprint(tmp_path) == before


@pytest.mark.parametrize(
    "command", [("verify",), ("lint",), ("bundle",), ("links", "resolve", "--out", "OUT")]
)
def test_a_link_in_configs_is_refused(stack_dir, outside, eksinf, tmp_path, command):
    link = stack_dir / "configs/aws-network/stolen.yaml"
    link.symlink_to(outside / "creds.yaml")
    args = [a.replace("OUT", str(tmp_path / "out")) for a in command]
    if command[0] == "links":
        args += ["--profile", "render/platform-profile/profile.yaml"]
    before = fingerprint(tmp_path)
    result = eksinf(*args, cwd=stack_dir)
    # verify's diff would otherwise print the outside file into the CI log
    assert_refused(result, "configs/aws-network/stolen.yaml: is a symbolic link", str(outside))
    assert fingerprint(tmp_path) == before


def test_a_linked_configs_folder_is_refused(stack_dir, outside, eksinf, tmp_path):
    (outside / "aws-network").mkdir()
    (outside / "aws-network" / "creds.yaml").write_text(SECRET)
    real = stack_dir / "configs/aws-network"
    for unit in real.iterdir():
        unit.rename(outside / "aws-network" / unit.name)
    real.rmdir()
    real.symlink_to(outside / "aws-network")
    before = fingerprint(tmp_path)
    result = eksinf("bundle", "-c", "aws-network", cwd=stack_dir)
    assert_refused(result, "configs/aws-network: is a symbolic link")
    assert fingerprint(tmp_path) == before


def test_hub_upload_refuses_a_link_in_the_unit_folder(stack_dir, outside, eksinf, tmp_path):
    units = tmp_path / "units"
    units.mkdir()
    (units / "ok.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n")
    (units / "stolen.yaml").symlink_to(outside / "creds.yaml")
    before = fingerprint(units, outside)
    result = eksinf("hub", "upload", "aws-network", str(units), cwd=stack_dir)
    assert_refused(result, "stolen.yaml: is a symbolic link")
    assert fingerprint(units, outside) == before
