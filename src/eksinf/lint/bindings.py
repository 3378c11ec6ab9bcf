"""Static link validation: every binding against the rendered units, and every placeholder bound."""

from __future__ import annotations

from eksinf import links
from eksinf.core.types import Doc, Docs
from eksinf.model import paths

from ..model import placeholder
from ..model.configs import place
from ..model.placeholder import PLACEHOLDER
from ..model.resources import find_resource, pod_spec_path, resource_label
from .core import Report


def check_links(
    report: Report, units: dict[str, Docs], spec: Doc | None, bindings: list[links.Binding]
) -> list[links.Binding]:
    """Validate every binding against the rendered units; return the ones that can resolve."""
    report.checks.append("links")
    valid: list[links.Binding] = []
    covered: dict[tuple[str, int, str], links.Binding] = {}
    for b in bindings:
        if _check_binding(report, units, spec, b, covered):
            valid.append(b)
    if spec is not None:
        _whole_lists(report, spec, valid)
    _check_placeholders(report, units, covered)
    return valid


def _check_binding(
    report: Report,
    units: dict[str, Docs],
    spec: Doc | None,
    b: links.Binding,
    covered: dict[tuple[str, int, str], links.Binding],
) -> bool:
    """One binding: its field exists, its source is a profile scalar, the field ships the
    placeholder and no earlier binding writes it. Each failure is reported; True (and the field
    recorded in `covered`) when the binding can resolve."""
    where = f"{b.where} ({b.describe()})"
    found = _binding_target(report, units, b, where)
    if found is None:
        return False
    doc, target = found
    if spec is not None and not _binding_source(report, spec, b, where):
        return False
    current = paths.get(doc, target)
    if not placeholder.is_placeholder(current):
        report.add(
            "binding-literal",
            f"linked field holds the literal {current!r}; every linked field ships as "
            f"{PLACEHOLDER!r}, so a missing link is caught instead of shipping a stale "
            "default",
            where,
            place(b.unit_key, doc, target),
        )
        return False  # not resolved: the invariants below then compare the literal as shipped
    key = (b.unit_key, id(doc), target)
    if key in covered:
        first = covered[key]
        report.add(
            "binding-duplicate",
            f"two bindings write {target} (spec.{first.source} and spec.{b.source})",
            f"{first.where} ({first.describe()})",
            where,
        )
        return False
    covered[key] = b
    return True


def _binding_target(
    report: Report, units: dict[str, Docs], b: links.Binding, where: str
) -> tuple[Doc, str] | None:
    """The resource and path a binding writes, or None (reported) when its unit, resource,
    setter or field is not there."""
    docs = units.get(b.unit_key)
    if docs is None:
        report.add(
            "binding-unit",
            f"binding names unit {b.unit!r}, but component {b.component} has no such unit",
            where,
            f"configs/{b.component}/",
        )
        return None
    doc = find_resource(docs, b.kind, b.name)
    if doc is None:
        have = ", ".join(resource_label(d) for d in docs) or "nothing"
        report.add(
            "binding-resource",
            f"binding targets {b.kind} {b.name}, which unit {b.unit_key}.yaml does not "
            f"contain (it has: {have})",
            where,
            f"configs/{b.unit_key}.yaml",
        )
        return None
    try:
        target = links.target_path(b, doc)
    except paths.PathError as exc:
        report.add(
            "binding-setter",
            f"setter {b.container}/{b.env}: {exc.message}",
            where,
            place(b.unit_key, doc, pod_spec_path(doc) + ".containers"),
        )
        return None
    if not paths.exists(doc, target):
        suspect = paths.unescaped_dot_suspect(doc, target)
        if suspect:
            report.add(
                "binding-unescaped-dot",
                f"path {target} has an unescaped dot inside a key: it addresses a nested "
                f"key that does not exist (a hub would silently create it). The field "
                f"exists as {suspect}; write that spelling (`~1` for a literal dot)",
                where,
                place(b.unit_key, doc, suspect),
            )
        else:
            report.add(
                "binding-path",
                f"path {target} does not exist in {resource_label(doc)}",
                where,
                place(b.unit_key, doc),
            )
        return None
    return doc, target


def _binding_source(report: Report, spec: Doc, b: links.Binding, where: str) -> bool:
    """Whether the binding's source is a scalar in the profile (reported when not)."""
    if not paths.exists(spec, b.source):
        report.add(
            "binding-source",
            f"source spec.{b.source} does not exist in the platform profile",
            where,
            "render/platform-profile/profile.yaml spec",
        )
        return False
    try:
        links.profile_value(spec, b.source)
    except paths.PathError as exc:  # a list or map: the engine carries scalars only
        report.add(
            "binding-source",
            exc.message,
            where,
            "render/platform-profile/profile.yaml spec",
        )
        return False
    return True


def _check_placeholders(
    report: Report,
    units: dict[str, Docs],
    covered: dict[tuple[str, int, str], links.Binding],
) -> None:
    """Every placeholder in the units is written by a binding."""
    report.checks.append("placeholders")
    for unit_key, docs in sorted(units.items()):
        for doc in docs:
            for path in placeholder.scan(doc):
                report.placeholders += 1
                if (unit_key, id(doc), path) not in covered:
                    report.add(
                        "placeholder-unbound",
                        f"placeholder with no binding: nothing will ever resolve {path}",
                        place(unit_key, doc, path),
                        f"render/{unit_key.split('/')[0]}/links/bindings.yaml",
                    )


# Profile lists whose every item must reach a unit: an item left out changes what ships without
# a word (a fallback instance type the model has no slot for). Other lists may be bound in part
# (one zone of three for a single-zone resource).
# List -> the component whose bindings carry it.
WHOLE_LISTS = {"hyperpod.fallbackInstanceTypes": "hyperpod-inference"}


def _whole_lists(report: Report, spec: Doc, bound: list[links.Binding]) -> None:
    """Each item of a WHOLE_LISTS profile list is carried by a binding."""
    for prefix, component in WHOLE_LISTS.items():
        items = paths.get(spec, prefix) if paths.exists(spec, prefix) else None
        if not isinstance(items, list) or not any(b.component == component for b in bound):
            continue  # no such list, or the stack has no component that uses it
        seen = {
            int(rest)
            for b in bound
            if b.source.startswith(prefix + ".") and (rest := b.source[len(prefix) + 1 :]).isdigit()
        }
        unbound = [i for i in range(len(items)) if i not in seen]
        if unbound:
            where = f"render/{component}/links/bindings.yaml"
            report.add(
                "binding-list-partial",
                f"profile spec.{prefix} lists {len(items)} item(s), but no binding carries "
                f"item(s) {', '.join(map(str, unbound))} "
                f"({', '.join(repr(items[i]) for i in unbound)}): they would reach no unit",
                "render/platform-profile/profile.yaml spec",
                f"{where} (bind "
                f"spec.{prefix}.<n> for each item, giving the unit a field for it, or remove the "
                "item from the profile)",
            )
