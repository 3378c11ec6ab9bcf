"""What this stack is running on AWS and what it costs, read from EC2 (not from Kubernetes).

Kubernetes objects lag real instances and an unreachable cluster looks empty, so billing is
answered by `ec2:DescribeInstances` scoped to the stack. `collect` does the I/O; `build_status`
is pure and turns the raw answers plus the price table into a `Status`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, cast

from eksinf.core.types import Doc, Docs
from eksinf.model.prices import PriceTable

from ..errors import EksinfError
from ..kube.client import KubeClient, resource_path
from ..model.names import DISCOVERY_KEY
from .pricing import LiveRates
from .scope import StackScope
from .session import (
    AWS_FAILURES,
    AwsSession,
    answer_field,
    aws_errors,
    error_code,
    paginate,
    tags_of,
    translate,
)

BILLING_STATES = ("pending", "running")
_GPU_FAMILY = re.compile(r"^(g|p)\d")  # g4dn, g5, g5g, g6, g6e, p4d, p5, p5e, p5en ...


@dataclass(frozen=True)
class InstanceRow:
    id: str
    type: str
    pool: str
    state: str
    zone: str
    hourly: float | None  # None = no price known: unknown, never zero
    lifecycle: str = "on-demand"  # or spot
    price_source: str = "unknown"  # price-list | spot-history | table | unknown
    price_read_at: str | None = None  # when the live price was read (or the table's as_of)

    @property
    def gpu(self) -> bool:
        return bool(_GPU_FAMILY.match(self.type.removeprefix("ml.")))  # ml.g5.2xlarge: a g5


@dataclass(frozen=True)
class FixedCost:
    kind: str  # eks-control-plane | nat-gateway
    id: str
    hourly: float | None


@dataclass(frozen=True)
class Status:
    stack: str
    cluster: str
    region: str
    account: str
    instances: tuple[InstanceRow, ...]
    fixed: tuple[FixedCost, ...]
    hours_per_month: int
    prices_as_of: str
    warnings: tuple[str, ...] = field(default=())

    @property
    def unknown_items(self) -> int:
        return sum(1 for r in self._costed() if r.hourly is None)

    @property
    def hourly_known(self) -> float:
        return round(sum(r.hourly or 0.0 for r in self._costed()), 4)

    def _costed(self) -> tuple[InstanceRow | FixedCost, ...]:
        return (*self.instances, *self.fixed)

    @property
    def pools(self) -> dict[str, list[InstanceRow]]:
        out: dict[str, list[InstanceRow]] = {}
        for row in self.instances:
            out.setdefault(row.pool, []).append(row)
        return dict(sorted(out.items()))

    @property
    def gpu_running(self) -> list[InstanceRow]:
        return [r for r in self.instances if r.gpu]


def pool_of(tags: dict[str, str]) -> str:
    if "karpenter.sh/nodepool" in tags:
        return tags["karpenter.sh/nodepool"]
    if "eks:nodegroup-name" in tags:
        return f"nodegroup/{tags['eks:nodegroup-name']}"
    return "(no pool)"


@dataclass(frozen=True)
class RawStatus:
    """What AWS answered, before pricing: kept separate so the pricing logic is pure."""

    account: str
    instances: tuple[dict[str, Any], ...]
    nat_gateways: tuple[dict[str, Any], ...]
    cluster: dict[str, Any] | None
    # A consumed HyperPod cluster's instances (sagemaker ListClusterNodes): SageMaker's, not
    # EC2 instances of this account, so DescribeInstances never lists them.
    hyperpod_nodes: tuple[dict[str, Any], ...] = ()


def stack_instances(
    session: AwsSession, scope: StackScope, states: tuple[str, ...] = BILLING_STATES
) -> Docs:
    """Instances carrying the stack tag or this cluster's tags, each once, sorted by id."""
    ec2 = session.client("ec2")
    found: dict[str, Doc] = {}
    with aws_errors("listing the stack's EC2 instances (ec2 describe-instances)"):
        for filters in scope.instance_filter_sets():
            reservations = paginate(
                ec2,
                "describe_instances",
                "Reservations",
                Filters=[*filters, {"Name": "instance-state-name", "Values": list(states)}],
            )
            for reservation in reservations:
                for inst in reservation.get("Instances") or []:
                    found[answer_field(inst, "InstanceId", DESCRIBE_INSTANCES)] = inst
    return [found[k] for k in sorted(found)]


