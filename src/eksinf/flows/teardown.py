"""`eksinf teardown`: destroy the stack's AWS infrastructure and prove nothing billing is
left (aws/teardown.py), with its config half: the hub operations it runs through its
ConfigPlane."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..aws import creds as creds_mod
from ..aws import teardown as td
from ..errors import USAGE, EksinfError
from ..hub.protocol import Hub, NoChanges
from ..kube.client import KubeClient
from ..model.names import kubeconfig_path
from .context import StackContext


class HubConfig:
    """aws.teardown.ConfigPlane over a Hub."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    def through(
        self, spaces: list[str], function: str, args: list[str]
    ) -> tuple[list[str], list[str]]:
        done, absent = [], []
        for space in spaces:
            if not self.hub.space_exists(space):
                absent.append(space)
                continue
            self.hub.invoke(space, function, args)
            with contextlib.suppress(NoChanges):  # already published with this content
                self.hub.publish(space)
            done.append(space)
        return done, absent

    def delete_spaces(self, spaces: list[str]) -> list[str]:
        removed = []
        for space in spaces:
            if self.hub.space_exists(space):
                self.hub.delete_space(space, recursive=True)
                removed.append(space)
        return removed

    def existing(self, spaces: list[str]) -> list[str]:
        return [s for s in spaces if self.hub.space_exists(s)]


@dataclass(frozen=True)
class TeardownOptions:
    plane: str | None = None  # workload or mgmt; None: both, workload first
    yes: bool = False
    delete_config: bool = False
    variant: str = "dev"
    kubeconfig: Path | None = None
    context: str | None = None
    argocd_namespace: str = "argocd"
    wait_timeout: float = 900
    poll: float = 30
    dry_run: bool = False  # the plan and the preflight verdicts, as without yes


@dataclass(frozen=True)
class TeardownPreview:
    """Without --yes (or with --dry-run): the plan, what bills now (None: unknown, said as a
    warning) and the ACK controllers' preflight verdict (None: no mgmt plane or unknown)."""

    plan: list[str]
    current: dict[str, Any] | None
    controllers: Any = None  # aws.teardown's verdict: .allowed, .line, .error(), .as_json()

    @property
    def refusal(self) -> EksinfError | None:
        """The error teardown would refuse with, when the verdict refuses."""
        verdict = self.controllers
        return verdict.error() if verdict is not None and not verdict.allowed else None

    def as_json(self) -> dict[str, Any]:
        report: dict[str, Any] = {"plan": self.plan, "current": self.current, "changed": False}
        report["controllers"] = self.controllers.as_json() if self.controllers else None
        refusal = self.refusal
        if refusal is not None:
            report.update(error=refusal.message, hint=refusal.hint, exit=refusal.exit_code)
        return report


@dataclass(frozen=True)
class TeardownDone:
    stack: str
    region: str
    outcomes: list[Any] = field(default_factory=list)  # aws.teardown.Outcome

    @property
    def finals(self) -> list[Any]:
        return [o.final for o in self.outcomes if o.final is not None]

    @property
    def clean(self) -> bool:
        return all(f.clean for f in self.finals)

    def as_json(self) -> dict[str, Any]:
        return {
            "changed": True,
            "planes": [o.as_json() for o in self.outcomes],
            "clean": self.clean,
        }


def check_plane(plane: str | None) -> None:
    if plane not in (None, "workload", "mgmt"):
        raise EksinfError(
            f"unknown plane {plane!r}"
            + (": the hub plane creates nothing to tear down" if plane == "hub" else ""),
            hint="Use --plane workload or --plane mgmt (default: both).",
            exit_code=USAGE,
        )


def _preview(ctx: StackContext, plan: td.TeardownPlan, opts: TeardownOptions) -> TeardownPreview:
    """The plan, what bills now and, for the mgmt plane, the controllers' preflight: all
    read-only (the controllers' Secret, sts and the IAM simulator)."""
    scope, session = ctx.scope, ctx.session
    lines, current = td.plan_lines(plan, scope), None
    try:
        current = td.leftovers(session, scope).as_json()
    except EksinfError as exc:
        ctx.warn(f"current state UNKNOWN: {exc.message}")
    verdict = None
    if "mgmt" in plan.planes and plan.kube_path.is_file():
        try:
            mgmt = KubeClient.from_kubeconfig(plan.kube_path, session, opts.context)
            verdict = td.plan_controllers(plan, session, mgmt)
        except EksinfError as exc:
            ctx.warn(f"the ACK controllers' permissions UNKNOWN: {exc.message}")
    return TeardownPreview(lines, current, verdict)


def teardown(ctx: StackContext, opts: TeardownOptions) -> TeardownPreview | TeardownDone:
    """Without `opts.yes`, the plan and what bills now; with it, tear the planes down (progress
    to `ctx.say`, idle Elastic IPs to `ctx.warn`)."""
    check_plane(opts.plane)
    stack, scope = ctx.stack, ctx.scope
    plan = td.make_plan(
        stack,
        [opts.plane] if opts.plane else ["workload", "mgmt"],
        opts.variant,
        Path(opts.kubeconfig or kubeconfig_path(stack.root, "mgmt")),
        opts.argocd_namespace,
        creds_mod.ack_namespace(stack.versions),
    )
    session = ctx.session
    if opts.dry_run or not opts.yes:
        return _preview(ctx, plan, opts)
    kube = (
        KubeClient.from_kubeconfig(plan.kube_path, session, opts.context)
        if plan.kube_path.is_file()
        else None
    )
    with ctx.existing_hub() as hub:
        outcomes = td.run(
            plan,
            session,
            scope,
            kube,
            HubConfig(hub) if hub is not None else None,
            td.Timing(opts.wait_timeout, opts.poll),
            opts.delete_config,
            say=ctx.say,
        )
    done = TeardownDone(scope.stack, scope.region, list(outcomes))
    for final in done.finals:
        for eip in final.idle_eips:
            ctx.warn(
                f"idle Elastic IP {eip['publicIp']} ({eip['allocationId']}) bills while unattached"
                + (" (carries the stack tag)" if eip["stack"] else "")
            )
    return done
