"""The cluster contract's one table of rules, and how it is judged and documented.

A rule takes the facts (`facts.gather`) in a `Context` and returns its findings: none when it
does not apply (the stack needs no Pod Identity association, say). RULES is the one table, in
evaluation order (name, severity, docs anchor, and the element, call, fix and why that
docs/contract.md and docs/hyperpod.md carry); `eksinf enroll cluster --list-checks` prints it.
Each rule is tested directly with facts, no AWS (tests/test_contract_rules.py).
"""

from __future__ import annotations

from typing import Any

from ...model import checks
from ...model.checks import Finding, Rule
from ...model.targets import DEFAULT_KIND, KINDS, TargetKind
from ..scope import StackScope
from .context import ANCHOR, EKS_KINDS, EVERY_KIND, Context, check, rule
from .facts import Facts, StackNeeds
from .hyperpod import HyperPodFacts
from .hyperpod_role_rules import (
    alb_role_trust,
    inference_controller,
    inference_enablement,
    inference_role_policies,
    inference_role_trust,
)
from .hyperpod_rules import (
    addon_cluster_arn,
    addon_execution_role,
    addon_gateway,
    addon_tls_bucket,
    hyperpod_cluster,
    hyperpod_instance_groups,
    hyperpod_orchestrator,
    inference_addon,
)
from .rules_access import (
    access_entry,
    access_policy,
    cluster_active,
    endpoint_reachable,
    profile_names,
)
from .rules_identity import (
    addon_drift,
    irsa_issuer,
    irsa_trust,
    pod_identity_agent,
    pod_identity_associations,
    pod_identity_role,
    pod_identity_trust,
)
from .rules_nodes import (
    argocd,
    capacity_reservation,
    discovery_tags,
    gpu_ami,
    node_role,
    root_volume,
)

__all__ = [
    "ANCHOR",
    "EKS_KINDS",
    "EVERY_KIND",
    "RULES",
    "Context",
    "Finding",
    "check",
    "evaluate",
    "markdown",
    "rule",
    "rules_for",
    "table",
]

# The one table, in evaluation order: the rules every kind shares, the EKS-kind rules, then the
# hyperpod-eks rules (each rule's `kinds` says which target kinds it judges).
RULES: tuple[Rule[Context], ...] = (
    profile_names,
    cluster_active,
    access_entry,
    access_policy,
    endpoint_reachable,
    pod_identity_agent,
    addon_drift,
    pod_identity_associations,
    pod_identity_trust,
    pod_identity_role,
    irsa_issuer,
    irsa_trust,
    discovery_tags,
    node_role,
    gpu_ami,
    root_volume,
    capacity_reservation,
    argocd,
    hyperpod_cluster,
    hyperpod_orchestrator,
    hyperpod_instance_groups,
    inference_addon,
    addon_cluster_arn,
    addon_execution_role,
    addon_tls_bucket,
    addon_gateway,
    inference_controller,
    inference_enablement,
    inference_role_trust,
    alb_role_trust,
    inference_role_policies,
)
checks.check_table(RULES)

COLUMNS: tuple[tuple[str, Any], ...] = (
    ("check", lambda r: f"`{r.name}`"),
    ("element", lambda r: r.element),
    ("call that proves it", lambda r: r.call),
    ("fix", lambda r: r.fix),
    ("severity", lambda r: r.severity),
    ("why", lambda r: r.why),
)


def rules_for(kind: str) -> list[Rule[Context]]:
    """The rules that judge a target of `kind`, in table order."""
    return [r for r in RULES if kind in r.kinds]


def table(kind: str = DEFAULT_KIND) -> list[dict[str, str]]:
    return [
        {
            "name": r.name,
            "severity": r.severity,
            "anchor": r.anchor,
            "summary": r.summary,
            "element": r.element,
            "call": r.call,
            "fix": r.fix,
            "why": r.why,
        }
        for r in rules_for(kind)
    ]


def markdown(kind: str = DEFAULT_KIND) -> str:
    """The table docs/contract.md (eks) or docs/hyperpod.md (hyperpod-eks) carries between
    its `checks` markers (tests compare them)."""
    return checks.markdown(rules_for(kind), COLUMNS)


def evaluate(
    facts: Facts,
    scope: StackScope,
    needs: StackNeeds,
    kube_used: bool,
    argocd_namespace: str,
    install_argocd: bool = False,
    kind: TargetKind = KINDS[DEFAULT_KIND],
    hyperpod: HyperPodFacts | None = None,
) -> list[Finding]:
    """Judge the gathered facts with every rule of the target's kind, in table order: pure, so
    every rule is tested without AWS. Each finding carries its rule's documented severity (a
    check that did not apply says so as advisory). With no cluster at all, only cluster-active
    speaks: every other element hangs off the cluster."""
    ctx = Context(facts, scope, needs, kube_used, argocd_namespace, install_argocd, kind, hyperpod)
    found: list[Finding] = []
    for entry in rules_for(kind.name):
        found += entry.run(ctx)
        if entry is cluster_active and facts.cluster is None and not facts.cluster_error:
            break
    return found
