"""Diff benchmark: `eksinf diff` between two commits of this repository, with and without a stale
base that must be rendered, against the floor of the work it cannot avoid.

    EKSINF_CHART_MIRROR=../shared/charts .venv/bin/python bench/diff.py [-n RUNS]

In a scratch clone (removed afterwards) of this repository's HEAD, two base commits are made:
- fresh: the h200 NodePool limit raised in render/ and re-rendered into configs/;
- stale: vLLM's replicas changed in render/ only, so its committed configs/ is stale and
  `eksinf diff` renders it in a temporary worktree.
The working tree is HEAD. Each figure is the median of N runs of the `eksinf diff` command in a
new process (the target: under 3 s with a stale base, on this 2-core machine). The floors, in
process and without the derived-data cache: parsing both sides' configs/ (what any structural
diff must read) and rendering the stack (what a stale base must do). Ratios are command / floor.
Once, also: a stale base with an empty cache folder, and with the cache turned off.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eksinf.build.render import render_stack
from eksinf.core.cache import NO_CACHE_ENV
from eksinf.core.yamlio import load_docs
from eksinf.model.stack import load_stack

REPO = Path(__file__).resolve().parent.parent


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@example.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    }
    return subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if old not in text:
        raise SystemExit(f"bench: {old!r} not found in {path}")
    path.write_text(text.replace(old, new, 1))


def parse_configs(root: Path) -> int:
    return sum(len(load_docs(p.read_text())) for p in sorted((root / "configs").rglob("*.yaml")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5)
    args = parser.parse_args()
    exe = Path(sys.executable).with_name("eksinf")
    scratch = Path(tempfile.mkdtemp(prefix="eksinf-bench-diff-"))
    try:
        clone = scratch / "repo"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        head = git(clone, "rev-parse", "HEAD")
        pools = clone / "render/karpenter/nodepools.yaml"
        edit(pools, 'nvidia.com/gpu: "8"', 'nvidia.com/gpu: "16"')
        subprocess.run([str(exe), "--stack", str(clone), "render"], check=True, capture_output=True)
        git(clone, "commit", "-q", "-am", "bench: fresh base")
        fresh = git(clone, "rev-parse", "HEAD")
        git(clone, "checkout", "-q", head)
        edit(clone / "render/inference-workloads/vllm.yaml", "replicas: 0", "replicas: 1")
        git(clone, "commit", "-q", "-am", "bench: stale base")
        stale = git(clone, "rev-parse", "HEAD")
        git(clone, "checkout", "-q", head)

        def diff(base: str, **env: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [str(exe), "--stack", str(clone), "diff", base, "--json"],
                check=True,
                capture_output=True,
                text=True,
                env={**os.environ, **env},
            )

        # cold: an empty cache folder, so charts come from the mirror, every chart not proven
        # deterministic is rendered twice (the determinism check) and no parse or serialisation
        # is cached
        cold = timed(lambda: diff(stale, EKSINF_CACHE_DIR=str(scratch / "cold-cache")))
        uncached = timed(lambda: diff(stale, **{NO_CACHE_ENV: "1"}))
        walls: dict[str, list[float]] = {"fresh": [], "stale": []}
        floor_parse, floor_render = [], []
        stack = load_stack(clone)
        for _ in range(args.n):
            walls["fresh"].append(timed(lambda: diff(fresh)))
            walls["stale"].append(timed(lambda: diff(stale)))
            # the floors are the work itself: no derived-data cache
            os.environ[NO_CACHE_ENV] = "1"
            floor_parse.append(timed(lambda: parse_configs(clone) + parse_configs(clone)))
            floor_render.append(timed(lambda: render_stack(stack)))
            del os.environ[NO_CACHE_ENV]
        rendered = {
            k: json.loads(diff(b).stdout)["base"].endswith("(rendered)")
            for k, b in (("fresh", fresh), ("stale", stale))
        }
        if rendered != {"fresh": False, "stale": True}:
            print("bench: the fresh base was rendered or the stale one was not", file=sys.stderr)
            return 1
        if (clone / ".eksinf" / "diff").exists():
            print("bench: the temporary worktree folder was left behind", file=sys.stderr)
            return 1
        fw, sw = statistics.median(walls["fresh"]), statistics.median(walls["stale"])
        fp, fr = statistics.median(floor_parse), statistics.median(floor_render)
        print(f"floor: parse both configs/      {fp * 1000:.0f} ms (in process)")
        print(f"floor: render the stack         {fr * 1000:.0f} ms (in process, warm)")
        print(
            f"eksinf diff, fresh base         {fw:.2f} s wall (ratio to parse floor {fw / fp:.1f})"
        )
        print(
            f"eksinf diff, stale base         {sw:.2f} s wall (ratio to parse+render floor "
            f"{sw / (fp + fr):.1f}); target < 3 s: {'met' if sw < 3 else 'NOT MET'}"
        )
        print(f"eksinf diff, stale base, cold   {cold:.2f} s wall (empty cache folder)")
        print(f"eksinf diff, stale, no cache    {uncached:.2f} s wall ({NO_CACHE_ENV}=1)")
        load = os.getloadavg()[0]
        print(f"medians of {args.n}, new process each; load average {load:.2f}")
    finally:
        shutil.rmtree(scratch)  # made above by mkdtemp: ours alone
    return 0


if __name__ == "__main__":
    sys.exit(main())
