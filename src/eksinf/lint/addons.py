"""Add-on checks: what keeps an EKS add-on from drifting away from its unit."""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import EksinfError
from ..model.addons import load_records, parse_values, value_errors
from ..model.checks import Finding
from ..model.configs import of_kind
from ..model.placeholder import PLACEHOLDER
from .core import Context, check, found

# CreateAddon/UpdateAddon resolveConflicts: OVERWRITE puts the unit's values back over hand
# edits, PRESERVE keeps them knowingly; NONE leaves a conflicting field as it is and the call
# may fail, so the add-on silently stops following its unit.
DELIBERATE = ("OVERWRITE", "PRESERVE")


@check("addon-conflicts")
def check_addon_conflicts(ctx: Context) -> Iterator[Finding]:
    """Every EKS Addon sets resolveConflicts deliberately (OVERWRITE or PRESERVE), never NONE
    or unset: otherwise a hand-edited field wins and the add-on drifts from its unit."""
    for addon in of_kind(ctx.resources, "Addon", "eks.services.k8s.aws"):
        value = addon.spec.get("resolveConflicts")
        if value in DELIBERATE:
            continue
        said = "is unset" if value is None else f"is {value!r}"
        yield found(
            f"add-on {addon.spec.get('name')!r}: resolveConflicts {said}; set OVERWRITE (the "
            "unit wins over hand edits) or PRESERVE (keep them, knowingly): with NONE EKS "
            "leaves a conflicting field as it is and the add-on drifts from its unit",
            addon.at("spec.resolveConflicts"),
        )


@check("addon-version")
def check_addon_version(ctx: Context) -> Iterator[Finding]:
    """Every EKS Addon pins addonVersion (linked from the profile's addonVersions): unset, EKS
    installs its default for the cluster version, which moves under the stack."""
    for addon in of_kind(ctx.resources, "Addon", "eks.services.k8s.aws"):
        name = addon.spec.get("name")
        if addon.spec.get("addonVersion"):
            continue
        yield found(
            f"add-on {name!r}: addonVersion is unset, so EKS picks its default for the cluster "
            f"version and the add-on changes under the stack; add `addonVersion: "
            f"{PLACEHOLDER}` and bind it to the profile's addonVersions.{name} "
            "(links/bindings.yaml)",
            addon.at("spec.addonVersion"),
        )


@check("addon-configuration")
def check_addon_configuration(ctx: Context) -> Iterator[Finding]:
    """An Addon's configurationValues parse and satisfy the add-on's configuration schema for
    its pinned version, as recorded from eks:DescribeAddonConfiguration
    (src/eksinf/data/addon-schemas.json); values for a version with no record are refused,
    since they cannot be checked."""
    addons = [
        a
        for a in of_kind(ctx.resources, "Addon", "eks.services.k8s.aws")
        if a.spec.get("configurationValues") not in (None, "")
    ]
    if not addons:
        return
    records = load_records()
    for addon in addons:
        name, version = addon.spec.get("name"), addon.spec.get("addonVersion")
        place = addon.at("spec.configurationValues")
        try:
            values = parse_values(addon.spec["configurationValues"], place)
        except EksinfError as exc:
            yield found(f"add-on {name!r}: {exc.message}", place)
            continue
        record = records.get((str(name), str(version)))
        if record is None:
            yield found(
                f"add-on {name!r} {version}: no configuration schema recorded for this version, "
                "so its configurationValues cannot be checked; record it with `eksinf "
                "addon-schemas refresh` (eks:DescribeAddonConfiguration), or drop the values",
                place,
            )
            continue
        for problem in value_errors(record.schema, values):
            yield found(
                f"add-on {name!r} {version}: configurationValues {problem} (schema from "
                f"{record.source})",
                place,
            )
