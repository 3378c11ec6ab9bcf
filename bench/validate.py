"""Validate benchmark: `eksinf validate` over the whole stack, raw and resolved units.

    .venv/bin/python bench/validate.py [--stack DIR] [-n RUNS]

Wall time of the command as a user runs it (a new process each run, so imports, schema loading
and CEL compilation count), median of N; target < 1.5 s on the project's 2-core machine.
"warm": the CEL parse cache holds the stack's rules (every run after the first); "cold": an
empty cache dir, so every CEL rule is parsed (celpy's grammar is built) in that run.
In-process, the split: loading schemas + checking, per pass.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EKSINF = Path(sys.executable).parent / "eksinf"


def timed(stack: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [str(EKSINF), "--stack", str(stack), "validate", "--json"],
        env=env,
        capture_output=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"eksinf validate failed ({done.returncode}): {done.stderr.decode()[-400:]}")
    return elapsed


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

    from eksinf.stack import load_stack
    from eksinf.validate.admission import validate_stack

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
    print(
        f"eksinf validate, warm (median of {args.runs}): {statistics.median(warm):.3f} s  (target < 1.5 s)"
    )
    print(f"eksinf validate, cold (median of {args.runs}): {statistics.median(cold):.3f} s")
    print(f"in-process validate_stack: first {first:.3f} s, again (schemas loaded) {again:.3f} s")


if __name__ == "__main__":
    main()