DESCRIBE_INSTANCES = "ec2 describe-instances"


def instance_type(inst: dict[str, Any]) -> str:
    return answer_field(inst, "InstanceType", DESCRIBE_INSTANCES)


def zone_of(inst: dict[str, Any]) -> str:
    """The instance's zone, "" when the answer has none (it then has no spot price either)."""
    placement = inst.get("Placement")
    zone = placement.get("AvailabilityZone") if isinstance(placement, dict) else None
    return zone if isinstance(zone, str) else ""


def stack_vpc_ids(session: AwsSession, scope: StackScope) -> list[str]:
    found: set[str] = set()
    with aws_errors("finding the stack's VPC (ec2 describe-vpcs by stack tag)"):
        for filters in scope.stack_filter_sets():
            vpcs = paginate(session.client("ec2"), "describe_vpcs", "Vpcs", Filters=filters)
            found |= {answer_field(v, "VpcId", "ec2 describe-vpcs") for v in vpcs}
    return sorted(found)


def stack_nat_gateways(session: AwsSession, scope: StackScope) -> Docs:
    """NAT gateways tagged with the stack, or living in the stack's VPC."""
    ec2 = session.client("ec2")
    state = {"Name": "state", "Values": ["pending", "available"]}
    found: dict[str, Doc] = {}
    with aws_errors("listing the stack's NAT gateways (ec2 describe-nat-gateways)"):
        queries = scope.stack_filter_sets()
        vpcs = stack_vpc_ids(session, scope)
        if vpcs:
            queries.append([{"Name": "vpc-id", "Values": vpcs}])
        for filters in queries:
            for nat in paginate(
                ec2, "describe_nat_gateways", "NatGateways", Filter=[*filters, state]
            ):
                found[answer_field(nat, "NatGatewayId", "ec2 describe-nat-gateways")] = nat
    return [found[k] for k in sorted(found)]


def describe_cluster(session: AwsSession, name: str) -> Doc | None:
    """The EKS cluster, or None when it does not exist (any other failure raises)."""
    try:
        cluster = session.client("eks").describe_cluster(name=name).get("cluster")
    except AWS_FAILURES as exc:
        if error_code(exc) == "ResourceNotFoundException":
            return None
        raise translate(exc, f"describing EKS cluster {name} (eks describe-cluster)") from exc
    answer_field(cluster, "name", "eks describe-cluster")  # refuses all but a mapping with a name
    return cast(Doc, cluster)


def hyperpod_nodes(session: AwsSession, cluster: str) -> Docs:
    """Every instance of a HyperPod cluster (name or ARN), by instance group."""
    with aws_errors(
        f"listing HyperPod cluster {cluster}'s instances (sagemaker list-cluster-nodes)"
    ):
        return paginate(
            session.client("sagemaker"),
            "list_cluster_nodes",
            "ClusterNodeSummaries",
            ClusterName=cluster,
        )


def collect(session: AwsSession, scope: StackScope, hyperpod: str | None = None) -> RawStatus:
    """`hyperpod`: also list that HyperPod cluster's instances (a hyperpod-eks target)."""
    account = session.caller.account
    return RawStatus(
        account=account,
        instances=tuple(stack_instances(session, scope)),
        nat_gateways=tuple(stack_nat_gateways(session, scope)),
        cluster=describe_cluster(session, scope.cluster),
        hyperpod_nodes=tuple(hyperpod_nodes(session, hyperpod)) if hyperpod else (),
    )


def hyperpod_row(node: dict[str, Any], region: str, prices: PriceTable) -> InstanceRow:
    """A HyperPod instance, priced from the same table at its ml.* type: the table lists no
    ml.* rate yet, so it is unknown, never zero (and never the EC2 rate of the type behind)."""
    call = "sagemaker list-cluster-nodes"
    itype = answer_field(node, "InstanceType", call)
    rate = prices.instance_rate(region, itype)
    status = node.get("InstanceStatus")
    return InstanceRow(
        id=answer_field(node, "InstanceId", call),
        type=itype,
        pool=f"instance-group/{answer_field(node, 'InstanceGroupName', call)}",
        state=str(status.get("Status", "?")) if isinstance(status, dict) else "?",
        zone="",
        hourly=rate,
        price_source="table" if rate is not None else "unknown",
        price_read_at=prices.as_of if rate is not None else None,
    )


