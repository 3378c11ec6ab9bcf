"""Fleet benchmark: many sandboxes (9 variants each: 8 components and the profile) in one hub.

    .venv/bin/python bench/fleet.py [--sandboxes 100] [-n RUNS]

On a copy of the stack in a temp dir (the repo's .eksinf/ is never touched), N sandboxes are
brought up one after another into one hub.db, in-process through the same flow as
`eksinf sandbox up --name fNNN` (install, targets, profile, both planes' variants, links,
resolve, publish to the OCI layout). Figures, each against its floor or target, with a verdict:
- time per sandbox at 10, 50 and 100 sandboxes: the median CPU time of the five sandboxes up
  to that count (the first, which installs the bases, is left out); the ratio of the last to
  the first is the linearity (1.0: a sandbox costs the same however full the hub is);
- hub.db size per extra sandbox (after the first) and in total, measured with the WAL folded
  in (the hub closed); with fewer than 100 sandboxes the total is also projected to 100;
- `eksinf hub units` at the end, as the new process a user runs, interleaved with its floors,
  median of RUNS: its wall time above the same command over one space (which lists no units:
  interpreter, CLI and opening the hub, the part that does not grow with the fleet), against
  `python -c pass` for scale, and its peak memory (the process's maximum resident set).
Targets: linearity <= 1.3, <= 0.5 MiB per extra sandbox, <= 60 MiB at 100 sandboxes,
`hub units` <= 0.2 s above its floor and <= 60 MiB peak.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eksinf.flows import sandbox
from eksinf.hub.local import LocalHub
from eksinf.model.names import sandbox_spaces
from eksinf.model.stack import load_stack

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
STACK_FILES = ("components.yaml", "versions.env", "charts.lock")
STACK_DIRS = ("render", "configs")
MIB = 1024 * 1024
MARKS = (10, 50, 100)
WINDOW = 5
TARGETS = {
    "linearity": 1.3,
    "size per extra sandbox": 0.5 * MIB,
    "size at 100 sandboxes": 60 * MIB,
    "hub units above floor": 0.2,
    "hub units peak memory": 60 * MIB,
}


def copy_stack(src: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    for name in STACK_FILES:
        if (src / name).exists():
            shutil.copy2(src / name, dest / name)
    for name in STACK_DIRS:
        shutil.copytree(src / name, dest / name)
    return dest


def hub_size(path: Path) -> int:
    """The hub file's size with nothing pending in its WAL (the caller has closed the hub:
    the last connection to close folds the WAL in)."""
    return sum(
        Path(f"{path}{side}").stat().st_size
        for side in ("", "-wal")
        if Path(f"{path}{side}").exists()
    )


# The console script's body, which also records the process's peak resident set as it exits.
# Read from /proc (VmHWM: this program's own high-water mark) and not from rusage: a child's
# ru_maxrss starts from its parent's at fork, and this benchmark's parent process is large.
EKSINF_MEASURED = """
import atexit, os, sys
def peak():
    with open("/proc/self/status") as status:
        kib = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(os.environ["EKSINF_BENCH_PEAK"], "w") as out:
        out.write(kib)
