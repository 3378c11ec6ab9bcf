"""Start-up of the frozen cub plugin: `eksinf version` as `cub eksinf version` runs it.

    .venv/bin/python bench/plugin.py [--asset eksinf-<os>-<arch>.tar.gz] [--runs 7]

The asset defaults to the newest one tests/test_plugin.py built (.eksinf/plugin-build/). It is
unpacked into a temp folder and its entrypoint run with a bare environment (no Python on PATH),
against two floors: the pip-installed `eksinf version` and a bare interpreter start. Figures are
medians of the runs; the machine's load moves them, the ratios less so.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def median_seconds(argv: list[str], runs: int, env: dict[str, str] | None = None) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--asset", type=Path)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    built = sorted(
        (REPO / ".eksinf" / "plugin-build").glob("*/eksinf-*.tar.gz"),
        key=lambda p: p.stat().st_mtime,
    )
    asset = args.asset or (built[-1] if built else None)
    if asset is None:
        raise SystemExit("no plugin asset: run tests/test_plugin.py or .ci/build-plugin.py first")
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(asset) as tar:
            tar.extractall(tmp, filter="tar")
        frozen = Path(tmp) / "eksinf" / "eksinf"
        bare = {"PATH": "/usr/bin:/bin", "HOME": tmp, "CUB_PLUGIN": "1"}
        plugin = median_seconds([str(frozen), "version"], args.runs, bare)
    venv = median_seconds([str(Path(sys.executable).parent / "eksinf"), "version"], args.runs)
    floor = median_seconds([sys.executable, "-c", "pass"], args.runs)
    print(f"asset: {asset.name} ({asset.stat().st_size / 1e6:.0f} MB)")
    print(f"cub eksinf version (frozen plugin)   {plugin:.2f} s  ({plugin / venv:.2f}x pip eksinf)")
    print(f"eksinf version (pip install)         {venv:.2f} s")
    print(f"python -c pass (interpreter floor)   {floor:.2f} s")


if __name__ == "__main__":
    main()
