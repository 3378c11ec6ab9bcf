"""The writer's fast path (core/yamlwrite) writes the general writer's bytes, or declines.

Checked on every committed unit (configs/) and on strings chosen to reach each of libyaml's
style rules: plain, single quotes, double quotes with escapes, literal blocks with indentation
and chomping indicators, as values, list items and keys, at several depths.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from eksinf.core import yamldump, yamlio

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def _general(docs: list[Any]) -> str:
    return cast(str, yaml.dump_all(docs, Dumper=yamldump._Dumper, **yamldump.DUMP_OPTIONS))


def _fast(docs: list[Any]) -> str | None:
    return yamldump._fast_writer().dump(docs)


@pytest.mark.parametrize(
    "path", sorted(CONFIGS.rglob("*.yaml")), ids=lambda p: str(p.relative_to(CONFIGS))
)
def test_every_committed_unit_is_written_the_same_by_the_fast_path(path):
    docs = yamlio.load_docs(path.read_text(), cached=False)
    fast = _fast(docs)
    assert fast is not None
    assert fast == _general(docs)


STRINGS = [
    "plain", "two words", "", " lead", "trail ", "a: b", "a:b", "a:", ":a", ": a", "a #b", "a#b",
    "#a", "-", "- a", "-a", "--", "---", "--- a", "...", "..x", "?", "? a", "?a", "[a]", "{a}",
    "a,b", "&a", "*a", "!a", "|", ">", "'", "'a'", '"', '"a"', "%a", "@a", "`a`", "a'b", 'a"b',
    "a\\b", "y", "yes", "on", "n", "no", "off", "true", "True", "null", "~", "0755", "1e3", "0o17",
    "0x10", "1_000", "1:20", "12", "-1", "1.5", ".inf", ".nan", "2001-12-14", "<<", "=", "a=b",
    "tab\there", "bell\x07", "nel\x85", "nbsp\xa0x", "caf\u00e9", "\u2028", "a\u2029b",
    "bom\ufeff", "\ufffe", "emoji \U0001f600", "\x00", "\x1b[0m", "del\x7f", "\ue000",
    "line\n", "two\nlines", "two\nlines\n", "\nlead", " lead\nx", "trail \nx", "x\n ", "x\n y",
    "a\n\nb\n", "a\n\n", "\n", "\n\n", "x\n\ty", "x\ny\u00e9\n", "x\n\U0001f600\n", "x\r\ny",
    "a" * 130, "b" * 128, "\u00e9" * 65, "k" * 200 + "\nx",
]  # fmt: skip


def _shapes(value: str) -> list[Any]:
    """`value` as a value, an item, a key, nested in lists and mappings."""
    return [
        {"key": value},
        {"list": [value, "after"]},
        {value: "value"},
        {"a": {"b": [{"c": value, value: [value]}]}},
        {"nested": [[value, [value]], {"k": value}]},
        {"empty": {}, "none": [], "x": [{}, [], None, True, 3, -4]},
    ]


@pytest.mark.parametrize("value", STRINGS, ids=repr)
def test_each_style_rule_gives_the_general_writers_bytes(value):
    for doc in _shapes(value):
        fast = _fast([doc])
        try:
            general = _general([doc])
        except yaml.YAMLError:
            assert fast is None
            continue
        assert fast is None or fast == general, doc


def test_a_string_of_any_other_first_character_resolves_to_text():
    """The fast path asks the resolver only about strings whose first character may start
    something else than text; every resolver of a first character is counted among them."""
    assert None not in yamldump._Tags.yaml_implicit_resolvers  # none for any first character
    for first in map(chr, range(0x20, 0x250)):
        if first not in yamldump._MAYBE_TYPED:
            for text in (first, first + "1", first + " x", first + "rue"):
                assert yamldump._TAGS.resolve(yaml.ScalarNode, text, (True, False)) == (
                    "tag:yaml.org,2002:str"
                ), text


def test_most_strings_are_written_by_the_fast_path():
    written = [v for v in STRINGS if _fast(_shapes(v)[:2]) is not None]
    assert len(written) > len(STRINGS) * 3 // 4


def test_several_documents_and_what_the_fast_path_declines():
    docs: list[Any] = [{"a": "x\n"}, {"b": ["y", {"c": "z\n"}]}]
    assert _fast(docs) == _general(docs)
    shared: dict[str, Any] = {"x": 1}
    for declined in ([{"a": shared, "b": shared}], [{"f": 1.5}], [["list"]], [{}], [{1: "a"}]):
        assert _fast(declined) is None
    assert yamldump.dump_docs([{"f": 1.5}]) == _general([{"f": 1.5}])