atexit.register(peak)
from eksinf.cli import main
sys.argv[0] = "eksinf"
sys.exit(main())
"""


def eksinf(args: list[str], cwd: Path, scratch: Path) -> tuple[float, int]:
    """(wall seconds, peak resident bytes) of one `eksinf ARGS` process; output discarded."""
    log, peak = scratch / "stderr.log", scratch / "peak"
    env = {**os.environ, "EKSINF_BENCH_PEAK": str(peak)}
    with log.open("wb") as err:
        started = time.perf_counter()
        done = subprocess.run(
            [PYTHON, "-c", EKSINF_MEASURED, *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            check=False,
        )
        elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"bench: eksinf {' '.join(args)} failed: {log.read_text()[-600:]}")
    return elapsed, int(peak.read_text()) * 1024


def verdict(value: float, target: float) -> str:
    return f"{value / target:5.2f}x  {'pass' if value <= target else 'FAIL'}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandboxes", type=int, default=100)
    parser.add_argument("-n", "--runs", type=int, default=5, help="`hub units` runs")
    parser.add_argument("--stack", type=Path, default=REPO)
    opts = parser.parse_args()
    count = opts.sandboxes
    if count < 2:
        sys.exit("bench: --sandboxes must be at least 2 (the first installs the bases)")
    marks = [m for m in MARKS if m <= count] or [count]
    if count > marks[-1]:
        marks.append(count)
    scratch = Path(tempfile.mkdtemp(prefix="eksinf-bench-fleet-"))
    try:
        root = copy_stack(opts.stack, scratch / "stack")
        stack = load_stack(root)
        db = root / ".eksinf" / "hub.db"
        cpu: list[float] = []
        wall: list[float] = []
        sizes: dict[int, int] = {}
        hub = LocalHub(db)
        try:
            for i in range(1, count + 1):
                t0, c0 = time.perf_counter(), time.process_time()
                sandbox.sandbox_up(hub, stack, name=f"f{i:03d}", variant=f"f{i:03d}")
                cpu.append(time.process_time() - c0)
                wall.append(time.perf_counter() - t0)
                if i == 1 or i in marks:
                    hub.close()
                    sizes[i] = hub_size(db)
                    hub = LocalHub(db)
                    print(
                        f"sandbox {i:3d}: {wall[-1]:5.2f} s wall, {cpu[-1]:5.2f} s CPU; "
                        f"hub.db {sizes[i] / MIB:6.2f} MiB",
                        flush=True,
                    )
            variants = sum(
                1 for s in hub.list_spaces() if s.labels.get("Variant", "base") != "base"
            )
            t0 = time.perf_counter()
            units = len(hub.list_units())
            in_process = time.perf_counter() - t0
        finally:
            hub.close()

        floor_runs, units_runs, python_runs = [], [], []
        one_space = ["hub", "units", "--space", sandbox_spaces("f001")[0]]  # holds no units
        for _ in range(opts.runs):  # interleaved: load stretches all alike
            started = time.perf_counter()
            subprocess.run([PYTHON, "-c", "pass"], check=True)
            python_runs.append(time.perf_counter() - started)
            floor_runs.append(eksinf(one_space, root, scratch))
            units_runs.append(eksinf(["hub", "units"], root, scratch))
        python_wall = statistics.median(python_runs)
        floor_wall = statistics.median(w for w, _ in floor_runs)
        floor_rss = statistics.median(r for _, r in floor_runs)
        units_wall = statistics.median(w for w, _ in units_runs)
        units_rss = max(r for _, r in units_runs)

        def per_sandbox(mark: int) -> float:
            window = cpu[max(1, mark - WINDOW) : mark]  # sandbox 1 installs the bases
            return statistics.median(window)

        print(
            f"\n{count} sandboxes, {variants} variants, {units} units in one hub "
            f"(load average {os.getloadavg()[0]:.2f})\n"
        )
        print(f"{'figure':<36} {'measured':>12} {'floor/target':>14}  ratio  verdict")
        for mark in marks:
            print(
                f"{f'time per sandbox at {mark} (CPU)':<36} {per_sandbox(mark):10.2f} s "
                f"{'':>14}  wall {statistics.median(wall[max(1, mark - WINDOW) : mark]):.2f} s"
            )
        linear = per_sandbox(marks[-1]) / per_sandbox(marks[0])
        print(
            f"{f'linearity ({marks[-1]} vs {marks[0]})':<36} {linear:10.2f} x "
            f"{TARGETS['linearity']:12.2f} x  {verdict(linear, TARGETS['linearity'])}"
        )
        extra = (sizes[count] - sizes[1]) / (count - 1)
        target = TARGETS["size per extra sandbox"]
        print(
            f"{'hub.db per extra sandbox':<36} {extra / MIB:8.3f} MiB {target / MIB:10.2f} MiB  "
            f"{verdict(extra, target)}"
        )
        target = TARGETS["size at 100 sandboxes"]
        print(
            f"{f'hub.db at {count} sandboxes':<36} {sizes[count] / MIB:8.2f} MiB "
            f"{target / MIB:10.2f} MiB"
            + (f"  {verdict(sizes[count], target)}" if count >= 100 else "")
        )
        if count < 100:
            projected = sizes[1] + 99 * extra
            print(
                f"{'hub.db at 100 sandboxes (projected)':<36} {projected / MIB:8.2f} MiB "
                f"{target / MIB:10.2f} MiB  {verdict(projected, target)}"
            )
        above = units_wall - floor_wall
        target = TARGETS["hub units above floor"]
        print(
            f"{'hub units, process':<36} {units_wall:10.2f} s {floor_wall:12.2f} s  "
            f"{units_wall / floor_wall:5.2f}x  (floor: the same over one space)"
        )
        print(
            f"{'hub units, process':<36} {units_wall:10.2f} s {python_wall:12.2f} s  "
            f"{units_wall / python_wall:5.2f}x  (floor: python -c pass)"
        )
        print(
            f"{'hub units above its floor':<36} {above:10.2f} s {target:12.2f} s  "
            f"{verdict(above, target)}"
        )
        target = TARGETS["hub units peak memory"]
        print(
            f"{'hub units peak memory':<36} {units_rss / MIB:8.1f} MiB {target / MIB:10.1f} MiB  "
            f"{verdict(units_rss, target)}  (floor {floor_rss / MIB:.1f} MiB)"
        )
        print(f"{'list_units() in-process':<36} {in_process * 1000:9.0f} ms")
        print(
            f"`hub units`: median wall and highest peak of {opts.runs}, interleaved with its floor"
        )
    finally:
        shutil.rmtree(scratch)  # made above by mkdtemp: ours alone
    return 0


if __name__ == "__main__":
    sys.exit(main())
