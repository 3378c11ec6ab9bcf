"""The strict reader (`yamlio.load_source`) builds documents straight from libyaml's node tree,
and leaves to PyYAML's constructor what that cannot build: it gives exactly the constructor's
documents, types included, or exactly its error.

Proved on every YAML source of the repository's stack and on snippets built for each way out of
the quick build (merge keys, keys that collide as JSON keys, scalars the constructor refuses,
unhashable keys), placed where the quick build meets them before the constructor would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eksinf.core import yamlio
from eksinf.errors import EksinfError

ROOT = Path(__file__).resolve().parent.parent


def _by_constructor(text: str, *, aliases: bool = True, ambiguous: bool = True) -> list[Any]:
    """What the strict reader gave when PyYAML's constructor built every document."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            yamlio,
            "_construct_strict",
            lambda loader, node, name: loader.construct_document(node),
        )
        return _read(text, aliases=aliases, ambiguous=ambiguous)


def _read(text: str, *, aliases: bool = True, ambiguous: bool = True) -> Any:
    """The documents, or the error's message and hint."""
    try:
        return yamlio._load_source(text, "t.yaml", aliases, ambiguous)
    except EksinfError as exc:
        return ("error", exc.message, exc.hint)


def _typed(value: Any) -> Any:
    """`value` with each scalar's type beside it: 1, 1.0 and True compare equal in Python."""
    if isinstance(value, dict):
        return {(type(k).__name__, k): _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_typed(v) for v in value)
    return (type(value).__name__, value)


def _same(text: str, **kw: bool) -> Any:
    quick, slow = _read(text, **kw), _by_constructor(text, **kw)
    assert _typed(quick) == _typed(slow), text
    return quick


def test_every_yaml_source_of_the_stack_reads_the_same():
    sources = [ROOT / "components.yaml", ROOT / "charts.lock"]
    sources += sorted((ROOT / "render").rglob("*.yaml")) + sorted(
        (ROOT / "render").rglob("*.allow")
    )
    assert len(sources) > 20
    for path in sources:
        docs = _same(path.read_text())
        assert docs and docs[0] != "error", path
    for path in sorted((ROOT / "render").glob("*/*.yaml")):  # units: no anchors, no ambiguity
        _same(path.read_text(), aliases=False, ambiguous=False)


SNIPPETS = [
    # documents, empty ones, scalars of every kind Kubernetes reads
    "a: 1\nb: 1.5\nc: true\nd: null\ne: '1'\nf: n\ng: 0x10\nh: 1e3\ni: ~\n---\n---\n- x\n- 2\n",
    # aliases: one object, seen twice
    "base: &b {x: 1, y: [1, 2]}\nuse: *b\nlist: &l [a, b]\nagain: *l\n",
    # merge keys go to the constructor
    "base: &b {x: 1}\nuse:\n  <<: *b\n  y: 2\n",
    "a:\n  b:\n    c: 1\n    <<: {d: 2}\n",
    # keys that collide as JSON keys, nested, some after a scalar the constructor refuses
    "a: 1\na: 2\n",
    "top:\n  on: 1\n  true: 2\n",
    "top:\n  x: !!int abc\ny: 1\ny: 2\n",
    "top:\n  16: a\n  0x10: b\n",
    "k:\n  '1': a\n  1: b\n",
    "k:\n  1: a\n  1.0: b\n",
    # keys that are not text but do not collide
    "1: a\n2: b\ntrue: c\n~: d\n1.5: e\n",
    # scalars the constructor refuses, deep in a document
    "a:\n  b:\n  - c: !!int abc\n",
    "a: !!bool maybe\n",
    "a: !!float 1\nb: !!int '7'\nc: !!str 5\n",
    # keys the quick build cannot hash
    "? [a, b]\n: c\n",
    "? {a: 1}\n: c\n",
    "x:\n  ? [1]\n  : y\n",
]


@pytest.mark.parametrize("text", SNIPPETS)
def test_each_way_out_of_the_quick_build_reads_as_the_constructor_reads(text: str):
    _same(text)


def test_a_duplicate_is_named_by_its_two_places_after_a_value_that_is_built_first():
    # the quick build meets `!!int abc` in `top` before the duplicate `y` of the outer mapping;
    # the constructor checks a mapping's keys before its values, and so still does
    found = _same("top:\n  x: !!int abc\ny: 1\ny: 2\n")
    assert found[0] == "error"
    assert found[1] == 't.yaml:4:1: duplicate key "y", first defined at t.yaml:3:1'


def test_units_refuse_anchors_and_ambiguous_scalars_as_before():
    for text in ("a: &x 1\nb: *x\n", "a: y\n", "a: 0755\n"):
        found = _same(text, aliases=False, ambiguous=False)
        assert found[0] == "error"
