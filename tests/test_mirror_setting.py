"""The one mirror setting, read from one place for every command that reads a pinned input:
--chart-mirror > $EKSINF_CHART_MIRROR > `mirror:` in `<stack>/.eksinf/config.yaml` > the
`../shared/charts` folder beside the stack."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import MIRROR
from test_readme_ci import BIN, offline_env

from eksinf.build import charts, manifests
from eksinf.errors import EksinfError
from eksinf.model import config


def _write_config(root: Path, text: str) -> None:
    (root / ".eksinf").mkdir(exist_ok=True)
    (root / ".eksinf" / "config.yaml").write_text(text, encoding="utf-8")


@pytest.fixture
def no_env_mirror(monkeypatch):
    for name in (charts.MIRROR_ENV, manifests.MIRROR_ENV):
        monkeypatch.delenv(name, raising=False)
    charts.use_mirror(None)
    config.use_stack_root(None)
    yield
    charts.use_mirror(None)
    config.use_stack_root(None)


def test_precedence_flag_env_config_default(tmp_path, monkeypatch, no_env_mirror):
    stack = tmp_path / "repo"
    stack.mkdir()
    assert charts.mirror_dir(None, stack) is None  # nothing anywhere
    beside = tmp_path / "shared" / "charts"
    beside.mkdir(parents=True)
    assert charts.mirror_dir(None, stack) == stack / ".." / "shared" / "charts"
    _write_config(stack, "mirror: ../elsewhere/charts\n")
    assert charts.mirror_dir(None, stack) == stack / "../elsewhere/charts"
    assert manifests.mirror_dir(None, stack) == stack / "../elsewhere/manifests"
    monkeypatch.setenv(charts.MIRROR_ENV, "/from/env")
    assert charts.mirror_dir(None, stack) == Path("/from/env")
    charts.use_mirror(Path("/from/flag"))  # what parsing --chart-mirror does
    assert charts.mirror_dir(None, stack) == Path("/from/flag")


def test_the_tool_mirror_sits_beside_the_chart_mirror(tmp_path, monkeypatch, no_env_mirror):
    """The real kube-apiserver's archive (`validate --server local`) comes from tools/ beside
    the one mirror, whichever way it was set."""
    from eksinf.kube import localplane

    monkeypatch.delenv(localplane.TOOL_MIRROR_ENV, raising=False)
    assert localplane.tool_mirror() is None
    _write_config(tmp_path, "mirror: offline/charts\n")
    config.use_stack_root(tmp_path)
    assert localplane.tool_mirror() == tmp_path / "offline" / "tools"


def test_the_run_stack_is_the_fallback_root(tmp_path, no_env_mirror):
    _write_config(tmp_path, "mirror: /abs/charts\n")
    assert charts.mirror_dir() is None
    config.use_stack_root(tmp_path)
    assert charts.mirror_dir() == Path("/abs/charts")


@pytest.mark.parametrize(
    ("text", "needle"),
    [("mirrors: x\n", "unknown key(s) mirrors"), ("mirror: 3\n", "mirror is 3")],
)
def test_a_bad_config_is_refused_by_name(tmp_path, text, needle):
    _write_config(tmp_path, text)
    with pytest.raises(EksinfError) as caught:
        config.stack_mirror(tmp_path)
    assert needle in caught.value.message
    assert caught.value.exit_code == 3


def test_validate_reads_the_mirror_from_config_yaml(tmp_path, stack_dir):
    """No option, no variable, no ../shared beside the stack: only the config file names the
    mirror (relative to the stack), and validate (charts and pinned CRD manifests) passes."""
    link = tmp_path / "offline"
    link.mkdir()
    for name in ("charts", "manifests"):
        (link / name).symlink_to(MIRROR.parent / name)
    _write_config(stack_dir, "mirror: ../offline/charts\n")
    done = subprocess.run(
        [str(BIN / "eksinf"), "validate"],
        cwd=stack_dir,
        env=offline_env(tmp_path),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "0 invalid" in done.stderr


def test_a_hub_path_that_is_not_a_path_is_named_not_a_crash(eksinf, stack_dir):
    """The config file's other keys are read as strictly: `hub_path: 5` names the file and key."""
    (stack_dir / ".eksinf").mkdir(exist_ok=True)
    (stack_dir / ".eksinf" / "config.yaml").write_text("hub_path: 5\n")
    result = eksinf("hub", "spaces", cwd=stack_dir)
    assert result.code == 3, result.err
    assert "config.yaml: hub_path is 5, not a file path" in result.err
    (stack_dir / ".eksinf" / "config.yaml").write_text("hub_path: other.db\n")
    assert eksinf("hub", "spaces", cwd=stack_dir).code == 0
