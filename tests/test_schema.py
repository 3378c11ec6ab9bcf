"""eksinf's schema checker (model/schema.py) against jsonschema, the reference engine.

For components.yaml's, the profile's and the Argo CD Application's schemas, every valid
document below and thousands of broken ones (each field deleted or given a wrong value, extra
keys, then random combinations of those) get the same verdict and the same errors (place and
message) from both; jsonschema runs with the `pattern` every name rule uses (names.py:
ASCII only, `$` ends the string)."""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from eksinf.core.yamlio import load_docs, load_source
from eksinf.errors import EksinfError
from eksinf.model.names import schema_pattern
from eksinf.model.schema import ANNOTATIONS, KEYWORDS, Schema
from eksinf.publish import argo

REPO = Path(__file__).resolve().parent.parent
SCHEMAS = REPO / "src" / "eksinf" / "schemas"


def reference(schema: dict[str, Any]) -> Any:
    import jsonschema

    def pattern(validator: Any, regex: str, instance: Any, _schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "string") and not (
            instance.isascii() and schema_pattern(regex).search(instance)
        ):
            yield jsonschema.ValidationError(f"{instance!r} does not match {regex!r}")

    strict = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": pattern})
    return strict(schema)


def load(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / name).read_text(encoding="utf-8"))


def components_docs() -> list[Any]:
    full = load_source(REPO / "components.yaml")[0]
    keys: set[tuple[str, tuple[str, ...]]] = set()
    few = []  # the components that bring a field (or a chart, manifest or CRD field) not seen
    for comp in full["components"]:
        own = {(k, tuple(sorted(x))) for k in comp if isinstance(comp[k], list) for x in comp[k]}
        own |= {(k, ()) for k in comp}
        if own - keys:
            few.append(comp)
            keys |= own
    return [{"components": few}]


def profile_docs() -> list[Any]:
    doc = load_source(REPO / "render/platform-profile/profile.yaml")[0]
    more = copy.deepcopy(doc)
    more["metadata"]["labels"] = {"team": "a"}
    more["metadata"]["annotations"] = {"note": "b"}
    more["spec"]["externalServiceAccounts"] = ["monitoring/prometheus", "kube-system/x.y"]
    return [doc, more]


def application_docs() -> list[Any]:
    root = load_docs(argo.root_application("c1-argo-apps", "127.0.0.1:5000/hub"))[0]
    child = load_docs(
        argo.child_application("karpenter-dev", "r.example", namespace="x", ships_namespace=True)
    )[0]
    more = copy.deepcopy(child)
    more["metadata"]["labels"] = {"a": "b"}
    more["metadata"]["annotations"] = {"c": "d"}
    more["spec"]["source"]["chart"] = "c"
    more["spec"]["destination"]["name"] = "in-cluster"
    more["spec"]["syncPolicy"]["automated"]["enabled"] = True
    return [root, child, more]


CASES = {
    "components.schema.json": components_docs,
    "profile.schema.json": profile_docs,
    "argocd-application.schema.json": application_docs,
}


