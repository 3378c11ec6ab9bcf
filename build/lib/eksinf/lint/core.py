"""Lint's report and its one table of checks.

A check is a small function `(report, ctx) -> None` registered with `@check(name, ...)`: the
table gives each its name(s), severity, domain and docs anchor, runs them in registration order
and lists them for `eksinf lint --list`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model.awsobjects import AwsObject
from ..model.configs import Resource


@dataclass(frozen=True)
class Finding:
    check: str
    message: str
    places: tuple[str, ...] = ()  # "configs/<c>/<u>.yaml Kind ns/name path", one or two

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "message": self.message, "places": list(self.places)}


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    bindings: int = 0
    placeholders: int = 0

    @property
    def ok(self) -> bool:
        return not self.findings

    def add(self, check: str, message: str, *places: str) -> None:
        self.findings.append(Finding(check, message, tuple(places)))

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": self.checks,
            "bindings": self.bindings,
            "placeholders": self.placeholders,
            "findings": [f.as_dict() for f in self.findings],
        }


ERROR = "error"  # a finding fails lint (exit 3); every check is an error today
ANCHOR = "docs/linking.md#eksinf-lint"


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


CheckFn = Callable[[Report, Context], None]


@dataclass(frozen=True)
class Check:
    names: tuple[str, ...]  # what `report.checks` lists for it (one function may check two rules)
    domain: str
    severity: str
    anchor: str
    summary: str
    run: CheckFn


CHECKS: list[Check] = []


def check(*names: str, severity: str = ERROR, anchor: str = ANCHOR) -> Callable[[CheckFn], CheckFn]:
    """Register a check in the table, in definition order."""

    def register(fn: CheckFn) -> CheckFn:
        summary = " ".join((fn.__doc__ or "").split("\n\n")[0].split())
        domain = fn.__module__.rsplit(".", 1)[-1]
        CHECKS.append(Check(names, domain, severity, anchor, summary, fn))
        return fn

    return register


def run_checks(report: Report, ctx: Context) -> None:
    for entry in CHECKS:
        report.checks += list(entry.names)
        entry.run(report, ctx)


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


def table() -> list[dict[str, str]]:
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
        for entry in CHECKS
        for name in entry.names
    ]
