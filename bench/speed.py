"""Speed benchmark: eksinf's commands as whole processes, each against the floor of its work.

    EKSINF_CHART_MIRROR=../shared/charts .venv/bin/python bench/speed.py [-n RUNS]

In a scratch clone of this repository's HEAD (removed afterwards), every command and every floor
runs as a new process, interleaved in one loop so that load on a shared machine stretches them
alike; each figure is the median of N. Floors:
- python: a bare `python -c pass` of the same interpreter;
- engine: a bare Helm engine process, which imports only the engine and renders the stack's
  charts with the same values and options (the values are computed once, beforehand);
- tar: `tar czf` of configs/;
- yaml: not a floor of any command but a part of a cold render: eksinf's YAML reader and writer,
  cache off, parsing configs/ and writing it back, the YAML work a render without its cache
  cannot skip. Engine plus yaml (less one interpreter start), over engine, is the ratio a cold
  render would reach if everything else it does took no time.
"warm" runs share one cache folder, filled first; "no cache" runs have EKSINF_NO_CACHE=1 (read
nothing from a cache, write nothing to it); "cold" runs each get an empty one (charts come
from the mirror, every chart not proven deterministic from its templates is rendered twice for
the determinism check, nothing is cached);
"edited" runs share the warm folder after an edit of one chart's values (a toleration added to
the device plugin's), the everyday case: that chart is rendered afresh (proven, once), the rest
is not.

"validate (warm)" runs over a cache that holds every document's admission verdict; "sandbox up
(unchanged)" runs against the hub the first `sandbox up` made, with nothing changed since, so
every release is already current and every verdict is in the cache.

Targets, judged on wall time: --help, version and components <= 4x python; render and verify
warm <= 1.5x engine; render cold, and with EKSINF_NO_CACHE=1, <= 3x; bundle <= 6x tar; validate (warm) and sandbox up (unchanged) <= 0.3 s, judged on wall
time too, and printed beside it as a ratio to python. CPU time is printed beside it: on a loaded
machine it is the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
EKSINF = str(Path(sys.executable).with_name("eksinf"))

ENGINE_FLOOR = """
import json, sys
import helm_python
from helm_python import _native
for archive, values, options in json.load(open(sys.argv[1])):
    with helm_python.Chart.load_archive(open(archive, "rb").read()) as chart:
        _native.call_string("helm_render", chart._raw(), json.dumps(values), json.dumps(options))
        _ = chart.crds
"""

YAML_FLOOR = """
import pathlib, sys
from eksinf.core import cache, yamldump, yamlio
cache.disable()
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.yaml")):
    yamldump.dump_docs(yamlio.load_docs(path.read_text()))
