"""`eksinf enroll cluster`'s contract: facts gathered from AWS and the cluster (facts.py),
judged by registered rules (rules.py). See docs/contract.md."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from eksinf.model.stack import Stack

from ...kube.client import KubeClient
from ...model.checks import Finding
from ...model.iam import trusted_actions
from ...model.targets import DEFAULT_KIND, KINDS, TargetKind
from ..scope import StackScope
from ..session import AwsSession
from .facts import (
    ADMIN_POLICY,
    Facts,
    StackNeeds,
    ami_parameter,
    gather,
    stack_needs,
)
from .hyperpod import HyperPodFacts, gather_hyperpod, wait_enablement
from .rules import RULES, evaluate, markdown, rules_for, table

ENABLEMENT_POLL = 30  # seconds between reads of the operator's view while it enables

__all__ = [
    "ADMIN_POLICY",
    "RULES",
    "ContractReport",
    "Finding",
    "check_json",
    "Facts",
    "StackNeeds",
    "ami_parameter",
    "check_cluster",
    "evaluate",
    "markdown",
    "missing_lines",
    "needs_for",
    "rules_for",
    "stack_needs",
    "table",
    "trusted_actions",
    "with_cluster",
]


@dataclass(frozen=True)
class ContractReport:
    cluster: str
    region: str
    checks: tuple[Finding, ...]

    @property
    def violations(self) -> list[Finding]:
        return [c for c in self.checks if c.blocks]

    @property
    def warnings(self) -> list[Finding]:
        return [c for c in self.checks if not c.blocks and c.status in ("warn", "unknown", "fail")]

    def as_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "region": self.region,
            "conforms": not self.violations,
            "checks": [check_json(c) for c in self.checks],
            "violations": [c.name for c in self.violations],
            "warnings": [c.name for c in self.warnings],
        }


def check_json(check: Finding) -> dict[str, Any]:
    """One judged element as `enroll cluster --json` prints it."""
    return {
        "name": check.name,
        "element": check.element,
        "status": check.status,
        "severity": check.severity,
        "detail": check.detail,
        "call": check.call,
        "fix": check.fix,
    }


def missing_lines(report: ContractReport) -> list[str]:
    lines = []
    for check in report.violations:
        verb = "is missing" if check.status == "fail" else "may be missing (could not check)"
        lines.append(f"cluster {verb} {check.element}: {check.detail}")
        if check.fix:
            lines.append(f"  fix: {check.fix}")
    return lines


def check_cluster(
    session: AwsSession,
    scope: StackScope,
    needs: StackNeeds,
    kube: KubeClient | None,
    grant: bool = False,
    argocd_namespace: str = "argocd",
    install_argocd: bool = False,
    kind: TargetKind = KINDS[DEFAULT_KIND],
    hyperpod: HyperPodFacts | None = None,
    enablement_wait: float = 0,
    say: Callable[[str], None] = lambda _msg: None,
) -> ContractReport:
    """Gather and judge the rules of the target's kind. A hyperpod-eks target passes
    `hyperpod` (hyperpod.expected: the HyperPod cluster and what the profile expects of it);
    while its operator's watcher is still enabling, its view is read again for up to
    `enablement_wait` seconds."""
    facts = gather(session, scope, needs, kube, grant, argocd_namespace)
    if hyperpod is not None:
        hyperpod = gather_hyperpod(session, hyperpod, facts.cluster, kube)
        if kube is not None and enablement_wait > 0:
            wait_enablement(kube, hyperpod, enablement_wait, ENABLEMENT_POLL, say)
    checks = evaluate(
        facts, scope, needs, kube is not None, argocd_namespace, install_argocd, kind, hyperpod
    )
    return ContractReport(scope.cluster, scope.region, tuple(checks))


def needs_for(stack: Stack) -> StackNeeds:
    """What the stack's committed units need of the cluster, read as they ship: the profile's
    values linked in by the link engine (an add-on's version, an association's role name)."""
    from eksinf.model.profile import load_profile

    from ...links import load_bindings

    return stack_needs(stack.configs_dir, load_profile(stack).spec, load_bindings(stack))


def with_cluster(scope: StackScope, cluster: str | None, region: str | None) -> StackScope:
    return replace(scope, cluster=cluster or scope.cluster, region=region or scope.region)
