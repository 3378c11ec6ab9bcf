"""Bounded YAML: a "billion laughs" alias bomb fed to each entry point is a clear error
naming the file, never a hang. Nothing here is timed: the bound is structural (yamlio counts the
expanded nodes over the composed graph before any walk), and each test asserts the error. With
the bound removed, these tests would not fail - they would spin in a placeholder walk until CI's
job timeout, which is the defect they guard against."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from safety import fingerprint

from eksinf.core.yamlio import MAX_DEPTH, MAX_NODES, load_docs, load_source
from eksinf.errors import CONTRACT, EksinfError
from eksinf.publish.bundle import bundle_bytes


def bomb(levels: int = 9) -> str:
    """A ConfigMap whose `data.a9` expands to 9**9 (~387 million) strings."""
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: lol, namespace: x}", "data:"]
    lines.append('  a0: &a0 "lol"')
    for i in range(1, levels + 1):
        lines.append(f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


BOMB_MESSAGE = f"expands to more than {MAX_NODES} YAML nodes"


@pytest.fixture(autouse=True)
def _mirror(chart_mirror: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EKSINF_CHART_MIRROR", str(chart_mirror))


def test_units_refuse_anchors_and_machine_yaml_expands_under_a_budget():
    with pytest.raises(EksinfError) as unit:
        load_source(Path("u.yaml"), "a: &x 1\nb: *x\n", label="render/c/u.yaml", aliases=False)
    assert unit.value.exit_code == CONTRACT
    assert "render/c/u.yaml:1:4: YAML anchor used by an alias" in unit.value.message
    assert "docs/flattening.md" in unit.value.hint
    assert load_docs("a: &x [1, 2]\nb: *x\n") == [{"a": [1, 2], "b": [1, 2]}]
    with pytest.raises(EksinfError, match=BOMB_MESSAGE):
        load_docs(bomb(), "bundle.yaml")
    with pytest.raises(EksinfError, match="refers to the node that contains it"):
        load_docs("a: &x [1, *x]\n")
    deep = "".join("  " * i + "k:\n" for i in range(MAX_DEPTH + 1)) + "  " * (MAX_DEPTH + 1) + "v\n"
    with pytest.raises(EksinfError, match=f"nested deeper than {MAX_DEPTH} levels"):
        load_docs(deep)


def test_render_refuses_a_bomb_in_a_handwritten_unit(stack_dir, eksinf, tmp_path):
    (stack_dir / "render/aws-network/lol.yaml").write_text(bomb())
    before = fingerprint(tmp_path)
    result = eksinf("render", cwd=stack_dir)
    assert result.code == CONTRACT
    assert "render/aws-network/lol.yaml:5:7: YAML anchor used by an alias" in result.err
    assert fingerprint(tmp_path) == before


@pytest.mark.parametrize(
    "command",
    [
        ("lint",),
        ("links", "resolve", "--profile", "render/platform-profile/profile.yaml", "--out", "OUT"),
        ("sandbox", "up"),
        ("bundle",),
    ],
)
def test_a_bomb_in_configs_is_refused(stack_dir, eksinf, tmp_path, command):
    (stack_dir / "configs/aws-network/lol.yaml").write_text(bomb())
    args = [a.replace("OUT", str(tmp_path / "out")) for a in command]
    result = eksinf(*args, cwd=stack_dir)
    assert result.code == CONTRACT, result.err
    # sandbox up names it inside the bundle it built from configs/aws-network
    assert "lol.yaml" in result.out + result.err
    assert BOMB_MESSAGE in result.out + result.err


def test_hub_upload_refuses_a_bomb(stack_dir, eksinf, tmp_path):
    units = tmp_path / "units"
    units.mkdir()
    (units / "lol.yaml").write_text(bomb())
    for source in (units, tmp_path / "lol.tar.gz"):
        (tmp_path / "lol.tar.gz").write_bytes(bundle_bytes({"lol.yaml": bomb().encode()}))
        result = eksinf("hub", "upload", "aws-network", str(source), cwd=stack_dir)
        assert result.code == CONTRACT, result.err
        assert "lol.yaml" in result.err and BOMB_MESSAGE in result.err


def test_install_from_a_bundle_folder_refuses_a_bomb(stack_dir, eksinf, tmp_path):
    bundles = tmp_path / "bundles"
    assert eksinf("bundle", "--out", str(bundles), cwd=stack_dir).code == 0
    (bundles / "aws-network.tar.gz").write_bytes(bundle_bytes({"lol.yaml": bomb().encode()}))
    shutil.rmtree(stack_dir / ".eksinf", ignore_errors=True)
    result = eksinf("install", "--from", str(bundles), cwd=stack_dir)
    assert result.code == CONTRACT, result.err
    assert "lol.yaml" in result.err and BOMB_MESSAGE in result.err


def test_cub_output_nested_too_deep_is_an_environment_error(tmp_path):
    # cub's JSON is parsed by the stdlib, whose recursion ends in RecursionError: the runner
    # stands in for the cub process (only its output matters here)
    from eksinf.errors import ENVIRONMENT
    from eksinf.hub.cub import CubHub, CubResult

    deep = "[" * 100_000 + "]" * 100_000
    hub = CubHub(tmp_path, runner=lambda _args, _stdin: CubResult(0, deep, ""))
    with pytest.raises(EksinfError) as err:
        hub.get_space("x")
    assert err.value.exit_code == ENVIRONMENT and "output is not JSON" in err.value.message
