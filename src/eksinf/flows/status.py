"""`eksinf status`: what the stack runs on EC2 and what it costs, scoped to its tags, with the
workload cluster's node classes when a kubeconfig is given."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..aws import pricing
from ..aws import status as status_mod
from ..aws.ack import ack_accounts, ack_objects
from ..errors import ENVIRONMENT, EksinfError
from ..kube.client import KubeClient
from ..model.names import kubeconfig_path
from ..model.prices import load_prices
from ..model.targets import HYPERPOD_GROUPS, target_kind
from .context import StackContext


@dataclass(frozen=True)
class StatusOptions:
    kind: str
    workload_kubeconfig: Path | None = None
    context: str | None = None
    mgmt_kubeconfig: Path | None = None
    mgmt_context: str | None = None


class StatusUnknown(EksinfError):
    """AWS could not be asked: the cost is UNKNOWN, never zero. `reason` is what failed and
    `body` the report --json prints before the error."""

    def __init__(self, cause: EksinfError, body: dict[str, Any]) -> None:
        super().__init__(
            "cost UNKNOWN: cannot query AWS for this stack",
            hint=cause.hint or "Fix the AWS access above and re-run.",
            exit_code=ENVIRONMENT,
        )
        self.reason = cause.message
        self.body = body


@dataclass(frozen=True)
class StatusResult:
    report: status_mod.Status
    node_classes: dict[str, Any] | None  # None: no --kubeconfig given
    prices_note: str

    def as_json(self) -> dict[str, Any]:
        body = status_mod.to_json(self.report)
        if self.node_classes is not None:
            body.update(
                nodeClasses=self.node_classes["nodeClasses"],
                nodeClassError=self.node_classes["nodeClassError"],
            )
        return body

    def lines(self) -> list[str]:
        lines = list(status_mod.format_text(self.report))
        section = self.node_classes
        if section is None:
            lines.append("node classes: no workload cluster given (--kubeconfig); not checked")
        elif section["nodeClasses"] is None:
            lines.append(f"node classes: {section['nodeClassError']}")
        else:
            lines += [
                f"nodeclass {nc['name']}: ready={nc['ready']} subnets={nc['subnets']} "
                f"securityGroups={nc['securityGroups']} amis={nc['amis']} "
                f"reservations={nc['capacityReservations']}"
                for nc in section["nodeClasses"]
            ]
        return lines


def status(ctx: StackContext, opts: StatusOptions) -> StatusResult:
    """Collect, price and report; warnings go to `ctx.warn` as they are found."""
    scope = ctx.scope
    hyperpod = None
    if target_kind(opts.kind).capacity == HYPERPOD_GROUPS:
        from ..aws.contract.hyperpod import expected

        hyperpod = expected(ctx.profile, ctx.stack.versions).name
    try:
        session = ctx.session
        raw = status_mod.collect(session, scope, hyperpod)
    except EksinfError as exc:
        raise StatusUnknown(exc, status_mod.unknown_json(scope, exc.message)) from exc
    accounts = _stack_accounts(ctx, opts.mgmt_kubeconfig, opts.mgmt_context)
    live = pricing.fetch_rates(
        session,
        scope.region,
        [
            status_mod.instance_type(i)
            for i in raw.instances
            if i.get("InstanceLifecycle") != "spot"
        ],
        [
            (status_mod.instance_type(i), status_mod.zone_of(i))
            for i in raw.instances
            if i.get("InstanceLifecycle") == "spot"
        ],
    )
    report = status_mod.build_status(scope, raw, load_prices(), accounts, live)
    section = _node_classes(ctx, opts) if opts.workload_kubeconfig is not None else None
    for message in [*report.warnings, *((section or {}).get("warnings") or [])]:
        ctx.warn(message)
    if section and section["nodeClassError"]:
        ctx.warn(f"node classes: {section['nodeClassError']}")
    sources = sorted({r.price_source for r in report.instances})
    note = (
        f"prices: {', '.join(sources) or 'none needed'} (live rates cached in "
        f"{pricing.cache_file(scope.region)}; table src/eksinf/data/prices.json as of "
        f"{report.prices_as_of})"
    )
    return StatusResult(report, section, note)


def _node_classes(ctx: StackContext, opts: StatusOptions) -> dict[str, Any]:
    assert opts.workload_kubeconfig is not None
    try:
        kube = KubeClient.from_kubeconfig(opts.workload_kubeconfig, ctx.session, opts.context)
    except EksinfError as exc:
        return {"nodeClasses": None, "nodeClassError": f"UNKNOWN: {exc.message}", "warnings": []}
    return status_mod.node_class_section(kube, ctx.scope.network)


def _stack_accounts(
    ctx: StackContext, kubeconfig: Path | None, context: str | None
) -> dict[str, list[str]] | None:
    """The account(s) the stack's ACK objects record, or None when there is no way to know."""
    stack = ctx.stack
    path = kubeconfig or kubeconfig_path(stack.root, "mgmt")
    if kubeconfig is None and not path.is_file():
        return None
    mgmt = [c.name for c in stack.select(plane="mgmt")]
    try:
        kube = KubeClient.from_kubeconfig(path, ctx.session, context)
        return ack_accounts(kube, ack_objects(stack.configs_dir, mgmt))
    except EksinfError as exc:
        ctx.warn(f"the stack's account is unknown (management cluster: {exc.message})")
        return None
