"""The README's CI line and `make verify` on a fresh clone: an empty cache, no mirror in the
environment, no network. They pass only because every command that reads a pinned input (charts,
the pinned Argo CD and HyperPod manifests) honours the one mirror setting: `--chart-mirror`,
else $EKSINF_CHART_MIRROR, else `.eksinf/config.yaml`, else ../shared/charts beside the stack."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MIRROR, REPO, free_port

BIN = Path(sys.executable).parent  # the venv's eksinf sits beside its python


def fresh_clone(tmp_path: Path, stack_dir: Path) -> Path:
    """The stack copy beside a `shared` folder that is the offline mirror, as a clone sits."""
    (tmp_path / "shared").mkdir()
    for name in ("charts", "manifests", "tools"):
        (tmp_path / "shared" / name).symlink_to(MIRROR.parent / name)
    shutil.copy2(REPO / "Makefile", stack_dir / "Makefile")
    return stack_dir


def offline_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EKSINF_")}
    env["EKSINF_CACHE_DIR"] = str(tmp_path / "empty-cache")
    env["EKSINF_CACHE_KEY"] = str(tmp_path / "cache.key")
    # Any attempt to reach the network goes to a closed loopback port and fails at once.
    dead = f"http://127.0.0.1:{free_port()}"
    env.update(HTTP_PROXY=dead, HTTPS_PROXY=dead, http_proxy=dead, https_proxy=dead, NO_PROXY="")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def readme_ci_line() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    found = re.search(r"`(\.venv/bin/eksinf verify [^`]+)`", text)
    assert found, "README.md lost its CI line"
    return found.group(1)


def test_the_readme_ci_line_passes_offline_with_an_empty_cache(tmp_path, stack_dir):
    clone = fresh_clone(tmp_path, stack_dir)
    line = readme_ci_line().replace(".venv/bin/", "")  # the venv's eksinf, first on PATH
    done = subprocess.run(
        ["bash", "-c", line], cwd=clone, env=offline_env(tmp_path), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "lint: clean" in done.stderr
    assert (tmp_path / "empty-cache").is_dir()  # it really started empty and filled


def test_validate_without_any_mirror_names_the_settings(tmp_path, stack_dir):
    """A stack with no mirror anywhere (no option, no variable, no config.yaml, no ../shared
    beside it): exit 4, and the hint names the option and the config key."""
    done = subprocess.run(
        [str(BIN / "eksinf"), "validate"],
        cwd=stack_dir,
        env=offline_env(tmp_path),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 4, done.stderr
    assert "--chart-mirror" in done.stderr
    assert "mirror: DIR" in done.stderr


def test_a_clone_beside_shared_needs_no_mirror_option(tmp_path, stack_dir):
    """The default mirror is ../shared/charts beside the stack: the bare commands pass."""
    clone = fresh_clone(tmp_path, stack_dir)
    done = subprocess.run(
        ["bash", "-c", "eksinf validate && eksinf verify"],
        cwd=clone,
        env=offline_env(tmp_path),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "0 invalid" in done.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_stack_check_passes_offline_with_an_empty_cache(tmp_path, stack_dir):
    """`make verify`'s stack half (its code half needs the sources, not a stack): configs/
    against a fresh render, validate raw and on the real kube-apiserver (../shared/tools beside
    the mirror), lint, and the sandbox twice, the second changing nothing."""
    clone = fresh_clone(tmp_path, stack_dir)
    done = subprocess.run(
        ["make", "-s", "stack-check", f"EKSINF={BIN / 'eksinf'}"],
        cwd=clone,
        env=offline_env(tmp_path),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "0 invalid" in done.stderr
    assert "nothing changed" in done.stdout


def test_ci_run_is_setup_make_verify_and_the_tests():
    """One definition of the checks: .ci/run adds only the setup and the test suite to `make
    verify`, which is the code and stack checks; the hosted workflow runs .ci/run on pull
    requests."""
    import yaml

    run = [
        line
        for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith(("#", " ", "export", "shared=", "if ", "fi", "set ", "cd "))
    ]
    assert run == [
        "bash .ci/setup",
        "make verify",
        ".venv/bin/pytest -q   # the README's test command",
    ]
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert "\nverify: code-check stack-check\n" in makefile
    for step in (
        "$(RUFF) check .",
        "$(RUFF) format --check .",
        "$(MYPY)",
        "verify",
        "validate",
        "validate --server local",
        "lint",
        "sandbox up",
    ):
        assert f"\t$(EKSINF) {step}" in makefile or f"\t{step}" in makefile or step in makefile
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "ci.yml").read_text())
    assert "pull_request" in workflow[True]  # YAML 1.1 reads the key `on` as true
    steps = [s.get("run", "") for job in workflow["jobs"].values() for s in job["steps"]]
    assert "bash .ci/run" in steps
