"""The writer's fast path: `yamldump.dump_docs`'s bytes for the documents units are made of,
written straight from Python data instead of through PyYAML's nodes and libyaml's emitter.

It writes what libyaml's emitter (emitter.c, with yamldump's options: block style, `---` before
each document, unicode, no line folding) writes for mappings, lists, strings, ints, booleans and
nulls, choosing each string's style by the same rules (`yaml_emitter_analyze_scalar`,
`yaml_emitter_select_scalar_style`): plain when the text allows it and reads back as itself,
else single quotes, a literal block (`|`) for text with line breaks. Anything else (a float, a
string the emitter would double-quote, a long or multi-line key, a block that keeps trailing
line breaks, a container used twice) answers None, and the general writer writes the documents.
tests/test_yamlwrite.py checks both writers give the same bytes, on configs/ and on strings
chosen to reach every rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any


class General(Exception):
    """Documents the fast path does not write: the general writer writes them."""


# Characters libyaml's emitter does not write as they are (not IS_PRINTABLE, with unicode
# allowed), which force double quotes; and U+2028/9, printable but line breaks to it. (Classes of
# what is refused, not of what is allowed: those compile in a tenth of the time.)
_SPECIAL = re.compile(
    r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff\U00010000-\U0010ffff]"
)


# Line breaks to YAML 1.1 besides `\n` (NEL, LS, PS): the emitter folds and quotes around them
# by rules the fast path leaves to it.
_OTHER_BREAK = re.compile("[\x85\u2028\u2029]")
# Indicators that keep a single-line string out of the plain style in block context
# (analyze_scalar's block_indicators): at the start, `---`, `...`, one of #,[]{}&*!|>'"%@`,
# or `?`, `:` or `-` followed by a space or the end; anywhere, `: `, a final `:` or ` #`.
_BLOCK_INDICATOR = re.compile(r"---|\.\.\.|[#,\[\]{}&*!|>'\"%@`]|[?:\-](?: |\Z)|.*?(?:: |:\Z| #)")


class Writer:
    """Writes documents; `plain_tag(text)` is the tag the general writer's resolver gives the
    plain form of `text` (a string is written plain only when that is str)."""

    def __init__(self, plain_tag: Callable[[str], str]) -> None:
        self._tag = plain_tag
        self._values: dict[str, str] = {}  # single-line string -> as a value
        self._keys: dict[str, str] = {}  # string -> as a key, with its colon
        self._lines: dict[str, str] = {}  # single-line string -> as a value after its key

    def dump(self, docs: list[Any]) -> str | None:
        out: list[str] = []
        try:
            for doc in docs:
                if type(doc) is not dict or not doc:
                    raise General
                out.append("---\n")
                self._mapping(doc, 0, out, False, set())
        except General:
            return None
        return "".join(out)

    def _mapping(self, data: dict[Any, Any], indent: int, out: list[str], inline: bool,
                 seen: set[int]) -> None:  # fmt: skip
        # the hottest loop of a render without its cache: the enter check, the keys' and the
        # single-line strings' memos are read here rather than through the methods below
        if id(data) in seen:  # the general writer writes a container met twice once, with an
            raise General  # anchor and aliases
        seen.add(id(data))
        pad = " " * indent
        keys, lines = self._keys, self._lines
        for key, value in data.items():
            text = keys.get(key) if type(key) is str else None
            if text is None:
                text = self._key(key)
            head = text if inline else pad + text
            inline = False
            kind = type(value)
            if kind is str:
                line = lines.get(value)
                if line is None:
                    line = " " + self._scalar(value, indent + 2) + "\n"
                    if "\n" not in value:  # a block's text depends on its indentation
                        lines[value] = line
                out.append(head + line)
            elif kind is dict and value:
                out.append(head + "\n")
                self._mapping(value, indent + 2, out, False, seen)
            elif kind is list and value:  # a list under a key is not indented (libyaml)
                out.append(head + "\n")
                self._sequence(value, indent, out, False, seen)
            else:
                out.append(head + " " + self._scalar(value, indent + 2) + "\n")

    def _sequence(self, data: list[Any], indent: int, out: list[str], inline: bool,
                  seen: set[int]) -> None:  # fmt: skip
        if id(data) in seen:
            raise General  # see _mapping
        seen.add(id(data))
        pad = " " * indent
        for item in data:
            head = "- " if inline else pad + "- "
            inline = False
            kind = type(item)
            if kind is dict and item:
                out.append(head)
                self._mapping(item, indent + 2, out, True, seen)
            elif kind is list and item:
                out.append(head)
                self._sequence(item, indent + 2, out, True, seen)
            else:
                out.append(head + self._scalar(item, indent + 2) + "\n")

    def _scalar(self, value: Any, indent: int) -> str:
        kind = type(value)
        if kind is str:
            text = self._values.get(value)
            if text is not None:
                return text
            if _OTHER_BREAK.search(value):
                raise General
            if "\n" in value:
                return _literal(value, indent)
            text = self._single_line(value)
            self._values[value] = text
            return text
        if value is None:
            return "null"
        if kind is bool:
            return "true" if value else "false"
        if kind is dict:
            return "{}"  # empty: the emitter writes it in flow style
        if kind is list:
            return "[]"
        if kind is int:
            text = str(value)
            if self._tag(text) == "tag:yaml.org,2002:int":
                return text
        raise General  # a float, or a type the representer decides on

    def _key(self, key: Any) -> str:
        # a key of more than 128 bytes or with a line break is written as `? key` (complex key)
        if type(key) is not str or "\n" in key or len(key.encode("utf-8")) > 128:
            raise General
        if _OTHER_BREAK.search(key):
            raise General
        text = ("''" if not key else self._single_line(key)) + ":"
        self._keys[key] = text
        return text

    def _single_line(self, value: str) -> str:
        if not value:
            return "''"  # plain empty text would read as null
        if _SPECIAL.search(value):
            return _double(value)
        plain = (
            value[0] != " "
            and value[-1] != " "
            and not _BLOCK_INDICATOR.match(value)
            and self._tag(value) == "tag:yaml.org,2002:str"
        )
        return value if plain else "'" + value.replace("'", "''") + "'"


# What double quotes write escaped: what is not printable, a byte-order mark, line breaks, `"`
# and `\\` (yaml_emitter_write_double_quoted_scalar), each as its short escape if it has one.
_ESCAPED = re.compile(
    r'[\x00-\x1f"\\\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff\U00010000-\U0010ffff]'
)
_SHORT = {
    "\0": "0", "\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r",
    "\x1b": "e", '"': '"', "\\": "\\", "\x85": "N", "\xa0": "_", "\u2028": "L", "\u2029": "P",
}  # fmt: skip


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    short = _SHORT.get(char)
    if short is not None:
        return "\\" + short
    code = ord(char)
    if 0xD800 <= code <= 0xDFFF:
        raise General  # a lone surrogate: not UTF-8, the general writer's error
    if code <= 0xFF:
        return f"\\x{code:02X}"
    return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


def _double(value: str) -> str:
    """`value` in double quotes, on one line (no folding: the width is unbounded)."""
    return '"' + _ESCAPED.sub(_escape, value) + '"'


def _literal(value: str, indent: int) -> str:
    """A multi-line string as a literal block (`|`), its lines `indent` deeper."""
    if _SPECIAL.search(value) or value.endswith(" ") or " \n" in value:
        return _double(value)  # not allowed in a block
    if value.endswith("\n\n") or value == "\n":
        raise General  # `|+`: the emitter may close the stream with `...`
    head = "|"
    if value[0] in " \n":
        head += "2"  # the indentation indicator, libyaml's best_indent
    lines = value.split("\n")
    if value.endswith("\n"):
        lines.pop()
    else:
        head += "-"
    pad = " " * indent
    return head + "\n" + "\n".join(pad + line if line else "" for line in lines)
