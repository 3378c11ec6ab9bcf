"""Add-on checks: what keeps an EKS add-on from drifting away from its unit."""

from __future__ import annotations

from ..model.configs import of_kind
from .core import Context, Report, check

# CreateAddon/UpdateAddon resolveConflicts: OVERWRITE puts the unit's values back over hand
# edits, PRESERVE keeps them knowingly; NONE leaves a conflicting field as it is and the call
# may fail, so the add-on silently stops following its unit.
DELIBERATE = ("OVERWRITE", "PRESERVE")


@check("addon-conflicts")
def check_addon_conflicts(report: Report, ctx: Context) -> None:
    """Every EKS Addon sets resolveConflicts deliberately (OVERWRITE or PRESERVE), never NONE
    or unset: otherwise a hand-edited field wins and the add-on drifts from its unit."""
    for addon in of_kind(ctx.resources, "Addon", "eks.services.k8s.aws"):
        value = addon.spec.get("resolveConflicts")
        if value in DELIBERATE:
            continue
        said = "is unset" if value is None else f"is {value!r}"
        report.add(
            "addon-conflicts",
            f"add-on {addon.spec.get('name')!r}: resolveConflicts {said}; set OVERWRITE (the "
            "unit wins over hand edits) or PRESERVE (keep them, knowingly): with NONE EKS "
            "leaves a conflicting field as it is and the add-on drifts from its unit",
            addon.at("spec.resolveConflicts"),
        )
