"""A custom resource against its CRD's openAPIV3Schema, as the API server admits it on create.

The order is the server's (k8s.io/apiextensions-apiserver): nulls of non-nullable fields are
dropped, defaults are applied, unknown fields are found (server-side apply refuses them; a plain
create prunes them with only a warning), then the value validations (type, int-or-string, required, enum,
pattern, bounds, lengths, formats, list types, allOf/anyOf/oneOf/not) and each node's
`x-kubernetes-validations` CEL rules run.

Pure: `check` takes a schema and a document and returns what it found; the document is copied
before defaults are written into it.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from eksinf.core.types import Doc
from eksinf.model import paths
from eksinf.model.names import name_rule, schema_pattern
from eksinf.model.placeholder import is_placeholder, scan

UNKNOWN = (
    "field not declared in schema: server-side apply refuses it (a plain create drops it with "
    "a warning)"
)

INVALID, UNRESOLVED, NOT_EVALUATED = "invalid", "unresolved", "not-evaluated"
MAX_DEPTH = 64  # bound every walk: no Kubernetes object in the stack nests half as deep
FieldPath = tuple[paths.Segment, ...]  # a field's path parts, as paths.format_path joins them


@dataclass(frozen=True)
class Violation:
    status: str  # invalid | unresolved | not-evaluated
    path: str  # paths.py grammar, e.g. spec.template.spec.requirements.0.key
    rule: (
        str  # which rule: `type: integer`, `enum`, `pattern ^...$`, `x-kubernetes-validations: ...`
    )
    value: Any
    message: str = ""


@dataclass
class Result:
    violations: list[Violation] = field(default_factory=list)
    rules_evaluated: int = 0
    transition_rules: int = 0  # rules that read oldSelf: update only, skipped on create


# A CEL evaluator: (rule text, value) -> (status "pass"|"fail"|"not-evaluated"|"transition", detail)
Evaluate = Callable[[str, Any], tuple[str, str]]

_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_HOSTNAME = name_rule(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DURATION = re.compile(r"^([+-]?(\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))+$|^0$")


def _ok(check: Callable[[str], Any]) -> Callable[[Any], bool]:
    def run(value: Any) -> bool:
        try:
            check(value)
        except (ValueError, TypeError):
            return False
        return True

    return run


def _date_time(value: str) -> None:
    if not _DATE_TIME.match(value):
        raise ValueError(value)
    datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00").replace(" ", "T"))


# The formats the API server checks (apiextensions-apiserver's supported formats); others pass.
_FORMATS: dict[str, Callable[[Any], bool]] = {
    "int32": lambda v: not isinstance(v, int) or -(2**31) <= v < 2**31,
    "int64": lambda v: not isinstance(v, int) or -(2**63) <= v < 2**63,
    "byte": lambda v: (
        not isinstance(v, str) or _ok(lambda s: base64.b64decode(s, validate=True))(v)
    ),
    "date": lambda v: not isinstance(v, str) or _ok(lambda s: datetime.strptime(s, "%Y-%m-%d"))(v),
    "date-time": lambda v: not isinstance(v, str) or _ok(_date_time)(v),
    "duration": lambda v: not isinstance(v, str) or bool(_DURATION.match(v)),
    "uuid": lambda v: not isinstance(v, str) or _ok(uuid.UUID)(v),
    "ipv4": lambda v: not isinstance(v, str) or _ok(ipaddress.IPv4Address)(v),
    "ipv6": lambda v: not isinstance(v, str) or _ok(ipaddress.IPv6Address)(v),
    "cidr": lambda v: (
        not isinstance(v, str) or _ok(lambda s: ipaddress.ip_network(s, strict=False))(v)
    ),
    "hostname": lambda v: not isinstance(v, str) or (len(v) <= 253 and bool(_HOSTNAME.match(v))),
}


def _key(path: FieldPath) -> str:
    return paths.format_path(list(path))


def has_placeholder(node: Any) -> bool:
    return any(True for _ in scan(node))


class _Checker:
    def __init__(self, evaluate: Evaluate) -> None:
        self.evaluate = evaluate
        self.result = Result()

    def add(self, status: str, path: FieldPath, rule: str, value: Any, message: str = "") -> None:
        self.result.violations.append(Violation(status, _key(path), rule, value, message))

    # -- defaulting and pruning -------------------------------------------------------------

    def prepare(self, schema: Doc, value: Any, depth: int = 0) -> Any:
        """Drop nulls of non-nullable fields and apply defaults, depth first (server order)."""
        if depth > MAX_DEPTH:
            return value  # check() reports the nesting
        depth += 1
        if isinstance(value, dict) and schema.get("properties") is not None:
            props = schema["properties"]
            for key in list(value):
                sub = props.get(key)
                if value[key] is None and sub is not None and not sub.get("nullable"):
                    del value[key]
            for key, sub in props.items():
                if key not in value and "default" in sub:
                    value[key] = copy.deepcopy(sub["default"])
            for key, sub in props.items():
                if key in value:
                    value[key] = self.prepare(sub, value[key], depth)
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict):
                for key in value:
                    if key not in props:
                        value[key] = self.prepare(extra, value[key], depth)
        elif isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
            for key in value:
                value[key] = self.prepare(schema["additionalProperties"], value[key], depth)
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            value[:] = [self.prepare(schema["items"], item, depth) for item in value]
        return value

    # -- validation -------------------------------------------------------------------------

    def check(self, schema: Doc, value: Any, path: FieldPath) -> None:
        if is_placeholder(value):
            return  # the caller reports every placeholder (unresolved, or invalid where unbound)
        if len(path) > MAX_DEPTH:
            self.add(INVALID, path, f"depth <= {MAX_DEPTH}", "...", "the object nests too deeply")
            return
        if value is None:
            if not schema.get("nullable"):
                self.add(INVALID, path, "nullable: false", value, "null is not allowed")
            return
        if schema.get("x-kubernetes-int-or-string"):
            if not (_TYPES["integer"](value) or isinstance(value, str)):
                self.add(
                    INVALID,
                    path,
                    "x-kubernetes-int-or-string",
                    value,
                    "must be an integer or a string",
                )
                return
        elif "type" in schema and not _TYPES.get(schema["type"], lambda _v: True)(value):
            self.add(
                INVALID, path, f"type: {schema['type']}", value, f"must be of type {schema['type']}"
            )
            return
        self.values(schema, value, path)
        if isinstance(value, dict):
            self.object(schema, value, path)
        elif isinstance(value, list):
            self.array(schema, value, path)
        self.cel(schema, value, path)

    def values(self, schema: Doc, value: Any, path: FieldPath) -> None:
        def bad(rule: str, message: str) -> None:
            self.add(INVALID, path, rule, value, message)

        if "enum" in schema and value not in schema["enum"]:
            bad("enum", "must be one of " + ", ".join(repr(v) for v in schema["enum"]))
        if isinstance(value, str):
            length = len(value)
            if "maxLength" in schema and length > schema["maxLength"]:
                bad(f"maxLength: {schema['maxLength']}", f"is {length} characters long")
            if "minLength" in schema and length < schema["minLength"]:
                bad(f"minLength: {schema['minLength']}", f"is {length} characters long")
            if "pattern" in schema and not schema_pattern(schema["pattern"]).search(value):
                bad(f"pattern: {schema['pattern']}", "does not match the pattern")
        if _TYPES["number"](value):
            if "maximum" in schema:
                over = (
                    value >= schema["maximum"]
                    if schema.get("exclusiveMaximum")
                    else value > schema["maximum"]
                )
                if over:
                    bad(f"maximum: {schema['maximum']}", "is above the maximum")
            if "minimum" in schema:
                under = (
                    value <= schema["minimum"]
                    if schema.get("exclusiveMinimum")
                    else value < schema["minimum"]
                )
                if under:
                    bad(f"minimum: {schema['minimum']}", "is below the minimum")
            if schema.get("multipleOf") and value % schema["multipleOf"]:
                bad(f"multipleOf: {schema['multipleOf']}", "is not a multiple")
        fmt = schema.get("format")
        if fmt in _FORMATS and not _FORMATS[fmt](value):
            bad(f"format: {fmt}", f"is not a valid {fmt}")
        for keyword in ("allOf", "anyOf", "oneOf", "not"):
            if keyword in schema:
                self.combinator(keyword, schema[keyword], value, path)

    def combinator(self, keyword: str, subs: Any, value: Any, path: FieldPath) -> None:
        def passes(sub: Doc) -> bool:
            probe = _Checker(lambda _r, _v: ("pass", ""))
            probe.values(sub, value, path)
            if "type" in sub and not _TYPES.get(sub["type"], lambda _v: True)(value):
                return False
            if isinstance(value, dict):
                missing = [k for k in sub.get("required") or [] if k not in value]
                if missing:
                    return False
            return not any(v.status == INVALID for v in probe.result.violations)

        if keyword == "not":
            if passes(subs):
                self.add(INVALID, path, "not", value, "matches a schema it must not")
            return
        matched = sum(passes(sub) for sub in subs)
        if keyword == "allOf" and matched != len(subs):
            self.add(INVALID, path, "allOf", value, "does not match every schema of allOf")
        elif keyword == "anyOf" and not matched:
            self.add(INVALID, path, "anyOf", value, "matches none of anyOf")
        elif keyword == "oneOf" and matched != 1:
            self.add(INVALID, path, "oneOf", value, f"matches {matched} schemas of oneOf, not one")

    def object(self, schema: Doc, value: Doc, path: FieldPath) -> None:
        for key in schema.get("required") or []:
            if key not in value:
                self.add(INVALID, (*path, key), "required", None, "required field is missing")
        for bound, word in (("maxProperties", "at most"), ("minProperties", "at least")):
            if bound in schema:
                limit = schema[bound]
                if (len(value) > limit) if bound == "maxProperties" else (len(value) < limit):
                    self.add(
                        INVALID,
                        path,
                        f"{bound}: {limit}",
                        value,
                        f"must have {word} {limit} properties",
                    )
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields") or extra is True
        embedded = schema.get("x-kubernetes-embedded-resource")
        for key, item in value.items():
            if key in props:
                self.check(props[key], item, (*path, key))
            elif isinstance(extra, dict):
                self.check(extra, item, (*path, key))
            elif embedded and key in ("apiVersion", "kind", "metadata"):
                continue
            elif not preserve:
                self.add(
                    INVALID,
                    (*path, key),
                    "unknown field",
                    item,
                    UNKNOWN,
                )

    def array(self, schema: Doc, value: list[Any], path: FieldPath) -> None:
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            self.add(INVALID, path, f"maxItems: {schema['maxItems']}", len(value), "too many items")
        if "minItems" in schema and len(value) < schema["minItems"]:
            self.add(INVALID, path, f"minItems: {schema['minItems']}", len(value), "too few items")
        items = schema.get("items")
        if isinstance(items, dict):
            for index, item in enumerate(value):
                self.check(items, item, (*path, index))
        list_type = schema.get("x-kubernetes-list-type")
        if list_type == "set" or schema.get("uniqueItems"):
            seen: list[Any] = []
            for index, item in enumerate(value):
                if item in seen:
                    self.add(
                        INVALID,
                        (*path, index),
                        f"x-kubernetes-list-type: {list_type or 'set'}",
                        item,
                        "duplicate item",
                    )
                seen.append(item)
        elif list_type == "map":
            keys = schema.get("x-kubernetes-list-map-keys") or []
            seen_keys: list[tuple[Any, ...]] = []
            for index, item in enumerate(value):
                if not isinstance(item, dict):
                    continue
                ident = tuple(item.get(k) for k in keys)
                if ident in seen_keys:
                    self.add(
                        INVALID,
                        (*path, index),
                        f"x-kubernetes-list-type: map (keys {', '.join(keys)})",
                        dict(zip(keys, ident, strict=True)),
                        "duplicate map key",
                    )
                seen_keys.append(ident)

    def cel(self, schema: Doc, value: Any, path: FieldPath) -> None:
        for entry in schema.get("x-kubernetes-validations") or []:
            rule = entry.get("rule", "")
            status, detail = self.evaluate(rule, value)
            if status == "transition":
                self.result.transition_rules += 1
                continue
            if status == "not-evaluated":
                self.add(NOT_EVALUATED, path, f"x-kubernetes-validations: {rule}", value, detail)
                continue
            self.result.rules_evaluated += 1
            if status == "pass":
                continue
            where = path
            if entry.get("fieldPath"):
                where = (*path, *paths.parse(entry["fieldPath"].lstrip(".")))
            message = entry.get("message") or detail or "the rule evaluated to false"
            if detail and entry.get("message"):
                message += f" ({detail})"
            state = UNRESOLVED if has_placeholder(value) else INVALID
            self.add(state, where, f"x-kubernetes-validations: {rule}", value, message)


def check(schema: Doc, doc: Doc, evaluate: Evaluate) -> Result:
    """Validate a custom resource (apiVersion, kind and metadata are the server's, not the
    schema's: they are checked by validate.meta). Placeholder values are skipped: the caller
    reports them."""
    checker = _Checker(evaluate)
    body = copy.deepcopy(
        {k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata")}
    )
    root = {
        **schema,
        "properties": {
            k: v
            for k, v in (schema.get("properties") or {}).items()
            if k not in ("apiVersion", "kind", "metadata")
        },
    }
    root.pop("required", None)
    required = [
        k for k in schema.get("required") or [] if k not in ("apiVersion", "kind", "metadata")
    ]
    if required:
        root["required"] = required
    checker.prepare(root, body)
    checker.check(root, body, ())
    return checker.result