def instance_price(
    inst: dict[str, Any], region: str, prices: PriceTable, live: LiveRates | None
) -> tuple[float | None, str, str | None]:
    """(hourly, source, read at): a spot instance at its zone's spot price, else unknown (the
    on-demand rate would overstate it); an on-demand one at the Price List rate, else the
    shipped table's, else unknown."""
    itype = instance_type(inst)
    if inst.get("InstanceLifecycle") == "spot":
        key = f"{itype}@{zone_of(inst)}"
        if live is not None and key in live.spot:
            return live.spot[key], "spot-history", live.read_at.get(key)
        return None, "unknown", None
    if live is not None and itype in live.on_demand:
        return live.on_demand[itype], "price-list", live.read_at.get(itype)
    table = prices.instance_rate(region, itype)
    return (table, "table", prices.as_of) if table is not None else (None, "unknown", None)


def build_status(
    scope: StackScope,
    raw: RawStatus,
    prices: PriceTable,
    stack_accounts: dict[str, list[str]] | None = None,
    live: LiveRates | None = None,
) -> Status:
    """`stack_accounts`: the account(s) ACK recorded building the stack in, when known;
    `live`: what the Price List / spot history said (None: the table only)."""
    region = scope.region
    rows = _instance_rows(raw, region, prices, live)
    fixed = _fixed_costs(raw, region, prices)
    warnings = _account_warnings(scope, raw, stack_accounts)
    warnings += _cost_warnings(rows, fixed, region, prices, live)
    return Status(
        stack=scope.stack,
        cluster=scope.cluster,
        region=region,
        account=raw.account,
        instances=tuple(rows),
        fixed=tuple(fixed),
        hours_per_month=prices.hours_per_month,
        prices_as_of=prices.as_of,
        warnings=tuple(warnings),
    )


def _instance_rows(
    raw: RawStatus, region: str, prices: PriceTable, live: LiveRates | None
) -> list[InstanceRow]:
    """One priced row per EC2 instance, then one per HyperPod node."""
    rows = []
    for inst in raw.instances:
        hourly, source, read_at = instance_price(inst, region, prices, live)
        rows.append(
            InstanceRow(
                id=answer_field(inst, "InstanceId", DESCRIBE_INSTANCES),
                type=instance_type(inst),
                pool=pool_of(tags_of(inst)),
                state=answer_field(inst, "State.Name", DESCRIBE_INSTANCES),
                zone=zone_of(inst),
                hourly=hourly,
                lifecycle="spot" if inst.get("InstanceLifecycle") == "spot" else "on-demand",
                price_source=source,
                price_read_at=read_at,
            )
        )
    rows += [hyperpod_row(node, region, prices) for node in raw.hyperpod_nodes]
    return rows


def _fixed_costs(raw: RawStatus, region: str, prices: PriceTable) -> list[FixedCost]:
    """The costs that run whatever the nodes do: the EKS control plane and NAT gateways."""
    fixed = []
    if raw.cluster is not None and raw.cluster.get("status") != "DELETING":
        fixed.append(
            FixedCost(
                "eks-control-plane",
                answer_field(raw.cluster, "name", "eks describe-cluster"),
                prices.fixed_rate(region, "eks_control_plane_hourly"),
            )
        )
    for nat in raw.nat_gateways:
        fixed.append(
            FixedCost(
                "nat-gateway",
                answer_field(nat, "NatGatewayId", "ec2 describe-nat-gateways"),
                prices.fixed_rate(region, "nat_gateway_hourly"),
            )
        )
    return fixed


