"""A fast path for `yamlio.load_docs` on large machine-written texts, gated so that it never
changes what a text means.

yaml-rs (a Rust YAML 1.2 parser) reads a large manifest several times faster than libyaml plus
the Python node walk. It resolves plain scalars as YAML 1.2 does, not as Kubernetes does
(kubeyaml: `0755` is 493 there and 755 here, `on` is true there and text here), and it differs
from libyaml (YAML 1.1) on line-break characters, tabs and control characters. So `read` takes a
text only when nothing in it can be read differently, and answers None otherwise, which sends the
text to the reference reader:

- every token that stands where a plain scalar can start (a line's start after its indentation
  and `- ` items, or after `key: `; the bodies of block scalars are skipped) and looks like a
  number, a null or a boolean to either reader must mean the same to both (`_agrees`, which asks
  both; a word that only looks like one in prose costs a fall-back, never a wrong reading);
- where a node starts, no anchor, tag, flow collection with content, complex key or `<<`; no
  directive or document end marker; anywhere, no tab, CR, NEL, U+2028/9, control character or
  byte-order mark;
- the documents are bounded as the reference reader bounds them (depth, node count), hold string
  keys and finite scalars only, and duplicate keys are refused by the parser (the reference
  reader then decides: last one wins, or the error naming both places).

tests/test_yamlfast.py proves both readers give equal documents for every chart render and pinned
manifest of the stack, and for adversarial snippets.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Iterator
from typing import Any

import yaml_rs

from eksinf.core import kubeyaml

# Characters YAML 1.1 and 1.2 treat differently, or libyaml refuses: tab, CR, NEL, LS, PS,
# control characters, lone surrogates, a byte-order mark, U+FFFE/F.
_REFUSED_CHARS = re.compile(
    r"[\t\r\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]"
)
# the ones an ASCII text may hold, found with `in` (memchr) several times quicker than the regex
_REFUSED_ASCII = "".join(chr(c) for c in [*range(0x20), 0x7F] if c != 0x0A)

# One pass over the node lines (they are stripped of their indentation) at line starts finds a
# directive or a document end marker (group 1, which the readers bound differently); there and
# in a second pass after `: ` it finds where a node starts (after a line's `- ` items or `--- `,
# or after `: `; a `- ` or `? ` later in a line is not a node's start in block context, which is
# all the gate lets through) what is refused there (the next group: an anchor or a tag, `&a`,
# `!!int`, `!foo`; a flow collection with content, `[a, b]`, whose scalars this scan does not
# cover; `<<`, a merge key to Kubernetes; a complex key), and the tokens to check (the last
# group): a token where a plain scalar may start that either reader could read as a number, a
# null or a boolean (it starts with a digit, a sign, a dot or the first letter of a word they
# know), with after it the end of the line, a comment or `: ` (a key). Lines of multi-line plain
# or quoted scalars match too: a word there costs at most a fall-back, never a wrong reading.
# Two passes, each led by one literal character, are twice as quick as one led by either (the
# regex engine then finds its starts at memchr's speed), and find the same: no match holds a
# line break or a `: ` but the one it starts at, so neither pass hides a start from the other.
_AT_NODE = (
    r"(?:([&!]|[\[{](?![\]}])|<<|\?[ ])"
    r"|([-+.0-9~yYnNoOtTfF][^\s#]*?)(?=[ ]*(?:\n|#|:[ \n])))"
)
_SCANS = (
    re.compile(rf"\n(?:(%|\.\.\.)|(?:-+[ ]+)*{_AT_NODE})"),
    re.compile(rf":[ ]+{_AT_NODE}"),
)


# A block scalar's header (`key: |`, `- >-`, `--- |`): the lines after it that are indented more
# than its key or item, or empty, are its text, which the scan above skips. A header inside other
# text (a quoted or plain scalar) only makes them skip lines that are that text's too; a header
# not found (`key:  |`, two spaces) only makes them read its text.
_BLOCK_HEADER = re.compile(r"[|>](?<=[:-] [|>])[-+0-9]*[ ]*\n")
_LINE_START = re.compile(r"[ ]*(?:-+[ ]+)*")


@functools.lru_cache(maxsize=256)
def _block_body(indent: int) -> re.Pattern[str]:
    return re.compile(rf"(?:[ ]{{{indent + 1},}}[^\n]*\n|[ ]*\n)*")


def _node_lines(text: str) -> str:
    """The distinct lines of `text` (from a line start), without the bodies of its block scalars
    and without their indentation, each between two line breaks, in no particular order, for
    `_SCANS`.

    Every match of `_SCANS` lies within one line (it consumes at most the line break before it,
    and looks no further than the one after it), so what the scans find depends only on which
    lines there are (`read` only asks whether any is refused and which tokens there are): a
    CRD's thousands of `type: string` lines are scanned once."""
    kept: list[str] = []
    start = 0
    for header in _block_headers(text):
        if header.start() < start:  # inside a body already skipped
            continue
        line = text.rfind("\n", 0, header.start()) + 1
        indent = _LINE_START.match(text, line)
        assert indent is not None  # the pattern matches the empty string
        body = _block_body(indent.end() - line).match(text, header.end())
        assert body is not None
        kept.append(text[start : header.end()])
        start = body.end()
    kept.append(text[start:])
    lines = set("".join(kept).split("\n"))
    return "\n" + "\n".join(set(map(str.lstrip, lines, itertools.repeat(" ")))) + "\n"


