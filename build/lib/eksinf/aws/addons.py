"""Recording EKS add-on configuration schemas: eks:DescribeAddonConfiguration for the version
each Addon unit pins, merged into the package's record (model/addons.py reads it for lint)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import CONTRACT, EksinfError
from ..model.addons import Records, SchemaRecord
from .contract.facts import AddonNeed
from .session import AWS_FAILURES, AwsSession, translate


@dataclass
class Refresh:
    records: Records  # the record as it is after the refresh
    added: list[str] = field(default_factory=list)  # "name version"
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def dirty(self) -> bool:
        return bool(self.added or self.changed)

    def as_json(self) -> dict[str, Any]:
        return {"added": self.added, "changed": self.changed, "unchanged": self.unchanged}


def refresh(
    session: AwsSession, region: str, addons: tuple[AddonNeed, ...], have: Records
) -> Refresh:
    """Ask EKS for the schema of every (add-on, pinned version) and merge the answers into
    `have`. A record whose schema EKS still returns keeps its source; nothing is dropped."""
    unpinned = [a.name for a in addons if a.version is None]
    if unpinned:
        raise EksinfError(
            f"add-on(s) without a pinned version: {', '.join(unpinned)}",
            hint="Pin each in the profile's addonVersions (eksinf lint: addon-version).",
            exit_code=CONTRACT,
        )
    eks = session.client("eks", region)
    out = Refresh(dict(have))
    for need in sorted(addons, key=lambda a: a.name):
        key = (need.name, str(need.version))
        try:
            answer = eks.describe_addon_configuration(
                addonName=need.name, addonVersion=need.version
            )
        except AWS_FAILURES as exc:
            what = f"eks describe-addon-configuration {need.name} {need.version}"
            raise translate(exc, what) from exc
        schema = answer.get("configurationSchema") or ""
        label = f"{need.name} {need.version}"
        old = have.get(key)
        if old is not None and old.schema == schema:
            out.unchanged.append(label)
            continue
        (out.changed if old else out.added).append(label)
        out.records[key] = SchemaRecord(
            need.name, str(need.version), schema, f"eks:DescribeAddonConfiguration in {region}"
        )
    return out
