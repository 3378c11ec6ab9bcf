"""Field-level differences between two parsed documents, and CRD schema summaries.

Pure and bounded: the same two documents always give the same changes in the same order.
Lists of named items (containers by `name`, tags and requirements by `key`, IAM statements by
`Sid`) are matched by that name, so inserting a container reports one added container rather
than every later index as changed. JSON held in a string (IAM policy documents) is compared as
JSON, so a new action is one change, not a rewritten string.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from eksinf.core.types import Doc

# Keys that name the items of a list, tried in order; the first one every item has, with
# unique values, identifies them.
NAME_KEYS = ("name", "key", "Sid", "type")
MAX_DEPTH = 64  # deeper documents are compared as whole values below this depth
MAX_CHANGES = 500  # per resource: a rewrite beyond this is summarised, not listed
_PLAIN = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True)
class FieldChange:
    path: str
    op: str  # added | removed | changed
    old: Any = None
    new: Any = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "change": self.op}
        if self.op != "added":
            out["old"] = self.old
        if self.op != "removed":
            out["new"] = self.new
        return out


def key_segment(key: Any) -> str:
    """`.spec`, or `["nvidia.com/gpu"]` for keys a dot would make ambiguous."""
    text = str(key)
    return f".{text}" if _PLAIN.match(text) else f"[{json.dumps(text)}]"


def join(path: str, key: Any) -> str:
    seg = key_segment(key)
    return seg[1:] if not path and seg.startswith(".") else path + seg


def list_key(items: list[Any]) -> str | None:
    """The key that names every item of `items` uniquely, or None (compare by index)."""
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    for key in NAME_KEYS:
        values = [i.get(key) for i in items]
        if all(isinstance(v, str | int) for v in values) and len(set(values)) == len(values):
            return key
    return None


def _json_value(text: str) -> Any:
    """The parsed value when `text` is a JSON object (an IAM policy, a config blob), else None."""
    stripped = text.lstrip()
    if not stripped.startswith("{") or len(text) > 1_000_000:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def diff(old: Any, new: Any, path: str = "", depth: int = 0) -> list[FieldChange]:
    """Every difference between `old` and `new`, by field path, in document order."""
    out: list[FieldChange] = []
    _diff(old, new, path, depth, out)
    return out


def _diff(old: Any, new: Any, path: str, depth: int, out: list[FieldChange]) -> None:
    if old == new or len(out) > MAX_CHANGES:
        return
    if depth >= MAX_DEPTH:
        out.append(FieldChange(path, "changed", old, new))
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            sub = join(path, key)
            if key not in new:
                out.append(FieldChange(sub, "removed", old[key], None))
            else:
                _diff(old[key], new[key], sub, depth + 1, out)
        for key in new:
            if key not in old:
                out.append(FieldChange(join(path, key), "added", None, new[key]))
        return
    if isinstance(old, list) and isinstance(new, list):
        _diff_lists(old, new, path, depth, out)
        return
    if isinstance(old, str) and isinstance(new, str):
        old_json, new_json = _json_value(old), _json_value(new)
        if old_json is not None and new_json is not None:
            _diff(old_json, new_json, f"{path}(json)", depth + 1, out)
            return
    out.append(FieldChange(path, "changed", old, new))


def _diff_lists(
    old: list[Any], new: list[Any], path: str, depth: int, out: list[FieldChange]
) -> None:
    key = list_key(old)
    if key is not None and key == list_key(new):
        old_by = {item[key]: item for item in old}
        new_by = {item[key]: item for item in new}
        for name, item in old_by.items():
            sub = f"{path}[{key}={name}]"
            if name not in new_by:
                out.append(FieldChange(sub, "removed", item, None))
            else:
                _diff(item, new_by[name], sub, depth + 1, out)
        for name, item in new_by.items():
            if name not in old_by:
                out.append(FieldChange(f"{path}[{key}={name}]", "added", None, item))
        return
    if all(not isinstance(v, dict | list) for v in (*old, *new)):
        # a list of scalars (instance families, IAM actions, args) is one value
        out.append(FieldChange(path, "changed", old, new))
        return
    for index in range(max(len(old), len(new))):
        sub = f"{path}[{index}]"
        if index >= len(new):
            out.append(FieldChange(sub, "removed", old[index], None))
        elif index >= len(old):
            out.append(FieldChange(sub, "added", None, new[index]))
        else:
            _diff(old[index], new[index], sub, depth + 1, out)


# ---- CRD schemas ------------------------------------------------------------------------------

MAX_SCHEMA_FIELDS = 20_000


@dataclass(frozen=True)
class CrdSummary:
    """What a CRD change means for the objects it serves, instead of a schema dump."""

    versions_added: tuple[str, ...]
    versions_removed: tuple[str, ...]
    served: tuple[str, ...]  # "v1beta1: served true -> false"
    storage_before: tuple[str, ...]
    storage_after: tuple[str, ...]
    fields_added: tuple[str, ...]  # "v1: spec.foo"
    fields_removed: tuple[str, ...]
    fields_changed: int  # fields whose definition changed (type, description, validation, ...)

    @property
    def storage_changed(self) -> bool:
        return self.storage_before != self.storage_after

    def as_dict(self) -> dict[str, Any]:
        return {
            "versionsAdded": list(self.versions_added),
            "versionsRemoved": list(self.versions_removed),
            "served": list(self.served),
            "storageBefore": list(self.storage_before),
            "storageAfter": list(self.storage_after),
            "fieldsAdded": list(self.fields_added),
            "fieldsRemoved": list(self.fields_removed),
            "fieldsChanged": self.fields_changed,
        }


def _versions(doc: Doc) -> dict[str, Doc]:
    versions = (doc.get("spec") or {}).get("versions") or []
    return {v["name"]: v for v in versions if isinstance(v, dict) and "name" in v}


def schema_fields(schema: Any) -> dict[str, Any]:
    """Field path -> its definition without children, for every property of a schema."""
    out: dict[str, Any] = {}

    def walk(node: Any, path: str, depth: int) -> None:
        if not isinstance(node, dict) or depth > MAX_DEPTH or len(out) > MAX_SCHEMA_FIELDS:
            return
        for name, child in (node.get("properties") or {}).items():
            sub = join(path, name)
            if isinstance(child, dict):
                out[sub] = {k: v for k, v in child.items() if k not in _NESTED}
            walk(child, sub, depth + 1)
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]", depth + 1)
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}{{}}", depth + 1)

    walk(schema, "", 0)
    return out


_NESTED = ("properties", "items", "additionalProperties")


def crd_summary(old: Doc, new: Doc) -> CrdSummary:
    before, after = _versions(old), _versions(new)
    served = tuple(
        f"{name}: served {bool(before[name].get('served'))} -> {bool(after[name].get('served'))}"
        for name in before
        if name in after and bool(before[name].get("served")) != bool(after[name].get("served"))
    )
    added: list[str] = []
    removed: list[str] = []
    changed = 0
    for name in (n for n in after if n in before):
        old_fields = schema_fields(_schema_of(before[name]))
        new_fields = schema_fields(_schema_of(after[name]))
        added += [f"{name}: {f}" for f in new_fields if f not in old_fields]
        removed += [f"{name}: {f}" for f in old_fields if f not in new_fields]
        changed += sum(1 for f in new_fields if f in old_fields and new_fields[f] != old_fields[f])
    return CrdSummary(
        versions_added=tuple(n for n in after if n not in before),
        versions_removed=tuple(n for n in before if n not in after),
        served=served,
        storage_before=tuple(n for n, v in before.items() if v.get("storage")),
        storage_after=tuple(n for n, v in after.items() if v.get("storage")),
        fields_added=tuple(added),
        fields_removed=tuple(removed),
        fields_changed=changed,
    )


def crd_outline(doc: Doc) -> list[str]:
    """One line per version of an added or removed CRD: `v1: served, storage, 212 fields`."""
    out = []
    for name, version in _versions(doc).items():
        flags = [f for f in ("served", "storage") if version.get(f)]
        count = len(schema_fields(_schema_of(version)))
        out.append(f"{name}: {', '.join(flags) or 'not served'}, {count} schema fields")
    return out


def _schema_of(version: Doc) -> Any:
    return (version.get("schema") or {}).get("openAPIV3Schema")


def without_schemas(doc: Doc) -> Doc:
    """A CRD with its per-version schemas left out: the rest is diffed field by field."""
    spec = dict(doc.get("spec") or {})
    spec["versions"] = [
        {k: v for k, v in version.items() if k != "schema"}
        if isinstance(version, dict)
        else version
        for version in spec.get("versions") or []
    ]
    return {**doc, "spec": spec}
