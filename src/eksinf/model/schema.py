"""eksinf's own JSON Schemas (components.yaml, the platform profile, Argo CD Applications),
checked by a checker of eksinf's own.

Those schemas use a dozen Draft 2020-12 keywords; this module implements exactly those, with
Draft 2020-12's semantics, and reads `pattern` as every name rule is read (names.schema_pattern:
ASCII only, `$` is the end of the string). It exists so that loading a stack does not import
jsonschema (~40-60 ms with referencing, attrs and the bundled metaschemas) to check three small
schemas; jsonschema stays the engine for the Kubernetes and add-on schemas `validate` and `lint`
check. A schema using any other keyword is refused when it is compiled, so an edited schema
can never go silently unchecked. tests/test_schema.py checks the verdicts and errors against
jsonschema's on many valid and broken documents.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eksinf.errors import FAILURE, EksinfError
from eksinf.model.names import schema_pattern

DRAFT = "https://json-schema.org/draft/2020-12/schema"
# Keywords that only annotate: they never decide a verdict.
ANNOTATIONS = frozenset({"$schema", "$comment", "title", "description"})
# Every keyword that decides a verdict here; anything else in a schema is refused.
KEYWORDS = frozenset(
    {
        "additionalProperties",
        "const",
        "items",
        "minItems",
        "minLength",
        "minimum",
        "pattern",
        "properties",
        "required",
        "type",
        "uniqueItems",
    }
)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _integer(value: object) -> bool:
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, int) and not isinstance(value, bool)


# Draft 2020-12's types as JSON reads them: a bool is not a number, and 1.0 is an integer.
TYPES: dict[str, Callable[[object], bool]] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "number": _number,
    "integer": _integer,
}

_ABSENT: Any = object()
PathPart = str | int


@dataclass(frozen=True)
class SchemaError:
    """One way a document breaks a schema: where (keys and list indices from the top) and why,
    in jsonschema's words."""

    path: tuple[PathPart, ...]
    message: str

    @property
    def json_path(self) -> str:
        """`components[2].order`, or `(top level)`."""
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
        return out or "(top level)"

    @property
    def dotted(self) -> str:
        """`spec.availabilityZones.0`, or `(top level)`."""
        return ".".join(map(str, self.path)) or "(top level)"


def _order(error: SchemaError) -> tuple[tuple[tuple[int, Any], ...], str]:
    """Errors by place (keys as text, list indices as numbers, so [2] comes before [10]), then
    by message: the first one reported is the same on every run."""
    place = tuple((0, p) if type(p) is int else (1, str(p)) for p in error.path)
    return place, error.message


@dataclass
class _Node:
    types: tuple[str, ...] = ()
    const: Any = _ABSENT
    properties: dict[str, _Node] = field(default_factory=dict)
    additional: _Node | bool = True  # False: no other keys; a node: every other key's value
    required: tuple[str, ...] = ()
    items: _Node | None = None
    min_items: int | None = None
    min_length: int | None = None
    minimum: int | float | None = None
    pattern: str | None = None
    regex: re.Pattern[str] | None = None
    unique: bool = False