def _block_headers(text: str) -> Iterator[re.Match[str]]:
    """`_BLOCK_HEADER.finditer(text)`, several times quicker: a header starts at a `|` or `>`,
    which str.find finds at memchr's speed where the regex engine steps through every
    character, and none holds another, so matching at each of them in order finds the same."""
    starts: list[int] = []
    for indicator in "|>":
        at = text.find(indicator)
        while at >= 0:
            starts.append(at)
            at = text.find(indicator, at + 1)
    for at in sorted(starts):
        header = _BLOCK_HEADER.match(text, at)
        if header is not None:
            yield header


def _refused_chars(text: str) -> bool:
    if text.isascii():
        return any(char in text for char in _REFUSED_ASCII)
    return _REFUSED_CHARS.search(text) is not None


def read(text: str, max_depth: int, max_nodes: int) -> list[Any] | None:
    """The non-empty documents of `text`, read as `yamlio` reads them, or None when the text
    must go to the reference reader (see above). Meant for large texts: below yamlio.FAST_TEXT
    the reference reader is as quick."""
    if not text.endswith("\n") or _refused_chars(text):
        return None
    tokens = _tokens(text)
    if tokens is None or not all(map(_agrees, tokens)):
        return None
    try:
        # A closing document that is not a list makes the answer a list of documents whatever
        # the text holds (one document that is a list would otherwise look like several).
        docs = yaml_rs.loads(
            text + "---\neksinf-end\n",
            parse_datetime=False,
            duplicate_key_policy=yaml_rs.DuplicateKeyPolicy.Error,
        )
    except (ValueError, TypeError, RecursionError):
        return None
    if not isinstance(docs, list) or not docs or docs[-1] != "eksinf-end":
        return None
    docs.pop()
    if not _bounded(docs, max_depth, max_nodes):
        return None
    return [d for d in docs if d is not None]


def _tokens(text: str) -> set[str] | None:
    """The tokens `_SCANS` finds in `text`, or None when they find a directive, a document end
    marker or what is refused where a node starts."""
    lines = _node_lines(text)
    tokens = set()
    for scan in _SCANS:
        for *refused, token in scan.findall(lines):
            if any(refused):
                return None
            tokens.add(token)
    tokens.discard("")
    return tokens


# The longest plain scalar either reader takes for a boolean or a null that starts with a
# letter ("false"); a number starts with a digit, a sign or a dot.
_LONGEST_WORD_VALUE = 5


@functools.lru_cache(maxsize=65536)
def _agrees(token: str) -> bool:
    """Whether a plain scalar `token` means the same to Kubernetes and to yaml-rs."""
    if len(token) > _LONGEST_WORD_VALUE and token.isascii() and token[0].isalpha():
        return True  # text to both: most of the tokens of a manifest (`namespace`, `fieldRef`)
    try:
        fast = yaml_rs.loads(f"k: {token}\n", parse_datetime=False)
    except (ValueError, TypeError):
        return False
    if not isinstance(fast, dict) or list(fast) != ["k"]:
        return False
    kube = kubeyaml.kube_scalar(token)
    if type(kube) is str:  # the reference reader keeps the text as written
        return bool(fast["k"] == token)
    return kubeyaml.same(kube, fast["k"])


_SCALARS = (str, int, bool, float, type(None))


def _bounded(docs: list[Any], max_depth: int, max_nodes: int) -> bool:
    """Whether the documents hold string keys and finite scalars only (so JSON holds them
    exactly), nest at most `max_depth` levels and count at most `max_nodes` nodes, as the
    reference reader requires (its own error is then the answer). Iterative: the depth is not
    yet known to be bounded."""
    # only containers go on the stack: most nodes are strings, checked where they are met
    nodes = len(docs)
    stack: list[tuple[Any, int]] = []
    for doc in docs:
        if type(doc) is dict or type(doc) is list:
            stack.append((doc, 1))
        elif not _scalar(doc):
            return False
    while stack:
        node, depth = stack.pop()
        if depth >= max_depth:
            return False
        if type(node) is dict:
            for key in node:
                if type(key) is not str:
                    return False
            items = node.values()
            nodes += 2 * len(node)  # each key and each value
        else:
            items = node
            nodes += len(node)
        for item in items:
            kind = type(item)
            if kind is str:
                continue
            if kind is dict or kind is list:
                stack.append((item, depth + 1))
            elif not _scalar(item):
                return False
    return nodes <= max_nodes


def _scalar(node: Any) -> bool:
    """A scalar JSON holds exactly: .inf and .nan read alike, but JSON, the cache's format,
    lacks them."""
    kind = type(node)
    return kind in _SCALARS and (kind is not float or math.isfinite(node))
