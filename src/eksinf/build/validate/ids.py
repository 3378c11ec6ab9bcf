"""One object per resource id in a plane.

A plane's units are applied to one cluster. Two documents with the same id (API group, kind,
namespace, name) are one object written twice: Flux's kustomization refuses the second
("may not add resource with an already registered id"), Argo CD warns and applies whichever
comes last, `kubectl apply` silently lets the later overwrite the earlier.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from eksinf.core.types import Doc
from eksinf.model.resources import api_group


@dataclass(frozen=True)
class ResourceId:
    group: str  # "" for the core group
    kind: str
    namespace: str  # "" when cluster-scoped or left to the consumer
    name: str

    def __str__(self) -> str:
        group = f".{self.group}" if self.group else ""
        ns = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind}{group} {ns}{self.name}"


@dataclass(frozen=True)
class Duplicate:
    plane: str
    id: ResourceId
    places: tuple[str, ...]  # every unit that holds it, in input order

    @property
    def message(self) -> str:
        return f"{self.id} appears {len(self.places)} times in plane {self.plane}: " + ", ".join(
            self.places
        )


def resource_id(doc: Doc) -> ResourceId:
    api = str(doc.get("apiVersion") or "")
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return ResourceId(
        api_group(api),
        str(doc.get("kind") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def duplicates(resources: Iterable[tuple[str, str, Doc]]) -> list[Duplicate]:
    """(plane, place, document) triples -> every id held more than once within a plane."""
    seen: dict[tuple[str, ResourceId], list[str]] = {}
    for plane, where, doc in resources:
        if isinstance(doc, dict) and doc.get("kind"):
            seen.setdefault((plane, resource_id(doc)), []).append(where)
    return [
        Duplicate(plane, rid, tuple(places))
        for (plane, rid), places in seen.items()
        if len(places) > 1
    ]
