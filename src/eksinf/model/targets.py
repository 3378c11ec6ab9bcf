"""Target kinds: what sort of cluster a hub target (enrolled or added) is, in one table.

The kind is stored with the target (the target space's `TargetKind` label, on either hub) and
read back when something depends on it; a target without the label predates kinds and is `eks`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import USAGE, EksinfError

KIND_LABEL = "TargetKind"

# Where a kind's GPU nodes come from. The behaviour that differs between kinds is keyed by it:
# the contract rules a cluster is judged by (aws/contract takes each rule's kinds from
# `kinds_with(source)`), what status lists and prices, and the profile block enroll reads. A new
# kind with a known source is one row below; a new source brings its rules and readers.
KARPENTER = "karpenter"  # Karpenter NodePools on EC2, from the stack's karpenter components
HYPERPOD_GROUPS = "hyperpod-instance-groups"  # a HyperPod cluster's instance groups


@dataclass(frozen=True)
class TargetKind:
    name: str
    summary: str
    # The stack's identity units (anything with an ACK `clusterRef`) name the EKS cluster by its
    # name (`spec.clusterName`) instead: there is no ACK `Cluster` object to reference.
    cluster_by_name: bool
    capacity: str = KARPENTER
    docs: str = "docs/contract.md"  # where its contract is explained


KINDS: dict[str, TargetKind] = {
    k.name: k
    for k in (
        TargetKind(
            "eks",
            "an EKS cluster this stack's management plane creates (ACK `Cluster` eks-cluster)",
            cluster_by_name=False,
        ),
        TargetKind(
            "eks-byo",
            "a bring-your-own EKS cluster: created elsewhere, consumed by name",
            cluster_by_name=True,
        ),
        TargetKind(
            "hyperpod-eks",
            "a SageMaker HyperPod cluster orchestrated by EKS, consumed, never created: the model "
            "runs as the HyperPod inference operator's InferenceEndpointConfig on its instance "
            "groups (docs/hyperpod.md)",
            cluster_by_name=True,
            capacity=HYPERPOD_GROUPS,
            docs="docs/hyperpod.md",
        ),
    )
}


def kinds_with(capacity: str) -> tuple[str, ...]:
    """The names of the kinds whose GPU nodes come from `capacity`."""
    return tuple(k.name for k in KINDS.values() if k.capacity == capacity)


DEFAULT_KIND = "eks"
TARGET_PLANES = ("mgmt", "workload")  # the planes a target cluster serves (the hub is none)


def target_kind(name: str) -> TargetKind:
    """The kind called `name`, or a usage error listing the kinds there are."""
    try:
        return KINDS[name]
    except KeyError:
        raise EksinfError(
            f"unknown target kind {name!r}",
            hint=f"Use --kind {' or --kind '.join(KINDS)}.",
            exit_code=USAGE,
        ) from None


def kind_of(labels: Mapping[str, str]) -> TargetKind:
    """The kind a target space's labels record (`eks` when it records none)."""
    return target_kind(labels.get(KIND_LABEL) or DEFAULT_KIND)


def kind_labels(kind: TargetKind) -> dict[str, str]:
    """The label that records `kind` on a target space."""
    return {KIND_LABEL: kind.name}


KIND_HELP = "Target kind: " + "; ".join(f"{k.name} = {k.summary}" for k in KINDS.values()) + "."


ACK_GROUP_SUFFIX = (
    ".services.k8s.aws/"  # every ACK resource's apiVersion: <svc>.services.k8s.aws/v1alpha1
)


def cluster_by_name(docs: list[Any], cluster_name: str) -> list[Any]:
    """`docs` with every ACK resource's `spec.clusterRef` (a reference to an ACK `Cluster`)
    replaced, in place of the key, by `spec.clusterName` (the field of the same resources that
    takes the EKS cluster's name; ACK accepts one or the other). Other documents are unchanged."""
    out = []
    for doc in docs:
        spec = doc.get("spec") if isinstance(doc, dict) else None
        if (
            isinstance(spec, dict)
            and "clusterRef" in spec
            and ACK_GROUP_SUFFIX in str(doc.get("apiVersion", ""))
        ):
            spec = {
                ("clusterName" if k == "clusterRef" else k): (
                    cluster_name if k == "clusterRef" else v
                )
                for k, v in spec.items()
                if k != "clusterName"
            }
            doc = {**doc, "spec": spec}
        out.append(doc)
    return out
