"""A render's forked helper (build/parallel.py): what it gives equals a sequential render (units'
bytes, progress, cache entries), a helper that fails in any way leaves the outcome as it was,
and it is never forked once the Helm engine's library is loaded.

Each render runs in a fresh interpreter: pytest's own process has usually loaded the engine
already, and then no helper is forked (which the last tests check)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eksinf.build import parallel
from eksinf.errors import CONTRACT

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the helper is Linux only")

# Renders the stack at argv[1] with the mirror argv[2] in the way argv[3] names, and prints what
# came out as JSON: files, progress, whether a helper was forked (and if the engine was loaded
# then), whether its work was taken, the cache's entries, or the error.
DRIVER = r"""
import json, os, sys, time
from pathlib import Path
from eksinf.build import parallel, render
from eksinf.errors import EksinfError
from eksinf.model.stack import load_stack

stack_dir, mirror, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
seen = {"forks": [], "taken": []}
real_fork = os.fork

def fork():
    seen["forks"].append(parallel.engine_loaded())
    pid = real_fork()
    seen["pid"] = pid
    return pid

os.fork = fork
real_units = render._manifest_units

def manifest_units(stack, comp, fetched, done):
    seen["taken"].append(done is not None)
    return real_units(stack, comp, fetched, done)

render._manifest_units = manifest_units
if mode == "sequential":
    parallel.start = lambda *_args: None
elif mode == "raises":
    def work(*_args):
        raise RuntimeError("helper broke")
    parallel._work = work
elif mode == "garbage":
    parallel._encode = lambda _done: b"\x00\x00\x00\x00\x00\x00\x00\x05[1, 2"
