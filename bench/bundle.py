"""Bench: bundle the whole stack and push it to a local docker-registry, against plain `tar czf`.

Prints medians over several runs and the ratio to the floor: `tar czf` of configs/ in a
subprocess (the same bytes, without normalisation, guard, digests or a registry).

    .venv/bin/python bench/bundle.py [--stack DIR] [--runs N]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import requests

from eksinf.model.stack import load_stack
from eksinf.publish.bundle import build_bundles, publish


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_registry(workdir: Path) -> tuple[subprocess.Popen, str]:
    """docker-registry on 127.0.0.1 with its own config and storage, as the test fixture does."""
    binary = shutil.which("docker-registry")
    if binary is None:
        raise SystemExit("docker-registry is not installed: run `bash .ci/setup`")
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: error, accesslog: {disabled: true}}\n"
        f"storage: {{filesystem: {{rootdirectory: {workdir / 'data'}}}}}\n"
        f"http: {{addr: 127.0.0.1:{port}}}\n"
        "health: {storagedriver: {enabled: false}}\n"
    )
    proc = subprocess.Popen(
        [binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    host = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://{host}/v2/", timeout=1).status_code == 200:
                return proc, host
        except requests.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("docker-registry did not start")


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    stack = load_stack(args.stack)
    with tempfile.TemporaryDirectory(prefix="eksinf-bench-") as tmp:
        work = Path(tmp)
        proc, host = start_registry(work / "registry")
        try:
            tar_s, cold_s, warm_s, bundle_s = [], [], [], []
            size = 0
            for run in range(args.runs):
                out = work / f"tar-{run}.tgz"
                tar_cmd = ["tar", "czf", str(out), "-C", str(stack.root), "configs"]
                tar_s.append(timed(lambda cmd=tar_cmd: subprocess.run(cmd, check=True)))
                base = f"{host}/bench/run{run}"  # a fresh repository: every blob is uploaded
                started = time.perf_counter()
                bundles = build_bundles(stack, out=work / "bundles")
                bundle_s.append(time.perf_counter() - started)
                publish(stack, bundles, base)
                cold_s.append(time.perf_counter() - started)
                started = time.perf_counter()  # the same content again: digest checks only
                publish(stack, build_bundles(stack, out=work / "bundles"), base)
                warm_s.append(time.perf_counter() - started)
                size = sum(b.size for b in bundles)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    floor = statistics.median(tar_s)
    print(f"stack: {stack.root} ({len(bundles)} components, {size} bytes of bundles)")
    print(f"runs: {args.runs} (medians)")
    print(f"tar czf configs/ (floor)           {floor * 1000:8.1f} ms   1.00x")
    for label, samples in (
        ("bundle only", bundle_s),
        ("bundle + push (new repository)", cold_s),
        ("bundle + push (unchanged)", warm_s),
    ):
        median = statistics.median(samples)
        print(f"{label:<34} {median * 1000:8.1f} ms   {median / floor:5.2f}x")


if __name__ == "__main__":
    main()
