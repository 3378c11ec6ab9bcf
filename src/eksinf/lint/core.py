"""Lint's report, the context its checks read, and how a check is written.

A check is a kernel rule (model/checks.py): a function of the `Context` made a rule with
`@check(name, ...)`, yielding its findings (`found`, or `coded` for a finer code). lint/rules.py
holds the one table, in run order; `table` lists it for `eksinf lint --list`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model import checks
from ..model.awsobjects import AwsObject
from ..model.checks import Finding, Rule, RuleFn
from ..model.configs import Resource

ERROR = checks.ERROR  # a finding fails lint (exit 3); every check is an error today
ANCHOR = "docs/linking.md#eksinf-lint"
FAMILY = "lint"


def finding_dict(f: Finding) -> dict[str, Any]:
    """One finding as `eksinf lint --json` prints it: its code (or its rule's name)."""
    return {"check": f.label, "message": f.detail, "places": list(f.places)}


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)  # kernel findings (model/checks.py)
    checks: list[str] = field(default_factory=list)
    bindings: int = 0
    placeholders: int = 0

    @property
    def ok(self) -> bool:
        return not self.findings

    def add(self, step: str, message: str, *places: str) -> None:
        """A finding of one of the pipeline's own steps (STAGES), which are not rules."""
        self.findings.append(
            Finding(message, places=places, name=step, severity=ERROR, anchor=ANCHOR)
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": self.checks,
            "bindings": self.bindings,
            "placeholders": self.placeholders,
            "findings": [finding_dict(f) for f in self.findings],
        }


@dataclass(frozen=True)
class Context:
    """What every check reads: the resolved resources of the stack, and the two inputs a few
    checks need besides them."""

    resources: list[Resource]
    iam_dir: Path  # the stack's iam/ policies
    stack_name: Any  # the profile's stackName
    profile: dict[str, Any] = field(default_factory=dict)  # the profile's spec
    # aws-objects.lock: every AWS-backed object the stack has shipped (None: no lock yet)
    aws_objects: tuple[AwsObject, ...] | None = None


def check(name: str, *also: str) -> Callable[[RuleFn[Context]], Rule[Context]]:
    """Make a function of the context a lint rule: `@check("name")`, or `@check("a", "b")` when
    one pass over the resources judges two rules. Its findings carry `name` unless they give a
    finer `code`; its domain is its module's name. List it in lint/rules.py's CHECKS."""

    def make(fn: RuleFn[Context]) -> Rule[Context]:
        domain = fn.__module__.rsplit(".", 1)[-1]
        return checks.rule(
            name, family=FAMILY, severity=ERROR, anchor=ANCHOR, domain=domain, also=also
        )(fn)

    return make


def found(message: str, *places: str) -> Finding:
    """A finding of the rule that yields it (the kernel stamps its name)."""
    return Finding(message, places=places)


def coded(code: str, message: str, *places: str) -> Finding:
    """A finding under a finer code than its rule's name (`taint-gpu` under `taints`)."""
    return Finding(message, places=places, code=code)


def run_checks(report: Report, ctx: Context, rules: Sequence[Rule[Context]]) -> None:
    for entry in rules:
        report.checks += list(entry.names)
        report.findings += entry.run(ctx)


# The pipeline's own steps (lint/__init__.py runs them in this order, before the registered
# checks, because their outputs feed them): listed with the checks so the table is complete.
STAGES: tuple[tuple[str, str, str, str], ...] = (
    (
        "profile",
        "stack",
        "docs/address-plan.md",
        "The platform profile loads and passes its schema and rules.",
    ),
    ("fresh", "stack", ANCHOR, "configs/ was rendered from the current sources (configs-stale)."),
    (
        "links",
        "bindings",
        "docs/linking.md#profile-links",
        "Every binding's unit, resource, path or setter and profile source exist.",
    ),
    (
        "placeholders",
        "bindings",
        "docs/linking.md#profile-links",
        "Every placeholder in configs/ is bound.",
    ),
)


def table(rules: Sequence[Rule[Context]]) -> list[dict[str, str]]:
    """The table `eksinf lint --list` prints: one row per check name, pipeline steps first."""
    steps = [
        {"name": n, "domain": d, "severity": ERROR, "anchor": a, "summary": s}
        for n, d, a, s in STAGES
    ]
    return steps + [
        {
            "name": name,
            "domain": entry.domain,
            "severity": entry.severity,
            "anchor": entry.anchor,
            "summary": entry.summary,
        }
        for entry in rules
        for name in entry.names
    ]