def nodes(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from nodes(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from nodes(item, (*path, index))


WRONG = [None, True, False, 0, 1, -1, 1.0, 2.5, "", "x", "é", [], ["x"], {}, {"k": "v"}]


def replacements(value: Any) -> list[Any]:
    out = list(WRONG)
    if isinstance(value, str):
        out += [value + "\n", "é" + value, value + "é", value.upper(), " " + value, value[:-1]]
        out += ["\u0456" + value[1:], value + "$"]  # a Cyrillic look-alike; a literal `$`
    elif isinstance(value, list):
        out += [value + value[:1], value + [None], value[:1] * 2, [*value, "a", "a"]]
    elif isinstance(value, bool):
        out += [1, 0, "true"]
    elif isinstance(value, int):
        out += [value - 1, -value - 1, float(value), value + 0.5, True]
    elif isinstance(value, dict):
        out += [{**value, "extra": 1}, {**value, "zz": "x", "extra": None}, {1: "one"}]
    return out


def edited(doc: Any, path: tuple[Any, ...], new: Any = None, delete: bool = False) -> Any:
    out = copy.deepcopy(doc)
    if not path:
        return new
    parent = out
    for part in path[:-1]:
        parent = parent[part]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return out


def mutants(doc: Any) -> Iterator[Any]:
    for path, value in list(nodes(doc)):
        if path:
            yield edited(doc, path, delete=True)
        for new in replacements(value):
            yield edited(doc, path, new)


def combined(doc: Any, count: int, seed: int) -> Iterator[Any]:
    """`count` documents with two to four edits each, the same on every run."""
    rng = random.Random(seed)
    for _ in range(count):
        out = doc
        for _ in range(rng.randint(2, 4)):
            found = list(nodes(out))
            path, value = rng.choice(found)
            choices = replacements(value)
            if path and rng.random() < 0.2:
                out = edited(out, path, delete=True)
            else:
                out = edited(out, path, rng.choice(choices))
        yield out


def agree(schema: Schema, ref: Any, doc: Any) -> bool:
    ours = sorted(((e.path, e.message) for e in schema.errors(doc)), key=repr)
    theirs = sorted(((tuple(e.absolute_path), e.message) for e in ref.iter_errors(doc)), key=repr)
    assert ours == theirs, doc
    first = schema.first_error(doc)
    assert (first is None) == (not theirs)
    return not theirs


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_checker_and_jsonschema_agree(name: str) -> None:
    raw = load(name)
    schema, ref = Schema(raw, name), reference(raw)
    verdicts = []
    for doc in CASES[name]():
        assert agree(schema, ref, doc)  # the base documents are valid
        verdicts += [agree(schema, ref, d) for d in mutants(doc)]
        verdicts += [agree(schema, ref, d) for d in combined(doc, 300, seed=len(verdicts))]
    assert verdicts.count(False) > 500  # most edits break the document...
    assert verdicts.count(True) > 20  # ...and some do not (a description, a label's value)


def test_edge_semantics_agree_with_jsonschema() -> None:
    """Draft 2020-12's corners: a bool is not an integer but 1.0 is; `true` is not `1` for
    const and uniqueItems; non-string keys; types as a list; an additionalProperties schema."""
    raw = {
        "type": "object",
        "properties": {
            "i": {"type": "integer", "minimum": 0},
            "n": {"type": "number", "minimum": 0.5},
            "c": {"const": True},
            "o": {"const": {"a": [1, "x"]}},
            "u": {"type": "array", "uniqueItems": True},
            "s": {"type": ["string", "null"], "minLength": 2, "pattern": "^[a-z]+$"},
        },
        "required": ["i"],
        "additionalProperties": {"type": "string", "minLength": 2},
    }
    schema, ref = Schema(raw, "edge"), reference(raw)
    values = [True, False, 0, 1, -1, 0.0, 1.0, -0.5, 0.25, 0.5, "", "a", "ab", "ab\n", None]
    values += [[1, True], [1, 1.0], [0, False], [{"a": 1}, {"a": 1}], [[1], [1]], ["a", "b"]]
    values += [{"a": [1, "x"]}, {"a": [True, "x"]}, {"a": [1.0, "x"]}, {"a": [1]}, [], {}]
    for key in ("i", "n", "c", "o", "u", "s", "extra", 7):
        for value in values:
            agree(schema, ref, {"i": 0, key: value})
    for doc in (None, [], "x", {}, {"i": 0, 1: "a", "b": "c"}):
        agree(schema, ref, doc)


def test_the_first_error_is_chosen_by_place_then_message() -> None:
    raw = load("components.schema.json")
    doc = {
        "components": [
            {"name": "a", "plane": "x", "order": 0, "render": "copy"},
            {"name": "B", "plane": "x", "order": "1", "render": "copy", "extra": 1},
        ]
        + [{"name": "c", "plane": "x", "order": 0, "render": "copy"}] * 8
        + [{"name": "d", "plane": 7, "order": 0, "render": "copy"}],
        "version": 2,
    }
    errors = Schema(raw, "components").errors(doc)
    assert [(e.json_path, e.message) for e in errors] == [
        ("(top level)", "Additional properties are not allowed ('version' was unexpected)"),
        ("components[1]", "Additional properties are not allowed ('extra' was unexpected)"),
        ("components[1].name", "'B' does not match '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'"),
        ("components[1].order", "'1' is not of type 'integer'"),
        ("components[10].plane", "7 is not of type 'string'"),  # after [1], not before [2]
    ]
    assert errors[3].dotted == "components.1.order"


def keywords(schema: Any) -> Iterator[str]:
    """Every keyword a schema uses, at any depth."""
    yield from schema
    for sub in schema.get("properties", {}).values():
        yield from keywords(sub)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from keywords(schema[key])


def test_every_shipped_schema_compiles_and_together_they_use_every_keyword() -> None:
    """The checker implements exactly what eksinf's schemas use: a keyword it lacks fails
    here (and when a schema is loaded), one no schema uses any more is dead code."""
    used: set[str] = set()
    for path in sorted(SCHEMAS.glob("*.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        Schema(raw, path.name)
        used |= set(keywords(raw))
    assert used - ANNOTATIONS == KEYWORDS


@pytest.mark.parametrize(
    ("schema", "refusal"),
    [
        ({"type": "string", "maxLength": 3}, "(top level): keyword(s) 'maxLength' not implemented"),
        (
            {"properties": {"a": {"items": {"format": "date"}}}},
            "properties/a/items: keyword(s) 'format' not implemented",
        ),
        ({"additionalProperties": {"$ref": "#/x"}}, "additionalProperties: keyword(s) '$ref'"),
        ({"$schema": "http://json-schema.org/draft-07/schema#"}, "$schema must be"),
        ({"type": "int"}, "type 'int' is not a JSON type"),
        ({"pattern": "("}, "pattern '('"),
        ({"minItems": True}, "minItems must be a non-negative integer"),
        ({"properties": {"a": True}}, "properties/a: a schema must be an object"),
    ],
)
def test_a_schema_the_checker_cannot_honour_is_refused_when_loaded(
    schema: dict[str, Any], refusal: str
) -> None:
    with pytest.raises(EksinfError) as info:
        Schema(schema, "new.schema.json")
    assert info.value.message.startswith("new.schema.json: ")
    assert refusal in info.value.message
    assert "model/schema.py" in info.value.hint


def test_loading_the_stack_and_its_profile_does_not_import_jsonschema(stack_dir: Path) -> None:
    """The ~40-60 ms import is left to validate and lint's add-on schemas."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from eksinf.aws.enroll import check_application, root_application\n"
        "from eksinf.model.profile import load_profile\n"
        "from eksinf.model.stack import load_stack\n"
        "load_profile(load_stack(Path(sys.argv[1])))\n"
        "check_application(root_application('c1', 'r.example', 'argocd'))\n"
        "print(sorted({'jsonschema', 'referencing'} & set(sys.modules)))\n"
    )
    env = {**os.environ, "EKSINF_NO_CACHE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", code, str(stack_dir)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[]\n"


def test_yaml_keys_reach_the_checker_as_written() -> None:
    """A YAML key that is not a string (`1:`) is named as it is, in place and message."""
    doc = yaml.safe_load("components:\n- {name: a, plane: x, order: 0, render: copy, 1: y}\n")
    (error,) = Schema(load("components.schema.json"), "c").errors(doc)
    assert error.json_path == "components[0]"
    assert error.message == "Additional properties are not allowed (1 was unexpected)"
