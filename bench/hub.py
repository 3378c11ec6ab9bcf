"""Hub benchmark: `eksinf sandbox up` on the embedded hub, and how it grows with variants.

    .venv/bin/python bench/hub.py [--stack DIR] [--variants 50]

Figures, all on a copy of the stack in a temp dir (the repo's .eksinf/ is never touched):
- the `eksinf sandbox up` command as a user runs it (a new process: interpreter start, a fresh
  hub, bundle, install, both planes, links, resolve, releases), and a second run (nothing
  changes), each against the floor of a bare `eksinf version` process (interpreter + CLI import);
- in-process, N sandbox variants of the whole stack on one hub (each adds one unit per committed
  file, ~26), timed per batch: time per unit at the start and at the end, and their ratio
  (1.0 = linear growth; the hub does no work proportional to what it already holds).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eksinf.flows import sandbox
from eksinf.hub.local import LocalHub
from eksinf.model.stack import load_stack

REPO = Path(__file__).resolve().parent.parent
STACK_FILES = ("components.yaml", "versions.env", "charts.lock")
STACK_DIRS = ("render", "configs")


def copy_stack(src: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    for name in STACK_FILES:
        if (src / name).exists():
            shutil.copy2(src / name, dest / name)
    for name in STACK_DIRS:
        shutil.copytree(src / name, dest / name)
    return dest


def cli_seconds(stack: Path, *args: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", "from eksinf.cli import main; main()", *args],
        cwd=stack,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"eksinf {' '.join(args)} failed:\n{done.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stack", type=Path, default=REPO)
    parser.add_argument("--variants", type=int, default=50)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="eksinf-bench-hub-") as tmp:
        stack_dir = copy_stack(opts.stack, Path(tmp) / "stack")
        floor = min(cli_seconds(stack_dir, "version") for _ in range(3))
        first = cli_seconds(stack_dir, "sandbox", "up")
        second = cli_seconds(stack_dir, "sandbox", "up")
        hub = LocalHub(stack_dir / ".eksinf" / "hub.db")
        units = len([u for u in hub.list_units() if u.target])
        hub.close()
        print(f"floor: `eksinf version` process             {floor:6.2f} s")
        print(
            f"sandbox up (fresh hub, CLI process)         {first:6.2f} s  "
            f"({first / floor:.1f}x floor, {units} bound units; target < 5 s)"
        )
        print(
            f"sandbox up again (nothing changes)          {second:6.2f} s  ({second / floor:.1f}x floor)"
        )

        stack = load_stack(Path(tmp) / "stack")
        hub = LocalHub(Path(tmp) / "many.db")
        batch = max(1, opts.variants // 5)
        per_unit: list[float] = []
        total_units, total_time = 0, 0.0
        for start in range(0, opts.variants, batch):
            count = min(batch, opts.variants - start)
            before = len(hub.list_units())
            t0 = time.perf_counter()
            for i in range(start, start + count):
                sandbox.sandbox_up(hub, stack, name=f"sb{i}", variant=f"v{i}")
            elapsed = time.perf_counter() - t0
            added = len(hub.list_units()) - before
            per_unit.append(elapsed / added)
            total_units += added
            total_time += elapsed
            print(
                f"variants {start + 1:3d}-{start + count:3d}: {added:5d} units in {elapsed:6.2f} s  "
                f"= {1000 * elapsed / added:5.2f} ms/unit"
            )
        hub.close()
        print(
            f"{opts.variants} variants: {total_units} units in {total_time:.2f} s "
            f"({1000 * total_time / total_units:.2f} ms/unit); growth last/first batch per unit "
            f"= {per_unit[-1] / per_unit[0]:.2f}x (1.0 = linear)"
        )


if __name__ == "__main__":
    main()
