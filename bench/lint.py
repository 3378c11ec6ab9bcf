"""Lint benchmark: `eksinf lint` against the floor of reading what it must read.

    .venv/bin/python bench/lint.py [--stack DIR] [-n RUNS]

- floor: parse every committed unit in configs/ (libyaml), the work lint cannot avoid;
- eksinf: `lint_stack` (profile checks, bindings, freshness, link validation, resolution and
  every cross-component invariant) on the same stack, in the same process.
Runs alternate; each figure is the median of N. The ratio is eksinf / floor (target <= 2).
Last, the wall time of the `eksinf lint` command in a new process (target < 2 s).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from eksinf.lint import lint_stack
from eksinf.model.configs import read_units
from eksinf.model.stack import load_stack

REPO = Path(__file__).resolve().parent.parent


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", type=Path, default=REPO)
    parser.add_argument("-n", type=int, default=7)
    args = parser.parse_args()
    stack = load_stack(args.stack)
    floor, ours = [], []
    for _ in range(args.n):
        floor.append(timed(lambda: read_units(stack.configs_dir)))
        report = None

        def run() -> None:
            nonlocal report
            report = lint_stack(stack)

        ours.append(timed(run))
        if report is None or not report.ok:
            print("lint is not clean on this stack; fix it before benchmarking", file=sys.stderr)
            return 1
    f, o = statistics.median(floor), statistics.median(ours)
    print(f"floor (parse configs/): {f * 1000:.1f} ms")
    print(f"eksinf lint_stack:      {o * 1000:.1f} ms")
    print(f"ratio eksinf/floor:     {o / f:.2f}")
    exe = Path(sys.executable).with_name("eksinf")
    walls = [
        timed(
            lambda: subprocess.run(
                [str(exe), "lint"], cwd=args.stack, check=True, capture_output=True
            )
        )
        for _ in range(3)
    ]
    print(f"`eksinf lint` wall:     {statistics.median(walls):.2f} s (median of 3, new process)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
