"""yamlio: the fast reader agrees with the standard constructor; the strict reader's errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from eksinf.core import yamldump, yamlio
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
    assert yamldump.dump_docs(docs) == yamldump.dump_docs(standard(TRICKY))


def test_fast_reader_on_the_committed_configs():
    from conftest import REPO

    for path in sorted((REPO / "configs").rglob("*.yaml")):
        text = path.read_text()
        assert yamlio.load_docs(text) == standard(text), path


def test_dump_is_deterministic_and_keeps_key_order():
    doc = {"z": 1, "a": {"text": "x\ny\n", "n": None}, "list": ["b", "a"]}
    first = yamldump.dump_docs([doc, doc])
    assert first == yamldump.dump_docs([doc, doc])
    assert first.startswith("---\nz: 1\na:\n  text: |\n    x\n    y\n")
    assert first.count("\n---\n") == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a:\n  b: 1\n  b: 2\n", 'x.yaml:3:3: duplicate key "b", first defined at x.yaml:2:3'),
        ("a: 1\n\tb: 2\n", "x.yaml:2:1: tab character in indentation"),
        ("a: [\n", "x.yaml:2:1: YAML syntax error"),
        (
            "a: !!python/object:os.system x\n",
            "x.yaml:1:4: unknown YAML tag 'tag:yaml.org,2002:python/object:os.system'",
        ),
    ],
    ids=["duplicate-key", "tab", "syntax", "unsafe-tag"],
)
def test_strict_reader_errors(text, message):
    with pytest.raises(EksinfError) as err:
        yamlio.load_source(Path("x.yaml"), text)
    assert err.value.exit_code == CONTRACT
    assert message in err.value.message


def test_strict_reader_allows_merge_keys_and_repeated_keys_in_different_mappings():
    docs = yamlio.load_source(Path("x.yaml"), "base: &b {x: 1}\none: {<<: *b, z: 2}\ntwo: {z: 3}\n")
    assert docs == [{"base": {"x": 1}, "one": {"x": 1, "z": 2}, "two": {"z": 3}}]


def generic_dump(docs: list) -> str:
    """What the writer produced before its fast path: PyYAML's generic representer with the
    same string style rule."""

    class Generic(yamldump.QuoteAmbiguous, yaml.CSafeDumper):
        pass

    def represent_str(dumper, value):
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Generic.add_representer(str, represent_str)
    return yaml.dump_all(docs, Dumper=Generic, **yamldump.DUMP_OPTIONS)


ODD_VALUES = {
    "empty": {},
    "none": [],
    "multi": "x\ny",
    "trailing": "line\n",
    "tab": "\tt",
    1: "int key",
    "flags": ["yes", "no", "on", True, False, None],
    "numbers": [0, -1, 1.5, "012", "1e3", "0x1F"],
    "date": "2024-01-01",
    "unicode": "ünï ✓",
    "quotes": ["", " lead", "a: b", "#hash", "- dash", "'single'", '"double"'],
    "nested": [[], [{}], [["deep", {"k": ["v"]}]]],
}


def test_fast_writer_equals_the_generic_representer():
    from conftest import REPO

    shared = {"s": 1}
    cases = [[ODD_VALUES], [ODD_VALUES, {"x": ODD_VALUES["quotes"]}]]
    # the same container twice in one document: the generic representer's anchor and alias
    cases.append([{"a": shared, "b": shared}])
    for case in cases:
        assert yamldump._dump_docs(case) == generic_dump(case)
    assert "&id001" in yamldump._dump_docs(cases[-1])
    for path in sorted((REPO / "configs").rglob("*.yaml")):
        docs = yamlio.load_docs(path.read_text())
        assert yamldump._dump_docs(docs) == generic_dump(docs), path


def test_bound_refuses_an_alias_that_reaches_too_deep_and_a_reused_scalar_in_a_unit():
    # the anchored node is shallow where it is defined and too deep where its alias is used:
    # the walk meets it there already measured and must still add its height
    text = "base: &b {x: {y: {z: 1}}}\ndeep:\n" + "".join(
        "  " * (i + 1) + "k:\n" for i in range(yamlio.MAX_DEPTH - 4)
    )
    leaf = "  " * (yamlio.MAX_DEPTH - 3) + "v: "
    assert yamlio.load_docs(text + leaf + "1\n")  # a plain value there is within the bound
    with pytest.raises(EksinfError, match=f"nested deeper than {yamlio.MAX_DEPTH} levels"):
        yamlio.load_docs(text + leaf + "*b\n")
    with pytest.raises(EksinfError) as reused:
        yamlio.load_source(Path("u.yaml"), "a: [&s x, *s]\n", aliases=False)
    assert "u.yaml:1:5: YAML anchor used by an alias" in reused.value.message


def test_a_parse_leaves_the_garbage_collector_as_it_found_it():
    import gc

    assert gc.isenabled()
    yamlio._load_docs("a: [1, 2]\n", "x")
    assert gc.isenabled()
    with pytest.raises(EksinfError):
        yamlio.load_source(Path("x.yaml"), "a: 1\na: 2\n")
    assert gc.isenabled()
    gc.disable()
    try:
        yamldump._dump_docs([{"a": 1}])
        assert not gc.isenabled()
    finally:
        gc.enable()