def _account_warnings(
    scope: StackScope, raw: RawStatus, stack_accounts: dict[str, list[str]] | None
) -> list[str]:
    """A warning for each account ACK built the stack in that is not these credentials'."""
    warnings = []
    for account, labels in sorted((stack_accounts or {}).items()):
        if account != raw.account:
            warnings.append(
                f"account mismatch: ACK built {', '.join(labels[:3])} of stack {scope.stack} in "
                f"account {account}, but these credentials are account {raw.account}; this "
                "report describes the wrong account"
            )
    return warnings


def _cost_warnings(
    rows: list[InstanceRow],
    fixed: list[FixedCost],
    region: str,
    prices: PriceTable,
    live: LiveRates | None,
) -> list[str]:
    """Running GPUs, and every price that is unknown or came from the shipped table."""
    warnings = []
    held = sorted({r.type for r in rows if r.gpu and r.pool.startswith("instance-group/")})
    if held:
        warnings.append(
            f"HyperPod GPU instance(s) ({', '.join(held)}) are held by their instance groups "
            "whether or not a model runs; eksinf never changes HyperPod capacity"
        )
    gpus = [r for r in rows if r.gpu and not r.pool.startswith("instance-group/")]
    if gpus:
        warnings.append(
            f"{len(gpus)} GPU node(s) running ({', '.join(sorted({r.type for r in gpus}))}): "
            "scale GPU workloads to 0 through config to release them"
        )
    unknown = sorted({f"{r.type} ({r.lifecycle})" for r in rows if r.hourly is None})
    if unknown:
        warnings.append(
            f"no price for {', '.join(unknown)} in {region}: their cost is unknown, not zero"
        )
    warnings += live.refused if live is not None else []
    for error in live.errors if live is not None else []:
        warnings.append(
            f"live prices unavailable ({error}): on-demand rates come from the shipped table "
            f"(as of {prices.as_of}), spot rates are unknown"
        )
    tabled = sorted({r.type for r in rows if r.price_source == "table"})
    if tabled and live is not None and not live.errors:
        warnings.append(
            f"the Price List has no on-demand rate for {', '.join(tabled)} in {region}: "
            f"priced from the shipped table (as of {prices.as_of})"
        )
    if any(f.hourly is None for f in fixed):
        warnings.append(f"no fixed-cost prices for region {region}: those costs are unknown")
    return warnings


