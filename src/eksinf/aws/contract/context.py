"""What every contract rule judges (`Context`), and how a rule is written: `@rule(name, ...)` on
a function of the context that returns its findings, made with `check(...)`. The kernel
(model/checks.py) stamps each finding with the rule's name, severity and docs anchor; the one
table of rules is rules.RULES.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...model.checks import Finding, Rule, RuleFn
from ...model.checks import rule as kernel_rule
from ...model.targets import DEFAULT_KIND, KARPENTER, KINDS, TargetKind, kinds_with
from ..scope import StackScope
from .facts import Facts, StackNeeds, has_admin
from .hyperpod import HyperPodFacts

FAMILY = "contract"
ANCHOR = "docs/contract.md#elements"
# Which target kinds a rule judges, by where their GPU nodes come from (model/targets.py). A
# Karpenter-built cluster gets the Karpenter elements; HyperPod capacity its own (hyperpod_rules).
EKS_KINDS = kinds_with(KARPENTER)
EVERY_KIND = tuple(KINDS)


@dataclass(frozen=True)
class Context:
    """What every rule judges."""

    facts: Facts
    scope: StackScope
    needs: StackNeeds
    kube_used: bool  # a kubeconfig was given or generated
    argocd_namespace: str
    install_argocd: bool = False  # enroll installs the pinned Argo CD when it is absent
    kind: TargetKind = KINDS[DEFAULT_KIND]  # what `--kind` says the cluster is
    hyperpod: HyperPodFacts | None = None  # gathered for a hyperpod-eks target only

    @property
    def entry_missing(self) -> bool:
        """The caller has no access entry (False when that could not be read)."""
        principal = self.facts.caller.principal_arn if self.facts.caller else "?"
        entries = self.facts.access_entries
        return entries is not None and principal not in entries

    @property
    def policy_missing(self) -> bool:
        """The caller's entry exists but holds no cluster-admin policy (False when unread)."""
        policies = self.facts.access_policies
        return policies is not None and not has_admin(policies)

    @property
    def access_explains_denial(self) -> bool:
        """A 401/403 from the API is explained by a missing entry or policy."""
        return self.entry_missing or self.policy_missing


def check(element: str, status: str, detail: str, call: str, fix: str = "") -> Finding:
    """One judgement of an element: what the cluster must have, pass/fail/warn/unknown/skipped,
    what was found, the call that read it and, when it does not pass, its fix."""
    return Finding(detail, element=element, fix=fix, status=status, call=call)


def rule(
    name: str,
    *,
    severity: str,
    element: str,
    call: str,
    fix: str,
    why: str,
    anchor: str = ANCHOR,
    kinds: tuple[str, ...] = EKS_KINDS,
) -> Callable[[RuleFn[Context]], Rule[Context]]:
    """A row of the contract (docs/contract.md's table is generated from these): what the
    cluster must have, the call that proves it, its fix and why it blocks (or only warns)."""
    return kernel_rule(
        name,
        family=FAMILY,
        severity=severity,
        anchor=anchor,
        element=element,
        call=call,
        fix=fix,
        why=why,
        kinds=kinds,
    )
