"""Validate benchmark: `eksinf validate` over the whole stack, raw and resolved units.

    .venv/bin/python bench/validate.py [--stack DIR] [-n RUNS]

Wall and CPU time of the command as a user runs it (a new process each run, so imports, schema
loading and CEL compilation count), median of N; target < 1.5 s on the project's 2-core machine.
On a machine shared with other jobs, wall time stretches and CPU time is the steadier figure.
"warm": the CEL parse cache holds the stack's rules (every run after the first); "cold": an
empty cache dir, so every CEL rule is parsed (celpy's grammar is built) in that run.
In-process, the split: loading schemas + checking, per pass.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EKSINF = Path(sys.executable).parent / "eksinf"


def timed(stack: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `eksinf validate` process. CPU time is reported too
    because a machine shared with other jobs stretches wall time, not CPU time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [str(EKSINF), "--stack", str(stack), "validate", "--json"],
        env=env,
        capture_output=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"eksinf validate failed ({done.returncode}): {done.stderr.decode()[-400:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", type=Path, default=REPO)
    parser.add_argument("-n", "--runs", type=int, default=7)
    args = parser.parse_args()

    warm, cold = [], []
    with tempfile.TemporaryDirectory(prefix="eksinf-bench-") as tmp:
        warm_env = {**os.environ, "EKSINF_CACHE_DIR": str(Path(tmp) / "warm")}
        timed(args.stack, warm_env)  # fills the CEL parse cache
        for run in range(args.runs):
            warm.append(timed(args.stack, warm_env))
            cold_env = {**os.environ, "EKSINF_CACHE_DIR": str(Path(tmp) / f"cold{run}")}
            cold.append(timed(args.stack, cold_env))

    from eksinf.build.validate.admission import validate_stack
    from eksinf.model.stack import load_stack

    stack = load_stack(args.stack)
    started = time.perf_counter()
    report = validate_stack(stack)
    first = time.perf_counter() - started
    started = time.perf_counter()
    validate_stack(stack)
    again = time.perf_counter() - started
    total = report.total
    print(
        f"stack: {total.resources} resources (raw + resolved), "
        f"{total.rules_evaluated} CEL rule evaluations ({report.distinct_rules} distinct rules)"
    )
    for label, runs in (("warm", warm), ("cold", cold)):
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        target = "  (target < 1.5 s)" if label == "warm" else ""
        print(
            f"eksinf validate, {label} (median of {args.runs}): {wall:.3f} s wall, "
            f"{cpu:.3f} s CPU{target}"
        )
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"in-process validate_stack: first {first:.3f} s, again (schemas loaded) {again:.3f} s")


if __name__ == "__main__":
    main()
