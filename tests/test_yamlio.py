"""yamlio: the fast reader agrees with the standard constructor; the strict reader's errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from eksinf import yamlio
from eksinf.errors import CONTRACT, EksinfError

TRICKY = """\
a: &shared {k: 1}
b: *shared
c: {<<: *shared, d: 2}
---
---
list: &l [1, 2]
again: *l
flags: [yes, no, on, off, true]
date: 2024-01-01
float: 1.5
none: ~
int: 0x1F
text: |
  two
  lines
"""


def standard(text: str) -> list:
    return [d for d in yaml.load_all(text, Loader=yamlio._Loader) if d is not None]


def test_fast_reader_equals_the_standard_constructor():
    docs = yamlio.load_docs(TRICKY)
    assert docs == standard(TRICKY)
    assert docs[0]["c"] == {"k": 1, "d": 2}  # merge keys honoured
    assert docs[1]["list"] is docs[1]["again"]  # aliases stay one object, as before
    assert docs[1]["date"] == "2024-01-01"  # dates stay text
    assert yamlio.dump_docs(docs) == yamlio.dump_docs(standard(TRICKY))


def test_fast_reader_on_the_committed_configs():
    from conftest import REPO

    for path in sorted((REPO / "configs").rglob("*.yaml")):
        text = path.read_text()
        assert yamlio.load_docs(text) == standard(text), path


def test_dump_is_deterministic_and_keeps_key_order():
    doc = {"z": 1, "a": {"text": "x\ny\n", "n": None}, "list": ["b", "a"]}
    first = yamlio.dump_docs([doc, doc])
    assert first == yamlio.dump_docs([doc, doc])
    assert first.startswith("---\nz: 1\na:\n  text: |\n    x\n    y\n")
    assert first.count("\n---\n") == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a:\n  b: 1\n  b: 2\n", 'x.yaml:3:3: duplicate key "b", first defined at x.yaml:2:3'),
        ("a: 1\n\tb: 2\n", "x.yaml:2:1: tab character in indentation"),
        ("a: [\n", "x.yaml:2:1: YAML syntax error"),
        ("a: !!python/object:os.system x\n", "x.yaml:1:4: YAML syntax error: could not determine"),
    ],
    ids=["duplicate-key", "tab", "syntax", "unsafe-tag"],
)
def test_strict_reader_errors(text, message):
    with pytest.raises(EksinfError) as err:
        yamlio.load_source(Path("x.yaml"), text)
    assert err.value.exit_code == CONTRACT
    assert message in err.value.message


def test_strict_reader_allows_merge_keys_and_repeated_keys_in_different_mappings():
    docs = yamlio.load_source(Path("x.yaml"), "base: &b {x: 1}\none: {<<: *b, y: 2}\ntwo: {y: 3}\n")
    assert docs == [{"base": {"x": 1}, "one": {"x": 1, "y": 2}, "two": {"y": 3}}]
