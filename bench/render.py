"""Render benchmark: eksinf's render + guard + write against the bare Helm engine.

    .venv/bin/python bench/render.py [--stack DIR] [--chart-mirror DIR] [-n RUNS]

Both sides render the same charts with the same values and options in the same process:
- floor: the bare engine (helm-python-sdk), per chart load the archive, render it at the pinned
  kube-version and read its CRDs: what `helm template --include-crds` does;
- eksinf: `render_stack` (values, render, split, waves, conservation, determinism check) plus
  the guard and the atomic write of a whole configs/ tree into a temp dir.
Runs alternate; each figure is the median of N. The ratio is eksinf / floor (target <= 1.5).
"warm" has the chart cache and the determinism records of earlier runs; "cold" starts from an
empty cache (archives read from the mirror, every chart not proven deterministic from its
templates rendered twice for the determinism check).
Last, the wall time of the full `eksinf verify` command (a new process each run; target < 2 s).
Charts come from the chart cache, warmed first, so no run measures a download.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eksinf.build import guard
from eksinf.build.charts import read_lock, resolve
from eksinf.build.chartsplit import chart_values
from eksinf.build.render import render_stack
from eksinf.build.write import write_configs
from eksinf.model.stack import load_stack

REPO = Path(__file__).resolve().parent.parent


def bare_engine(jobs: list[tuple[bytes, dict, dict]]) -> None:
    import helm_python
    from helm_python import _native

    for archive, values, options in jobs:
        with helm_python.Chart.load_archive(archive) as chart:
            _native.call_string(
                "helm_render", chart._raw(), json.dumps(values), json.dumps(options)
            )
            _ = chart.crds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", type=Path, default=REPO)
    parser.add_argument("--chart-mirror", type=Path, default=REPO.parent / "shared" / "charts")
    parser.add_argument("-n", "--runs", type=int, default=15)
    parser.add_argument("--verify-runs", type=int, default=5)
    args = parser.parse_args()

    stack = load_stack(args.stack)
    lock = read_lock(stack)
    kube = stack.kube_version if stack.kube_version.startswith("v") else f"v{stack.kube_version}"
    jobs = []
    for comp in stack.components:
        for spec in comp.charts:
            archive = resolve(stack, spec, args.chart_mirror, lock).archive  # warms the cache
            options = {"name": spec.release, "namespace": spec.namespace, "kube_version": kube}
            if stack.api_versions:
                options["api_versions"] = list(stack.api_versions)
            jobs.append((archive, chart_values(stack, comp, spec), options))

    def ours(out: Path) -> None:
        result = render_stack(stack, args.chart_mirror)
        guard.check(result)
        write_configs(result, out / "configs")

    floor_times, warm_times, cold_times = [], [], []
    cache_env = os.environ.get("EKSINF_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="eksinf-bench-") as tmp:
        bare_engine(jobs)  # warm-up: native library, page cache
        ours(Path(tmp))
        for run in range(args.runs):
            started = time.perf_counter()
            bare_engine(jobs)
            floor_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            ours(Path(tmp))
            warm_times.append(time.perf_counter() - started)
            # cold: an empty cache, as on a fresh CI machine: archives come from the mirror and
            # the determinism check renders every chart it cannot prove deterministic twice
            os.environ["EKSINF_CACHE_DIR"] = str(Path(tmp) / f"cold-cache-{run}")
            started = time.perf_counter()
            ours(Path(tmp))
            cold_times.append(time.perf_counter() - started)
            if cache_env is None:
                os.environ.pop("EKSINF_CACHE_DIR")
            else:
                os.environ["EKSINF_CACHE_DIR"] = cache_env

    floor = statistics.median(floor_times)
    warm = statistics.median(warm_times)
    cold = statistics.median(cold_times)
    print(f"charts: {len(jobs)}, runs: {args.runs} (medians)")
    print(f"bare engine (floor):                 {floor * 1000:8.1f} ms")
    print(f"eksinf render+guard+write, warm:     {warm * 1000:8.1f} ms  ratio {warm / floor:5.2f}")
    print(f"eksinf render+guard+write, cold:     {cold * 1000:8.1f} ms  ratio {cold / floor:5.2f}")
    print("target ratio: <= 1.5")

    eksinf = Path(sys.executable).parent / "eksinf"
    env = {**os.environ, "EKSINF_CHART_MIRROR": str(args.chart_mirror)}
    walls = []
    for _ in range(args.verify_runs):
        started = time.perf_counter()
        done = subprocess.run(
            [str(eksinf), "verify"], cwd=args.stack, env=env, capture_output=True, text=True
        )
        walls.append(time.perf_counter() - started)
        if done.returncode != 0:
            print(f"eksinf verify exited {done.returncode}: {done.stderr.strip()}")
            break
    print(
        f"eksinf verify (wall, median of {len(walls)}): {statistics.median(walls):6.2f} s  (target < 2 s)"
    )


if __name__ == "__main__":
    main()