"""

TARGETS = {"--help": 4.0, "version": 4.0, "components": 4.0, "bundle": 6.0}
TARGETS |= {
    "render (warm)": 1.5,
    "verify (warm)": 1.5,
    "render (cold)": 3.0,
    "render (no cache)": 3.0,
}
SECONDS = {"validate (warm)": 0.3, "sandbox up (unchanged)": 0.3}  # wall time, not a ratio


def engine_jobs(stack_root: Path, mirror: Path, work: Path) -> Path:
    """The charts, values and options the stack renders, as a file the engine floor reads."""
    from eksinf.build.charts import read_lock, resolve
    from eksinf.build.chartsplit import chart_values
    from eksinf.model.stack import load_stack

    stack = load_stack(stack_root)
    lock = read_lock(stack)
    kube = stack.kube_version if stack.kube_version.startswith("v") else f"v{stack.kube_version}"
    jobs = []
    for comp in stack.components:
        for spec in comp.charts:
            archive = work / f"{spec.name}.tgz"
            archive.write_bytes(resolve(stack, spec, mirror, lock).archive)
            options = {"name": spec.release, "namespace": spec.namespace, "kube_version": kube}
            if stack.api_versions:
                options["api_versions"] = list(stack.api_versions)
            jobs.append([str(archive), chart_values(stack, comp, spec), options])
    path = work / "jobs.json"
    path.write_text(json.dumps(jobs))
    return path


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one process: on a machine shared with other jobs wall time
    stretches with the load, CPU time much less."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed ({done.returncode}): {done.stderr[-600:]!r}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=7)
    parser.add_argument(
        "--only", metavar="WORD", help="Only the commands whose name holds WORD (floors all run)."
    )
    args = parser.parse_args()
    mirror = os.environ.get("EKSINF_CHART_MIRROR")
    if not mirror:
        sys.exit("bench: set EKSINF_CHART_MIRROR to the offline chart mirror (../shared/charts)")
    scratch = Path(tempfile.mkdtemp(prefix="eksinf-bench-speed-"))
    try:
        clone = scratch / "stack"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        warm_env = {**os.environ, "EKSINF_CACHE_DIR": str(scratch / "cache")}
        jobs = engine_jobs(clone, Path(mirror), scratch)
        eks = [EKSINF, "--stack", str(clone)]
        bundles = str(scratch / "bundles")
        # name -> (command, floor, cache: warm | cold | edited)
        cases: dict[str, tuple[list[str], str, str]] = {
            "--help": ([EKSINF, "--help"], "python", "warm"),
            "version": ([EKSINF, "version"], "python", "warm"),
            "components": ([*eks, "components"], "python", "warm"),
            "render (warm)": ([*eks, "render"], "engine", "warm"),
            "render (cold)": ([*eks, "render"], "engine", "cold"),
            "render (no cache)": ([*eks, "render"], "engine", "off"),
            "render (edited)": ([*eks, "render"], "engine", "edited"),
            "verify (warm)": ([*eks, "verify"], "engine", "warm"),
            "lint": ([*eks, "lint"], "python", "warm"),
            "validate (warm)": ([*eks, "validate"], "python", "warm"),
            "bundle": ([*eks, "bundle", "--out", bundles], "tar", "warm"),
            "sandbox up (unchanged)": ([*eks, "sandbox", "up"], "python", "warm"),
        }
        if args.only:
            cases = {k: v for k, v in cases.items() if args.only in k}
        values = clone / "render/gpu-runtime/values/nvidia-device-plugin.yaml"
        pristine = values.read_text()
        floors = {
            "python": [PYTHON, "-c", "pass"],
            "engine": [PYTHON, "-c", ENGINE_FLOOR, str(jobs)],
            "tar": ["tar", "czf", str(scratch / "configs.tgz"), "configs"],
            "yaml": [PYTHON, "-c", YAML_FLOOR, str(clone / "configs")],
        }
        for cmd, _, _ in cases.values():  # fill the warm cache; sandbox up makes its hub once
            run(cmd, warm_env, clone)
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in [*floors, *cases]}
        for n in range(args.runs):
            for name, cmd in floors.items():
                times[name].append(run(cmd, warm_env, clone))
            for name, (cmd, _, cache) in cases.items():
                env = warm_env
                if cache == "cold":
                    env = {**warm_env, "EKSINF_CACHE_DIR": str(scratch / f"cold-{n}")}
                if cache == "off":
                    env = {**warm_env, "EKSINF_NO_CACHE": "1"}
                if cache == "edited":  # a toleration no earlier run had (the list ends the file)
                    toleration = f"  - key: eksinf.dev/bench-{n}\n    operator: Exists\n"
                    values.write_text(pristine + toleration)
                times[name].append(run(cmd, env, clone))
                if cache == "edited":  # the others measure the committed stack
                    values.write_text(pristine)
                    run([*eks, "render"], warm_env, clone)
        wall = {k: statistics.median(w for w, _ in v) for k, v in times.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in times.items()}
        print(
            f"{'command':<22} {'wall':>7} {'cpu':>7}  {'floor':<7} {'wall x':>6} {'cpu x':>6}  target"
        )
        for name in floors:
            print(f"{'floor: ' + name:<22} {wall[name] * 1000:5.0f}ms {cpu[name] * 1000:5.0f}ms")
        for name, (_, floor, _) in cases.items():
            ratio, cpu_ratio = wall[name] / wall[floor], cpu[name] / cpu[floor]
            target, seconds = TARGETS.get(name), SECONDS.get(name)
            verdict = ""
            if target is not None:
                verdict = f"<= {target:g}x " + ("met" if ratio <= target else "NOT MET")
            if seconds is not None:
                verdict = f"<= {seconds:g}s " + ("met" if wall[name] <= seconds else "NOT MET")
            print(
                f"{name:<22} {wall[name] * 1000:5.0f}ms {cpu[name] * 1000:5.0f}ms  {floor:<7} "
                f"{ratio:5.2f}x {cpu_ratio:5.2f}x  {verdict}"
            )
        # one interpreter start-up, not two
        bound = (wall["engine"] + wall["yaml"] - wall["python"]) / wall["engine"]
        print(f"engine + yaml alone (a cold render with nothing else): {bound:.2f}x engine")
        print(f"medians of {args.runs}, interleaved; load average {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(scratch)  # made above by mkdtemp: ours alone
    return 0


if __name__ == "__main__":
    sys.exit(main())