elif mode == "short":
    real_send = parallel._send
    parallel._send = lambda fd, body: real_send(fd, body[: len(body) // 2]) or os._exit(0)
elif mode == "exits":
    real_send = parallel._send
    parallel._send = lambda fd, body: real_send(fd, body) or os._exit(3)
elif mode == "silent":
    parallel.DEADLINE = 0.5
    parallel._work = lambda *_args: time.sleep(30)
elif mode == "interrupted":
    parallel._work = lambda *_args: time.sleep(1000)
if os.environ.get("FAIL_CHARTS"):
    from eksinf.build import chartsplit

    def helm_units(*_args):
        if mode == "interrupted":
            raise KeyboardInterrupt
        raise EksinfError("the charts failed")

    chartsplit.helm_units = helm_units
progress = []
out = {"progress": progress, "seen": seen}
try:
    result = render.render_stack(load_stack(stack_dir), mirror, progress=progress.append)
    out["files"] = result.files()
except EksinfError as exc:
    out["error"] = [exc.message, exc.exit_code]
except KeyboardInterrupt:
    out["error"] = ["interrupted", 130]
if "pid" in seen:
    try:
        os.waitpid(seen.pop("pid"), os.WNOHANG)
        seen["reaped"] = False
    except ChildProcessError:
        seen["reaped"] = True
out["engine"] = parallel.engine_loaded()
cache = Path(os.environ["EKSINF_CACHE_DIR"])
out["cache"] = sorted(
    str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file() and not p.name.startswith(".")
)
print(json.dumps(out))
"""


def render_in(
    stack: Path, mirror: Path, mode: str, cache: Path, env: dict[str, str] | None = None
) -> dict:
    full = {**os.environ, "EKSINF_CACHE_DIR": str(cache), **(env or {})}
    full.pop("EKSINF_NO_CACHE", None)
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(stack), str(mirror), mode],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,  # a helper left running (never killed nor reaped) hangs it
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # the helper says nothing
    return json.loads(done.stdout)


@pytest.fixture
def sequential(stack_dir, chart_mirror, tmp_path):
    return render_in(stack_dir, chart_mirror, "sequential", tmp_path / "cache-sequential")


def test_the_helpers_render_equals_a_sequential_one(stack_dir, chart_mirror, tmp_path, sequential):
    forked = render_in(stack_dir, chart_mirror, "forked", tmp_path / "cache-forked")
    assert forked["seen"] == {"forks": [False], "taken": [True], "reaped": True}
    assert sequential["seen"] == {"forks": [], "taken": [False]}
    assert forked["engine"] and sequential["engine"]  # the engine was loaded, after the fork
    assert forked["files"] == sequential["files"]
    assert forked["progress"] == sequential["progress"]
    assert any("(manifest from mirror)" in line for line in forked["progress"])
    # the same cache entries: the parent wrote what the helper computed, and nothing else
    assert forked["cache"] == sequential["cache"]
    # warm (the manifest now in the cache): the same again
    again = render_in(stack_dir, chart_mirror, "forked", tmp_path / "cache-forked")
    assert again["files"] == sequential["files"]


@pytest.mark.parametrize("mode", ["raises", "garbage", "short", "exits", "silent", "dies"])
def test_a_failing_helper_leaves_the_render_as_it_was(
    stack_dir, chart_mirror, tmp_path, sequential, mode
):
    env = {"EKSINF_FAULT": parallel.CHILD_FAULT} if mode == "dies" else {}
    got = render_in(stack_dir, chart_mirror, mode, tmp_path / f"cache-{mode}", env)
    # forked, reaped, and its work done by the parent
    assert got["seen"] == {"forks": [False], "taken": [False], "reaped": True}
    assert got["files"] == sequential["files"]
    assert got["progress"] == sequential["progress"]
    assert got["cache"] == sequential["cache"]


@pytest.mark.parametrize("charts_fail", [False, True])
def test_the_first_failure_in_component_order_is_reported(
    stack_dir, chart_mirror, tmp_path, charts_fail
):
    """A manifest the helper cannot split (a stale exclude) fails as in a sequential render, and
    a failure of an earlier component (the charts of ack-controllers) still comes first."""
    components = stack_dir / "components.yaml"
    text = components.read_text()
    stale = text.replace(
        "exclude:\n",
        "exclude:\n          - object: ConfigMap/not-there\n"
        "            reason: the upstream manifest dropped it long ago\n",
        1,
    )
    assert stale != text
    components.write_text(stale)
    env = {"FAIL_CHARTS": "1"} if charts_fail else {}
    forked, sequential = (
        render_in(stack_dir, chart_mirror, mode, tmp_path / f"cache-{mode}", env)
        for mode in ("forked", "sequential")
    )
    assert forked["seen"]["forks"] == [False]
    assert forked["error"] == sequential["error"]
    assert forked["progress"] == sequential["progress"]
    assert forked["cache"] == sequential["cache"]
    message, code = forked["error"]
    if charts_fail:
        assert message == "the charts failed"
    else:
        assert "ConfigMap/not-there" in message
        assert code == CONTRACT


def test_an_interrupted_render_stops_and_reaps_its_helper(stack_dir, chart_mirror, tmp_path):
    """Ctrl-C while the helper still works (it would for 1000 s): it is killed and reaped."""
    env = {"FAIL_CHARTS": "1"}
    got = render_in(stack_dir, chart_mirror, "interrupted", tmp_path / "cache", env)
    assert got["error"] == ["interrupted", 130]
    assert got["seen"]["forks"] == [False]
    assert got["seen"]["reaped"] is True


def test_no_helper_once_the_engine_is_loaded(stack_dir, chart_mirror, monkeypatch):
    import helm_python  # noqa: F401 - loads the engine's native library

    from eksinf.model.stack import load_stack

    def no_fork():
        raise AssertionError("forked with the engine loaded")

    monkeypatch.setattr(os, "fork", no_fork)
    assert parallel.engine_loaded()
    stack = load_stack(stack_dir)
    manifest = [c for c in stack.components if c.render == "manifest"]
    assert manifest
    assert parallel.start(stack, manifest, chart_mirror) is None