def _money(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def to_json(status: Status) -> dict[str, Any]:
    complete = status.unknown_items == 0
    hourly = status.hourly_known
    return {
        "stack": status.stack,
        "cluster": status.cluster,
        "region": status.region,
        "account": status.account,
        "instances": [
            {
                "id": r.id,
                "type": r.type,
                "pool": r.pool,
                "state": r.state,
                "zone": r.zone,
                "gpu": r.gpu,
                "hourly": _money(r.hourly),
                "price": "known" if r.hourly is not None else "unknown",
                "lifecycle": r.lifecycle,
                "priceSource": r.price_source,
                "priceReadAt": r.price_read_at,
            }
            for r in status.instances
        ],
        "pools": {
            name: {"count": len(rows), "types": sorted({r.type for r in rows})}
            for name, rows in status.pools.items()
        },
        "fixed": [{"kind": f.kind, "id": f.id, "hourly": _money(f.hourly)} for f in status.fixed],
        "cost": {
            # With any unknown item the total is a lower bound, and says so.
            "hourly": _money(hourly) if complete else None,
            "monthly": _money(hourly * status.hours_per_month) if complete else None,
            "hourlyKnown": _money(hourly),
            "unknownItems": status.unknown_items,
            "complete": complete,
            "pricesAsOf": status.prices_as_of,
        },
        "gpuNodes": len(status.gpu_running),
        "warnings": list(status.warnings),
        "billingError": None,
    }


def format_text(status: Status) -> list[str]:
    lines = [
        f"stack {status.stack} (cluster {status.cluster}) in {status.region}, "
        f"account {status.account}"
    ]
    if not status.instances:
        lines.append("EC2: no running or pending instances of this stack")
    for pool, rows in status.pools.items():
        lines.append(f"pool {pool}: {len(rows)} instance(s)")
        for r in rows:
            rate = f"${r.hourly:.3f}/h" if r.hourly is not None else "unknown"
            rate += f" ({r.lifecycle}, {r.price_source})"
            gpu = "  GPU" if r.gpu else ""
            lines.append(f"  {r.id}  {r.type:<14} {r.state:<8} {r.zone:<11} {rate}{gpu}")
    for f in status.fixed:
        rate = f"${f.hourly:.3f}/h" if f.hourly is not None else "unknown"
        lines.append(f"fixed {f.kind} {f.id}: {rate}")
    hourly = status.hourly_known
    monthly = hourly * status.hours_per_month
    priced = len(status.instances) + len(status.fixed) - status.unknown_items
    if status.unknown_items and not priced:  # nothing priced: no bound worth printing
        lines.append(
            f"cost: unknown; {status.unknown_items} item(s) of unknown price "
            f"(prices as of {status.prices_as_of})"
        )
    elif status.unknown_items:
        lines.append(
            f"cost: at least ${hourly:.2f}/h (~${monthly:.0f}/month); "
            f"{status.unknown_items} item(s) of unknown price (prices as of {status.prices_as_of})"
        )
    else:
        lines.append(
            f"cost: ${hourly:.2f}/h (~${monthly:.0f}/month at {status.hours_per_month} h; "
            f"prices as of {status.prices_as_of})"
        )
    return lines


def unknown_json(scope: StackScope, reason: str) -> dict[str, Any]:
    """The report when AWS could not be queried: cost UNKNOWN with the reason, never empty."""
    return {
        "stack": scope.stack,
        "cluster": scope.cluster,
        "region": scope.region,
        "instances": None,
        "cost": "UNKNOWN",
        "billingError": reason,
    }


# ---- EC2NodeClass resolution on a reachable workload cluster ---------------------------------

NODECLASS_PATH = resource_path("karpenter.k8s.aws/v1", "EC2NodeClass")


@dataclass(frozen=True)
class NodeClassRow:
    name: str
    ready: str  # the Ready condition's status: True | False | Unknown
    subnets: int
    security_groups: int
    amis: int
    capacity_reservations: int

    @property
    def resolves_nothing(self) -> list[str]:
        empty = [("subnets", self.subnets), ("securityGroups", self.security_groups)]
        empty.append(("amis", self.amis))
        return [name for name, count in empty if count == 0]


def node_class_rows(items: list[dict[str, Any]]) -> list[NodeClassRow]:
    rows = []
    for item in sorted(items, key=lambda i: i["metadata"]["name"]):
        st = item.get("status") or {}
        ready = next(
            (
                c.get("status", "Unknown")
                for c in st.get("conditions") or []
                if c.get("type") == "Ready"
            ),
            "Unknown",
        )
        rows.append(
            NodeClassRow(
                name=item["metadata"]["name"],
                ready=ready,
                subnets=len(st.get("subnets") or []),
                security_groups=len(st.get("securityGroups") or []),
                amis=len(st.get("amis") or []),
                capacity_reservations=len(st.get("capacityReservations") or []),
            )
        )
    return rows


def node_class_section(kube: KubeClient, network: str) -> dict[str, Any]:
    """What Karpenter resolved from the discovery selectors, or why it is unknown."""
    try:
        found = kube.get(NODECLASS_PATH)
    except EksinfError as exc:
        return {"nodeClasses": None, "nodeClassError": f"UNKNOWN: {exc.message}", "warnings": []}
    if found is None:
        return {
            "nodeClasses": None,
            "nodeClassError": "no EC2NodeClass API on this cluster: the karpenter component is "
            "not deployed there",
            "warnings": [],
        }
    rows = node_class_rows(found.get("items") or [])
    warnings = [
        f"EC2NodeClass {r.name} resolves no {', '.join(r.resolves_nothing)}: the "
        f"{DISCOVERY_KEY}={network} tags no longer agree with aws-network, or the AMI "
        "alias does not resolve; Karpenter will launch nothing for it"
        for r in rows
        if r.resolves_nothing
    ]
    return {
        "nodeClasses": [
            {
                "name": r.name,
                "ready": r.ready,
                "subnets": r.subnets,
                "securityGroups": r.security_groups,
                "amis": r.amis,
                "capacityReservations": r.capacity_reservations,
            }
            for r in rows
        ],
        "nodeClassError": None,
        "warnings": warnings,
    }
