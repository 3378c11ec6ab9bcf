"""The fast reader's gate (core/yamlfast) gives the verdicts of the gate it replaced.

The gate once scanned its node lines with one regex led by either a line break or a colon, and
deduplicated them in order of first sight; it now scans with two regexes, each led by one
literal character, over the lines in no particular order. The replaced implementation is kept
below, only here, as the reference: both must find the same tokens (or both refuse) and `read`
must answer the same for every text of the stack, every text under configs/, and a few hundred
snippets built and mutated to reach the gate's edges (line breaks and control characters, block
scalar headers and indentation, keys that read as numbers or booleans, the depth and node
bounds, non-finite floats and non-string keys).
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest
import yaml_rs
from test_yamlfast import stack_texts  # noqa: F401 (a fixture: every text a render reads)

from eksinf.core import yamlfast, yamlio

# ---- the reference: the gate as it was before its scan was split in two ----------------------

_OLD_NODE_START = r"(?:\n(?:-+[ ]+)*|:[ ]+)"
_OLD_SCAN = re.compile(
    r"\n(%|\.\.\.)"
    rf"|{_OLD_NODE_START}(?:([&!]|[\[{{](?![\]}}])|<<|\?[ ])"
    r"|([-+.0-9~yYnNoOtTfF][^\s#]*?)(?=[ ]*(?:\n|#|:[ \n])))"
)


def _old_node_lines(text: str) -> str:
    kept: list[str] = []
    start = 0
    for header in yamlfast._block_headers(text):
        if header.start() < start:
            continue
        line = text.rfind("\n", 0, header.start()) + 1
        indent = yamlfast._LINE_START.match(text, line)
        assert indent is not None
        body = yamlfast._block_body(indent.end() - line).match(text, header.end())
        assert body is not None
        kept.append(text[start : header.end()])
        start = body.end()
    kept.append(text[start:])
    lines = dict.fromkeys("".join(kept).split("\n"))
    return "\n" + "\n".join(dict.fromkeys(line.lstrip(" ") for line in lines)) + "\n"


def _old_tokens(text: str) -> set[str] | None:
    tokens = set()
    for directive, refused, token in _OLD_SCAN.findall(_old_node_lines(text)):
        if directive or refused:
            return None
        tokens.add(token)
    tokens.discard("")
    return tokens


def _old_read(text: str, max_depth: int, max_nodes: int) -> list[Any] | None:
    """`read` as it was: the same code around the replaced scan."""
    current = yamlfast._tokens
    yamlfast._tokens = _old_tokens
    try:
        return yamlfast.read(text, max_depth, max_nodes)
    finally:
        yamlfast._tokens = current


# ---- the texts ---------------------------------------------------------------------------------

_ROOT = Path(__file__).resolve().parent.parent

# Lines to build snippets from: each stands at the gate's edge in one way.
_LINES = [
    "a: b", "a: 1", "a: 0755", "a: on", "a: yes", "a: ~", "a: null", "a: .nan", "a: .inf",
    "a: -.inf", "a: 1e400", "a: 0x10", "a: 1_000", "a: 1:20", "a: 2001-12-14", "1: a",
    "true: a", "on: a", "~: a", "null: a", "0755: a", "- a", "- - on", "-  - 1", "--- a",
    "---", "--- |", "...", "... x", "%YAML 1.1", "%TAG ! x", "a: |", "a: >", "a: |-", "a: >+2",
    "a: |2", "a:  |", "- |", "- >-", "a: b | c", "a: b > on", "a: 'x: |'", 'a: "x: >"',
    "a: x |", "  on", "   - 0755", "  key: yes", "    no", "a: &x 1", "a: *x", "a: !!str 1",
    "a: !x y", "a: [1]", "a: []", "a: {}", "a: {b: on}", "<<: a", "a: <<", "? a", ": b",
    "a: b # on", "a: b #on", "a: b#on", "a: on#x", "a: 'on'", 'a: "yes"', "a: 'it''s'", "a::b",
    "a:: on", "a: - on", "- a: on", "- ? a", "a: b: on", "a:", "-", "- ", "", "  ", "a: b  ",
    "a: 1.5", "a: -2", "a: +3", "a: .5", "a: 08", "a: 0o17", "a: 0b101", "a: Y", "a: n",
    "a: OFF", "a: True", "a: FALSE", "a: Null", "a: NULL", "a: ..", "a: -", "a: --", "a: +",
    "a: \u00e9", "a: \u00a0on", "\u00a0on: x", "a: \u3000", "x: caf\u00e9 on",
]  # fmt: skip

# Characters a mutation inserts: those the gate refuses, those it lets through, and those that
# start or end what it scans.
_CHARS = [
    "\t", "\r", "\x85", "\u2028", "\u2029", "\ufeff", "\x00", "\x07", "\x0b", "\x0c", "\x1f",
    "\x7f", "\x9f", "\ufffe", "\ud800", "\u00a0", " ", "\n", "|", ">", ":", "-", "#", "&", "!",
    "[", "]", "{", "}", "?", "<", "%", ".", "'", '"', "0", "y", "o",
]  # fmt: skip


def _indented(rng: random.Random, line: str) -> str:
    return " " * rng.choice([0, 0, 1, 2, 2, 3, 4, 6]) + line


def _snippets() -> list[str]:
    """Built from `_LINES` with random indentation, then mutated: a character inserted, deleted
    or doubled, a line repeated elsewhere (the scan reads each distinct line once)."""
    rng = random.Random(20240601)
    built = []
    for _ in range(300):
        lines = [_indented(rng, rng.choice(_LINES)) for _ in range(rng.randint(1, 8))]
        built.append("\n".join(lines) + "\n")
    mutated = []
    for text in built:
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(text) + 1)
            match rng.randrange(4):
                case 0:
                    text = text[:at] + rng.choice(_CHARS) + text[at:]
                case 1:
                    text = text[:at] + text[at + 1 :]
                case 2:
                    text = text[:at] + text[at:][:1] * 2 + text[at + 1 :]
                case _:
                    lines = text.split("\n")
                    lines.insert(rng.randrange(len(lines) + 1), rng.choice(lines))
                    text = "\n".join(lines)
        mutated.append(text)
    return built + mutated


def _block_scalars() -> list[str]:
    """Block scalars whose bodies end at every indentation around their key's or item's."""
    texts = []
    for header in ["a: |", "a: >-", "- |", "- - >", "--- |", "b:\n  a: |+", "- a: |2"]:
        for body in ["on", "0755: x", "- yes", "&x", "%x", "...", "", "a: |\n  on"]:
            for indent in range(5):
                texts.append(f"{header}\n{' ' * indent}{body}\nc: on\n")
                texts.append(f"{header}\n{' ' * indent}{body}\n\n  on\nd: 1\n")
    return texts


def _nested(depth: int, shape: str) -> str:
    """A document nesting `depth` levels of mappings, or of lists on one line."""
    if shape == "lists":
        return "- " * depth + "1\n"
    return (
        "".join("  " * level + "k:\n" for level in range(depth - 1)) + "  " * (depth - 1) + "v: 1\n"
    )


def _configs_texts() -> list[str]:
    return [p.read_text() for p in sorted((_ROOT / "configs").rglob("*.yaml"))]


def _nodes(text: str) -> int:
    """The node count `_bounded` works out for a text yaml-rs reads."""
    docs = yaml_rs.loads(text, parse_datetime=False)
    count = 0
    stack: list[Any] = list(docs) if isinstance(docs, list) else [docs]
    count += len(stack)
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            count += 2 * len(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            count += len(node)
            stack.extend(node)
    return count


# ---- the proof ---------------------------------------------------------------------------------


def _same(text: str, max_depth: int = yamlio.MAX_DEPTH, max_nodes: int = yamlio.MAX_NODES):
    assert yamlfast._tokens(text) == _old_tokens(text), text
    assert yamlfast.read(text, max_depth, max_nodes) == _old_read(text, max_depth, max_nodes), text


def test_every_text_of_the_stack_and_of_configs_gets_the_same_verdict(stack_texts):  # noqa: F811
    texts = [*stack_texts, *_configs_texts()]
    assert any(len(t) > 1 << 20 for t in texts)
    for text in texts:
        _same(text)
    assert any(yamlfast.read(t, yamlio.MAX_DEPTH, yamlio.MAX_NODES) for t in texts)


def test_built_and_mutated_snippets_get_the_same_verdict():
    snippets = [*_snippets(), *_block_scalars()]
    verdicts = {yamlfast._tokens(s) is None for s in snippets}
    assert verdicts == {True, False}  # the snippets reach both sides of the gate
    read = [yamlfast.read(s, yamlio.MAX_DEPTH, yamlio.MAX_NODES) is None for s in snippets]
    assert len(set(read)) == 2
    for snippet in snippets:
        _same(snippet)


@pytest.mark.parametrize("shape", ["mappings", "lists"])
@pytest.mark.parametrize("depth", [1, 2, 10, 198, 199, 200, 201, 230])
def test_nesting_at_and_past_the_depth_bound_gets_the_same_verdict(depth, shape):
    text = _nested(depth, shape)
    _same(text)
    for bound in (depth - 1, depth, depth + 1):
        _same(text, max_depth=bound)
    assert yamlfast.read(text, depth, yamlio.MAX_NODES) is None
    assert yamlfast.read(text, depth + 1, yamlio.MAX_NODES) is not None


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb:\n- p\n- q\n",
        "- a\n- b:\n    c: d\n---\ne: f\n---\n",
        "a: []\nb: {}\n",
        "a: .nan\n",
        "a: -.inf\nb: 1\n",
        "1: a\n",
        "true: a\n",
        "~: a\n",
        "a:\n  1.5: b\n",
        "a:\n- 1\n- 2\n- .inf\n",
    ],
)
def test_node_counts_at_and_past_the_bound_get_the_same_verdict(text):
    count = _nodes(text + "---\neksinf-end\n") - 1  # less the closing document
    for bound in (count - 1, count, count + 1):
        _same(text, max_nodes=bound)
    assert yamlfast.read(text, yamlio.MAX_DEPTH, count - 1) is None


def test_the_node_bound_is_reached_exactly():
    text = "a: 1\nb:\n- p\n- q\n"
    count = _nodes(text)
    assert yamlfast.read(text, yamlio.MAX_DEPTH, count) == [{"a": 1, "b": ["p", "q"]}]
    assert yamlfast.read(text, yamlio.MAX_DEPTH, count - 1) is None
