"""The flattening guard: Helm features that do not survive `helm template` + Argo CD.

It reads resources, not text: a hazard names its component, unit file, resource and what to do.
The hazards are one table of kernel rules (hazards.py); the guard walks each component's render,
runs each scope's rules and applies the component's allow file: a finding is allowed only by an
entry in render/<component>/HAZARDS.allow that gives a reason.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from eksinf.build.hazards import (
    BY_NAME,
    CRDS,
    DOCUMENT,
    HAZARDS,
    RENDER,
    TEMPLATE,
    VALUES,
    Chart,
    Document,
    Template,
    of_scope,
)
from eksinf.build.units import ComponentOutput, RenderResult, kept, resource_id
from eksinf.core import inside
from eksinf.core.yamlio import load_source
from eksinf.errors import CONTRACT, EksinfError
from eksinf.model import checks
from eksinf.model.checks import Finding
from eksinf.model.stack import ALLOW_FILE, Stack

__all__ = ["HAZARDS", "AllowEntry", "GuardReport", "Hazard", "check", "load_allows"]


@dataclass(frozen=True)
class Hazard:
    """A hazard's finding where the guard found it: its component and file, and whether an
    allow entry accepts it."""

    component: str
    finding: Finding  # name: the hazard; element: Kind/namespace/name, or the template path
    allowed_reason: str | None = None

    @property
    def hazard(self) -> str:
        return self.finding.name

    @property
    def file(self) -> str:  # unit file, or chart template path
        return self.finding.places[0]

    @property
    def resource(self) -> str:
        return self.finding.element

    @property
    def detail(self) -> str:
        return self.finding.detail

    @property
    def allowed(self) -> bool:
        return self.allowed_reason is not None

    @property
    def explanation(self) -> str:
        return BY_NAME[self.hazard].why

    @property
    def fix(self) -> str:
        return BY_NAME[self.hazard].fix

    def as_dict(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "file": self.file,
            "resource": self.resource,
            "hazard": self.hazard,
            "detail": self.detail,
            "explanation": self.explanation,
            "fix": self.fix,
            "allowed": self.allowed,
            "reason": self.allowed_reason,
        }


@dataclass(frozen=True)
class AllowEntry:
    """One entry of render/<component>/HAZARDS.allow: a hazard on a resource, allowed for a
    reason."""

    component: str
    hazard: str
    resource: str
    reason: str


@dataclass(frozen=True)
class GuardReport:
    """Every finding of a render, allowed or not, and the allow entries that matched nothing."""

    findings: tuple[Hazard, ...]
    unused_allows: tuple[AllowEntry, ...]

    @property
    def blocking(self) -> list[Hazard]:
        return [f for f in self.findings if not f.allowed]

    @property
    def ok(self) -> bool:
        return not self.blocking


def load_allows(stack: Stack, component: str) -> list[AllowEntry]:
    path = stack.render_dir / component / ALLOW_FILE
    if not os.path.lexists(path):
        return []
    inside.check(path.relative_to(stack.root), stack.root, stack.root)  # no link on the way
    label = f"render/{component}/{ALLOW_FILE}"
    docs = load_source(path, label=label)
    items = docs[0] if docs else []
    if not isinstance(items, list):
        raise EksinfError(
            f"{label}: expected a list of {{hazard, resource, reason}} entries",
            exit_code=CONTRACT,
        )
    entries = []
    for index, item in enumerate(items, start=1):
        where = f"{label}: entry {index}"
        if not isinstance(item, dict):
            raise EksinfError(f"{where}: expected a mapping", exit_code=CONTRACT)
        hazard, resource, reason = item.get("hazard"), item.get("resource"), item.get("reason")
        if hazard not in BY_NAME:
            raise EksinfError(
                f"{where}: unknown hazard {hazard!r}",
                hint=f"Known hazards: {', '.join(BY_NAME)}.",
                exit_code=CONTRACT,
            )
        if not isinstance(resource, str) or not resource:
            raise EksinfError(
                f"{where}: missing resource",
                hint="Name the resource as Kind/namespace/name (or the template path).",
                exit_code=CONTRACT,
            )
        if not isinstance(reason, str) or not reason.strip():
            raise EksinfError(
                f"{where} ({hazard} {resource}): an allow entry needs a reason",
                hint="Say why this hazard is safe here, in a `reason:` field.",
                exit_code=CONTRACT,
            )
        entries.append(AllowEntry(component, hazard, resource, reason.strip()))
    return entries


def _findings(output: ComponentOutput, stack: Stack) -> list[Finding]:
    """Every hazard in one component's render, scope by scope: its documents, then per chart
    its templates, crds/ files and two renders, then per chart its values. Each template is
    read once (`Template.read`), for its own rules and for the values rules."""
    found: list[Finding] = []
    for unit in output.units:
        for doc in unit.docs:
            found += checks.run(of_scope(DOCUMENT), Document(doc, resource_id(doc), unit.filename))
    charts = []
    for render in output.charts:
        templates = tuple(Template.read(path, source) for path, source in render.first.templates)
        for template in templates:
            found += checks.run(of_scope(TEMPLATE), template)
        chart = Chart(render, output.component, stack, templates)
        found += checks.run(of_scope(CRDS), chart) + checks.run(of_scope(RENDER), chart)
        charts.append(chart)
    for chart in charts:
        found += checks.run(of_scope(VALUES), chart)
    return found


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, ...]] = set()
    out = []
    for f in findings:
        key = (*f.places, f.element, f.name)
        if key not in seen:  # one finding per place, even if a template repeats the construct
            seen.add(key)
            out.append(f)
    return out


_TUPLE_FIELDS = ("places", "context")


def _decode(raw: list[list[dict[str, Any]]], parts: int) -> list[list[Finding]]:
    found = [
        [
            Finding(**{k: _tuples(v) if k in _TUPLE_FIELDS else v for k, v in f.items()})
            for f in part
        ]
        for part in raw
    ]
    if len(found) != parts:
        raise ValueError("not one list of findings per component")
    return found


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _all_findings(result: RenderResult) -> list[list[Finding]]:
    """Each component's findings before its allow file is applied: a function of the render
    alone, kept under its key; the allow files, which no render reads, are applied each run."""
    return kept(
        result,
        "guard-findings",
        lambda: [_dedupe(_findings(output, result.stack)) for output in result.outputs],
        lambda found: [[dataclasses.asdict(f) for f in part] for part in found],
        lambda raw: _decode(raw, len(result.outputs)),
    )


def check(result: RenderResult) -> GuardReport:
    """Find every hazard in a render and apply each component's allow file."""
    findings: list[Hazard] = []
    unused: list[AllowEntry] = []
    for output, raw in zip(result.outputs, _all_findings(result), strict=True):
        allows = load_allows(result.stack, output.component.name)
        used: set[AllowEntry] = set()
        for finding in raw:
            entry = next(
                (a for a in allows if a.hazard == finding.name and a.resource == finding.element),
                None,
            )
            if entry is not None:
                used.add(entry)
            reason = entry.reason if entry is not None else None
            findings.append(Hazard(output.component.name, finding, reason))
        unused += [a for a in allows if a not in used]
    return GuardReport(tuple(findings), tuple(unused))