class Schema:
    """A compiled schema: `errors(doc)` lists every error, `first_error(doc)` the one to report."""

    def __init__(self, schema: Mapping[str, Any], name: str) -> None:
        self.name = name
        self._root = self._compile(schema, ())

    def _refuse(self, where: tuple[PathPart, ...], why: str) -> EksinfError:
        place = "/".join(map(str, where)) or "(top level)"
        return EksinfError(
            f"{self.name}: {place}: {why}",
            hint="eksinf checks its own schemas with model/schema.py, which implements "
            f"{', '.join(sorted(KEYWORDS))}: implement the keyword there (with cases in "
            "tests/test_schema.py), or write the rule with those.",
            exit_code=FAILURE,
        )

    def _compile(self, schema: object, where: tuple[PathPart, ...]) -> _Node:
        if not isinstance(schema, Mapping):
            raise self._refuse(where, "a schema must be an object")
        unknown = sorted(set(schema) - KEYWORDS - ANNOTATIONS)
        if unknown:
            raise self._refuse(
                where, f"keyword(s) {', '.join(map(repr, unknown))} not implemented by the checker"
            )
        if schema.get("$schema", DRAFT) != DRAFT:
            raise self._refuse(where, f"$schema must be {DRAFT}")
        node = _Node()
        if "type" in schema:
            types = schema["type"]
            node.types = (types,) if isinstance(types, str) else tuple(types)
            if not node.types or not all(t in TYPES for t in node.types):
                raise self._refuse(where, f"type {types!r} is not a JSON type")
        if "const" in schema:
            node.const = schema["const"]
        properties = schema.get("properties", {})
        if not isinstance(properties, Mapping):
            raise self._refuse(where, "properties must be an object")
        node.properties = {
            k: self._compile(v, (*where, "properties", k)) for k, v in properties.items()
        }
        additional = schema.get("additionalProperties", True)
        node.additional = (
            additional
            if isinstance(additional, bool)
            else self._compile(additional, (*where, "additionalProperties"))
        )
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(k, str) for k in required):
            raise self._refuse(where, "required must be a list of names")
        node.required = tuple(required)
        if "items" in schema:
            node.items = self._compile(schema["items"], (*where, "items"))
        for key, attr in (("minItems", "min_items"), ("minLength", "min_length")):
            if key in schema:
                value = schema[key]
                if type(value) is not int or value < 0:
                    raise self._refuse(where, f"{key} must be a non-negative integer")
                setattr(node, attr, value)
        if "minimum" in schema:
            if not _number(schema["minimum"]):
                raise self._refuse(where, "minimum must be a number")
            node.minimum = schema["minimum"]
        if "pattern" in schema:
            try:
                node.regex = schema_pattern(schema["pattern"])
            except (re.error, TypeError) as exc:
                raise self._refuse(where, f"pattern {schema['pattern']!r}: {exc}") from exc
            node.pattern = schema["pattern"]
        if "uniqueItems" in schema:
            if not isinstance(schema["uniqueItems"], bool):
                raise self._refuse(where, "uniqueItems must be true or false")
            node.unique = schema["uniqueItems"]
        return node

    def errors(self, doc: object) -> list[SchemaError]:
        """Every error in `doc`, first the one `first_error` reports."""
        found: list[SchemaError] = []
        _check(self._root, doc, (), found)
        return sorted(found, key=_order)

    def first_error(self, doc: object) -> SchemaError | None:
        found = self.errors(doc)
        return found[0] if found else None


def _check(node: _Node, value: Any, path: tuple[PathPart, ...], out: list[SchemaError]) -> None:
    """Each keyword on its own, as Draft 2020-12 applies them: a keyword about another type
    passes (`minLength` on a number), so a wrong type is one error, not several."""
    if node.types and not any(TYPES[t](value) for t in node.types):
        out.append(
            SchemaError(path, f"{value!r} is not of type {', '.join(map(repr, node.types))}")
        )
    if node.const is not _ABSENT and not _equal(value, node.const):
        out.append(SchemaError(path, f"{node.const!r} was expected"))
    if isinstance(value, dict):
        for key in node.required:
            if key not in value:
                out.append(SchemaError(path, f"{key!r} is a required property"))
        for key, sub in node.properties.items():
            if key in value:
                _check(sub, value[key], (*path, key), out)
        extras = [key for key in value if key not in node.properties]
        if extras and node.additional is False:
            shown = ", ".join(repr(key) for key in sorted(extras, key=str))
            verb = "was" if len(extras) == 1 else "were"
            out.append(
                SchemaError(
                    path, f"Additional properties are not allowed ({shown} {verb} unexpected)"
                )
            )
        elif isinstance(node.additional, _Node):
            for key in extras:
                _check(node.additional, value[key], (*path, key), out)
    elif isinstance(value, list):
        if node.min_items is not None and len(value) < node.min_items:
            out.append(SchemaError(path, f"{value!r} {_too_short(node.min_items)}"))
        if node.unique and not _unique(value):
            out.append(SchemaError(path, f"{value!r} has non-unique elements"))
        if node.items is not None:
            for index, item in enumerate(value):
                _check(node.items, item, (*path, index), out)
    elif isinstance(value, str):
        if node.min_length is not None and len(value) < node.min_length:
            out.append(SchemaError(path, f"{value!r} {_too_short(node.min_length)}"))
        if node.regex is not None and not (value.isascii() and node.regex.search(value)):
            out.append(SchemaError(path, f"{value!r} does not match {node.pattern!r}"))
    elif node.minimum is not None and _number(value) and value < node.minimum:
        out.append(SchemaError(path, f"{value!r} is less than the minimum of {node.minimum!r}"))


def _too_short(minimum: int) -> str:
    return "should be non-empty" if minimum == 1 else "is too short"


def _equal(one: object, two: object) -> bool:
    """JSON equality: `true` is not `1` (Python's bool is an int), at any depth; 1 is 1.0."""
    if isinstance(one, bool) or isinstance(two, bool):
        return type(one) is type(two) and one == two
    if isinstance(one, str) or isinstance(two, str):
        return one == two
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(map(_equal, one, two))
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(_equal(v, two[k]) for k, v in one.items())
    if isinstance(one, (list, dict)) or isinstance(two, (list, dict)):
        return False
    return one == two


def _unique(items: list[Any]) -> bool:
    return not any(_equal(a, b) for i, a in enumerate(items) for b in items[i + 1 :])
