"""`eksinf lint`: static link validation and cross-component invariants.

Links make values equal; lint proves the rest. It reads the committed configs/, the profile and
the bindings; resolves the placeholders through the bindings with the link engine (so a linked
value is compared as it will ship); then runs every registered check (`lint.core.CHECKS`,
`eksinf lint --list`) on the resolved resources. Every finding names the two places that
disagree (unit file, resource, path), or the one field that is wrong.

Checks live by domain: bindings (links and placeholders), identity, network, scheduling, naming,
add-ons.
Pure: `lint_stack` reads files and returns a report; it never writes.
"""

from __future__ import annotations

import json
from dataclasses import replace

import yaml

from eksinf import links
from eksinf.build.inputs import inputs_digest
from eksinf.build.units import PROVENANCE_FILE, source_files
from eksinf.core import inside
from eksinf.core.types import Doc, Docs
from eksinf.core.yamlio import load_docs, read_source_text
from eksinf.model.profile import load_profile
from eksinf.model.stack import Stack

from ..errors import EksinfError
from ..model.awsobjects import AwsObject
from ..model.awsobjects import read_lock as read_aws_objects
from ..model.checks import Finding
from ..model.configs import read_units
from ..model.configs import resources as all_resources
from .bindings import check_links
from .core import Context, Report, run_checks
from .rules import CHECKS, markdown, table

__all__ = ["CHECKS", "Finding", "Report", "check_links", "lint_stack", "markdown", "table"]


def check_fresh(report: Report, stack: Stack) -> dict[str, tuple[str, Docs]]:
    """Flag configs/ rendered from other sources; return the handwritten units whose source differs.

    Handwritten units are copied byte for byte, so a differing source means configs/ is stale.
    The caller lints those sources too, so the real problem is reported, not only "run render".
    Returns `component/unit` -> (source file, documents).
    """
    report.checks.append("fresh")
    sources: dict[str, tuple[str, Docs]] = {}
    stale = False
    for comp in stack.components:
        for path in source_files(stack, comp):
            committed = stack.configs_dir / comp.name / path.name
            # read as render reads it (LF line endings), so a CRLF source is not stale forever
            text = read_source_text(path, str(path.relative_to(stack.root)), base=stack.root)
            if committed.is_file() and inside.read_bytes(committed, stack.root).decode() == text:
                continue
            stale = True
            source = str(path.relative_to(stack.root))
            report.add(
                "configs-stale",
                "the source differs from the committed unit (configs/ ships the old text; "
                "findings below are about the source): run `eksinf render` and commit configs/",
                source,
                str(committed.relative_to(stack.root)),
            )
            try:
                docs = load_docs(text)
            except yaml.YAMLError as exc:
                report.add("configs-stale", f"not valid YAML: {str(exc).splitlines()[0]}", source)
                continue
            key = f"{comp.name}/{path.stem}"
            sources[key] = (source, [d for d in docs if isinstance(d, dict)])
    provenance = stack.configs_dir / PROVENANCE_FILE
    if stale or not provenance.is_file():
        return sources
    try:
        recorded = json.loads(inside.read_bytes(provenance, stack.root)).get("inputsSha256")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        recorded = None
    if recorded != inputs_digest(stack):
        report.add(
            "configs-stale",
            "render inputs (chart values, versions or components) changed since "
            "configs/ was rendered: run `eksinf render` (`eksinf verify` shows the difference)",
            f"configs/{PROVENANCE_FILE} inputsSha256",
        )
    return sources


def _lint_units(
    report: Report,
    stack: Stack,
    units: dict[str, Docs],
    spec: Doc | None,
    bindings: list[links.Binding],
    shipped: tuple[AwsObject, ...] | None,
) -> None:
    valid = check_links(report, units, spec, bindings)
    if spec is None:
        return  # nothing to resolve with: invariants would compare placeholders
    planes = {c.name: c.plane for c in stack.components}
    resources = all_resources(links.resolve_units(units, spec, valid), planes)
    context = Context(resources, stack.root / "iam", spec.get("stackName"), spec, shipped)
    run_checks(report, context, CHECKS)


def lint_stack(stack: Stack) -> Report:
    report = Report()
    spec: Doc | None = None
    try:
        spec = load_profile(stack).spec
    except EksinfError as exc:
        report.add("profile", exc.message + (f" ({exc.hint})" if exc.hint else ""))
    report.checks.append("profile")
    try:
        bindings = links.load_bindings(stack)
    except EksinfError as exc:
        report.add("bindings", exc.message)
        return report
    report.bindings = len(bindings)
    try:
        units = read_units(stack.configs_dir)
    except EksinfError as exc:
        report.add("configs-yaml", exc.message)
        return report
    sources = check_fresh(report, stack)
    shipped: tuple[AwsObject, ...] | None = None
    try:
        recorded = read_aws_objects(stack.root)
        shipped = None if recorded is None else tuple(recorded)
    except EksinfError as exc:
        report.add("aws-objects", exc.message + (f" ({exc.hint})" if exc.hint else ""))
    _lint_units(report, stack, units, spec, bindings, shipped)  # what ships: configs/
    if not sources:
        return report
    # Stale handwritten units: lint their sources as well, and add what only they break.
    second = Report()
    edited = {**units, **{k: d for k, (_, d) in sources.items()}}
    _lint_units(second, stack, edited, spec, bindings, shipped)
    seen = {(f.label, f.detail, f.places) for f in report.findings}
    renames = {f"configs/{key}.yaml": label for key, (label, _) in sources.items()}
    for finding in second.findings:
        if (finding.label, finding.detail, finding.places) in seen:
            continue
        places = tuple(_rename(p, renames) for p in finding.places)
        report.findings.append(replace(finding, places=places))
    return report


def _rename(where: str, renames: dict[str, str]) -> str:
    head, sep, rest = where.partition(" ")
    return renames.get(head, head) + sep + rest
