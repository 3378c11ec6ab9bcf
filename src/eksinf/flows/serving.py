"""Whether a plane serves, read from its cluster (aws/serving.py), and the one loop that polls
it: `status --plane [--watch]` shows every report; `deploy --serve-timeout` waits until the
plane serves or the time is up."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..aws import serving
from ..errors import USAGE, EksinfError
from ..kube.client import KubeClient
from ..model.names import kubeconfig_path
from .context import StackContext

HEALTHY = serving.HEALTHY
format_text = serving.format_text

Report = dict[str, Any]


@dataclass(frozen=True)
class Probe:
    """One plane's serving check, ready to read again and again."""

    kube: KubeClient
    plan: serving.Plan
    argocd_namespace: str
    model: str
    plane: str

    def read(self) -> Report:
        return serving.collect(self.kube, self.plan, self.argocd_namespace, self.model, self.plane)


def probe(ctx: StackContext, opts: WatchOptions, kubeconfig: Path) -> Probe:
    """The plane's serving check through `kubeconfig` (the --context of `opts`)."""
    stack = ctx.stack
    model = str(ctx.profile.spec.get("modelId", ""))
    components = [c.name for c in stack.select(plane=opts.plane, kind=opts.kind)]
    plan = serving.plan_for(stack.configs_dir, opts.plane, components, opts.variant)
    kube = KubeClient.from_kubeconfig(kubeconfig, context=opts.context)
    return Probe(kube, plan, opts.argocd_namespace, model, opts.plane)


def poll(
    read: Callable[[], Report],
    done: Callable[[Report, int], bool],
    interval: float,
    each: Callable[[Report], None] = lambda _r: None,
    waiting: Callable[[Report], None] = lambda _r: None,
    sleep: Callable[[float], None] | None = None,
) -> Report:
    """The one serving poll loop: read, hand the report to `each`, stop when `done(report,
    reads so far)`, else tell `waiting` and sleep `interval` seconds."""
    reads = 0
    while True:
        report = read()
        reads += 1
        each(report)
        if done(report, reads):
            return report
        waiting(report)
        (sleep or time.sleep)(interval)


# ---- status --plane ----------------------------------------------------------------------


@dataclass(frozen=True)
class WatchOptions:
    plane: str
    kubeconfig: Path | None = None
    context: str | None = None
    variant: str = "dev"
    kind: str = ""
    argocd_namespace: str = "argocd"
    every: float = 0  # --watch SECONDS; 0 reads once
    count: int = 0  # stop after N reports; 0 never


def check_plane(plane: str) -> None:
    if plane not in ("mgmt", "workload"):
        raise EksinfError(f"unknown plane {plane!r}", hint="Use mgmt or workload.", exit_code=USAGE)


def watch_plane(ctx: StackContext, opts: WatchOptions, show: Callable[[Report], None]) -> Report:
    """Report whether the plane serves, through `show`, once or every `opts.every` seconds;
    fails (exit 1) when the last report is not healthy."""
    check_plane(opts.plane)
    path = opts.kubeconfig or kubeconfig_path(ctx.stack.root, "mgmt")
    if opts.kubeconfig is None and opts.plane == "workload":
        raise EksinfError(
            "status --plane workload needs --kubeconfig (the workload cluster's)", exit_code=USAGE
        )
    check = probe(ctx, opts, Path(path))
    report = poll(
        check.read,
        lambda _r, reads: not opts.every or bool(opts.count and reads >= opts.count),
        opts.every,
        each=show,
    )
    if report["state"] != HEALTHY:
        raise EksinfError(f"{opts.plane} plane is {report['state']}: see above", exit_code=1)
    return report


# ---- deploy --serve-timeout --------------------------------------------------------------


@dataclass(frozen=True)
class Served:
    """What waiting for a plane to serve found: serving, timeout or skipped (no kubeconfig)."""

    status: str
    reason: str = ""
    registration_pending: list[str] = field(default_factory=list)
    report: Report | None = None

    def lines(self) -> list[str]:
        return format_text(self.report) if self.report is not None else []

    def as_json(self) -> dict[str, Any]:
        if self.status == "skipped":
            return {"status": self.status, "reason": self.reason}
        return {
            "status": self.status,
            "registrationPending": self.registration_pending,
            "report": self.report,
        }


def wait_serving(
    ctx: StackContext,
    target: str,
    plane: str,
    kind: str,
    variant: str,
    argocd_namespace: str,
    timeout: float,
    poll_every: float = 10.0,
    sleep: Callable[[float], None] | None = None,
) -> Served:
    """After a deploy: poll the target's plane until it serves or `timeout` passes. Serving
    decides; a HyperPod endpoint's pending SageMaker registration is reported beside it
    (`registration_pending`), never waited for."""
    space = target.split("/", 1)[0]
    path = kubeconfig_path(ctx.stack.root, space)
    if not path.is_file():
        return Served("skipped", reason=f"no kubeconfig for target {space} ({path})")
    check = probe(ctx, WatchOptions(plane, None, None, variant, kind, argocd_namespace), path)
    started = time.monotonic()
    report = poll(
        check.read,
        lambda r, _n: r["state"] == HEALTHY or time.monotonic() - started >= timeout,
        poll_every,
        waiting=lambda r: ctx.say(
            f"serving: {plane} plane {r['state']}; polling again in {poll_every:g} s"
        ),
        sleep=sleep,
    )
    pending = [
        r["endpointConfig"]
        for r in report.get("hyperpod", [])
        if (r.get("registration") or {}).get("pending")
    ]
    return Served("serving" if report["state"] == HEALTHY else "timeout", "", pending, report)
