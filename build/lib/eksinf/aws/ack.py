"""The ACK objects the mgmt plane owns, read from configs/, and what their status records.

Shared by teardown (what to delete, in which order) and by status and teardown's account check
(the account ACK built the stack in, from each object's `status.ackResourceMetadata`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..kube.client import KubeClient, ResourceRef, resource_path
from ..model.configs import ACK_GROUP_SUFFIX, read_units, resources


@dataclass(frozen=True)
class AckObject:
    api_version: str
    kind: str
    namespace: str
    name: str
    wave: int

    @property
    def path(self) -> ResourceRef:
        return resource_path(self.api_version, self.kind, self.namespace, self.name)

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def ack_objects(configs: Path, components: list[str]) -> list[AckObject]:
    """ACK objects of the given mgmt components, in deletion order: highest sync wave first
    (dependents before what they depend on), then kind and name for a stable order."""
    found = [
        AckObject(r.api_version, r.kind, r.namespace or "", r.name, r.wave)
        for r in resources(read_units(configs, components))
        if r.group.endswith(ACK_GROUP_SUFFIX)
    ]
    return sorted(found, key=lambda o: (-o.wave, o.kind, o.name))


def ack_accounts(kube: KubeClient, objects: list[AckObject]) -> dict[str, list[str]]:
    """The AWS account each existing ACK object was built in (from its status), by account."""
    found: dict[str, list[str]] = {}
    for obj in objects:
        live = kube.get(obj.path)
        meta = ((live or {}).get("status") or {}).get("ackResourceMetadata") or {}
        account = str(meta.get("ownerAccountID") or "")
        if not account and meta.get("arn"):
            parts = str(meta["arn"]).split(":")
            account = parts[4] if len(parts) > 4 else ""
        if account:
            found.setdefault(account, []).append(obj.label)
    return found
