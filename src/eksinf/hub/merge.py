"""Three-way merge of a unit's documents, for re-upload.

base = the content last uploaded from upstream, theirs = the new upload, ours = the unit's head
(which may carry downstream edits: function results, resolved link values). For each leaf,
whichever side moved away from base wins; when both moved differently, ours is kept and the path
is reported as a conflict, so a downstream edit is never silently lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eksinf.core.roundtrip import write_onto
from eksinf.core.types import Doc
from eksinf.core.yamlio import load_docs
from eksinf.model import paths

_MISSING = object()


@dataclass(frozen=True)
class MergeResult:
    text: str
    conflicts: tuple[str, ...]


def _doc_key(doc: Any, index: int) -> str:
    if not isinstance(doc, dict):
        return f"#{index}"
    meta = doc.get("metadata") or {}
    return f"{doc.get('apiVersion')}/{doc.get('kind')}/{meta.get('namespace') or ''}/{meta.get('name')}"


def _named(items: list[Any]) -> dict[str, Any] | None:
    """A list of maps with unique `name` keys is merged by name (containers, env, ports)."""
    if not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
        return None
    by_name = {i["name"]: i for i in items}
    return by_name if len(by_name) == len(items) else None


def _merge(base: Any, theirs: Any, ours: Any, where: str, conflicts: list[str]) -> Any:
    if ours == base:
        return theirs
    if theirs in (base, ours):
        return ours
    if isinstance(base, dict) and isinstance(theirs, dict) and isinstance(ours, dict):
        out: Doc = {}
        for key in list(theirs) + [k for k in ours if k not in theirs]:
            merged = _merge(
                base.get(key, _MISSING),
                theirs.get(key, _MISSING),
                ours.get(key, _MISSING),
                f"{where}.{paths.escape(str(key))}" if where else paths.escape(str(key)),
                conflicts,
            )
            if merged is not _MISSING:
                out[key] = merged
        return out
    if isinstance(base, list) and isinstance(theirs, list) and isinstance(ours, list):
        nb, nt, no = _named(base), _named(theirs), _named(ours)
        if nb is not None and nt is not None and no is not None:
            merged = _merge(nb, nt, no, where, conflicts)
            return list(merged.values())
        if len(base) == len(theirs) == len(ours):
            return [
                _merge(b, t, o, f"{where}.{i}", conflicts)
                for i, (b, t, o) in enumerate(zip(base, theirs, ours, strict=True))
            ]
    conflicts.append(where or "(document)")
    return ours


def merge_text(base: str, theirs: str, ours: str) -> MergeResult:
    """Merge unit texts. Fast paths keep the exact bytes of the side that won."""
    if ours == base or theirs == ours:
        return MergeResult(theirs, ())
    if theirs == base:
        return MergeResult(ours, ())
    keyed = []
    for text in (base, theirs, ours):
        docs = load_docs(text)
        keyed.append({_doc_key(d, i): d for i, d in enumerate(docs)})
    conflicts: list[str] = []
    merged = _merge(keyed[0], keyed[1], keyed[2], "", conflicts)
    # written in the new upload's layout: only the entries that carry a downstream edit (or a
    # conflict's kept side) are written again
    return MergeResult(write_onto(theirs, list(merged.values())), tuple(conflicts))
