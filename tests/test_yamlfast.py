"""The fast reader (core/yamlfast) gives exactly the reference reader's documents, or declines.

Proved on the whole stack (every text a render reads: each chart's output, the pinned upstream
manifests, committed units) and on snippets built to make YAML 1.1, YAML 1.2 and Kubernetes
disagree, each padded past the size where the fast path starts.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml_rs

from eksinf.build.render import render_stack
from eksinf.core import kubeyaml, yamlfast, yamlio
from eksinf.model.stack import load_stack


def _reference(text: str) -> list[Any]:
    return yamlio._load_machine_docs(text, "test")


def _fast(text: str) -> list[Any] | None:
    return yamlfast.read(text, yamlio.MAX_DEPTH, yamlio.MAX_NODES)


@pytest.fixture(scope="module")
def stack_texts(tmp_path_factory: pytest.TempPathFactory, chart_mirror: Path) -> list[str]:
    """Every text a render of the repository's stack parses, with the cache off."""
    texts: list[str] = []
    reference = yamlio._load_machine_docs
    patch = pytest.MonkeyPatch()

    def recorded(text: str, label: str, unique_keys: bool = False) -> list[Any]:
        texts.append(text)
        return reference(text, label, unique_keys)

    patch.setenv("EKSINF_NO_CACHE", "1")
    patch.setattr(yamlio, "FAST_TEXT", 1 << 62)  # every text reaches the reference reader
    patch.setattr(yamlio, "_load_machine_docs", recorded)
    try:
        render_stack(load_stack(Path(__file__).resolve().parent.parent), chart_mirror)
    finally:
        patch.undo()
    for path in sorted((Path(__file__).resolve().parent.parent / "configs").rglob("*.yaml")):
        texts.append(path.read_text())
    return texts


def test_every_text_of_the_stack_reads_the_same_and_the_large_ones_go_fast(stack_texts):
    fast_bytes = 0
    for text in stack_texts:
        fast = _fast(text)
        if fast is not None:
            assert fast == _reference(text)
            fast_bytes += len(text)
    large = [t for t in stack_texts if len(t) > 1 << 20]
    assert large, "the stack's pinned Argo CD manifest is over 1 MiB"
    assert all(_fast(t) is not None for t in large)
    assert fast_bytes > sum(map(len, stack_texts)) // 2


_FILLER = "".join(f"  key{i}: some text value number {i}\n" for i in range(800))


def _padded(snippet: str) -> str:
    """`snippet` as the first document of a text large enough for the fast path."""
    text = snippet + "---\nkind: ConfigMap\ndata:\n" + _FILLER
    assert len(text) >= yamlio.FAST_TEXT
    return text


def test_the_filler_alone_goes_fast():
    text = _padded("a: b\n")
    assert _fast(text) == _reference(text)


# Plain scalars Kubernetes reads unlike yaml-rs (`0o17`, `1_000`, `0x10`, `1:20`, `~` and dates
# they read alike, and the last test below checks it): each must send the text to the
# reference reader, as a value, an item, a key, after a comment or on its own line.
DISAGREE = ["0755", "08", "y", "Y", "yes", "No", "on", "OFF", "n", "+0755", "-010", "1e400"]


@pytest.mark.parametrize("token", DISAGREE)
@pytest.mark.parametrize(
    "shape",
    [
        "mode: {}\n",
        "mode:   {}   # a comment\n",
        "list:\n- {}\n",
        "list:\n  - - {}\n",
        "{}: value\n",
        "- {}:\n    x: 1\n",
        "mode:\n  {}\n",
        "--- {}\n",
    ],
)
def test_a_plain_scalar_the_readers_disagree_on_goes_to_the_reference(token, shape):
    text = _padded(shape.format(token))
    assert yamlfast._agrees(token) is False
    assert _fast(text) is None


@pytest.mark.parametrize(
    "token",
    ["falsey", "nullable", "Trueish", "offset", "onboard", "Infinity", "NaNNaN", "yes_no",
     "nan_inf", "off:on", "a0x1f", "e1000x", "falsE.", "truetrue", "Normal"],
)  # fmt: skip
def test_a_long_word_is_text_to_both_readers(token):
    """A token taken as text without asking either reader (a word past the longest boolean or
    null): both readers read it as that text."""
    assert yamlfast._agrees(token) is True
    assert yaml_rs.loads(f"k: {token}\n", parse_datetime=False) == {"k": token}
    assert kubeyaml.kube_scalar(token) == token


@pytest.mark.parametrize(
    "text",
    [
        "note: |\n  on: x\nb:\n  on: x\n",  # the same line, in a block's text, then a key
        "note: >\n  - 0755\nlist:\n  - 0755\n",
        "list:\n" + "- a: 1\n" * 50 + "- c: on\n",  # repeated lines, the token once
    ],
)
def test_a_token_is_seen_whatever_lines_repeat(text):
    """The scan reads each distinct line once (yamlfast._node_lines): a token on a line that
    also stands, identical, inside a block's text, or among repeated lines, is still seen."""
    assert _fast(_padded(text)) is None


# Texts whose reading depends on what the fast path does not see or does not do the same way.
DECLINED = [
    "a: &x 1\nb: *x\n",  # anchors and aliases
    "a: !!str 0755\n",  # tags
    "a: !foo bar\n",
    "a: [0755, 1]\n",  # flow collections with content
    "a: {b: 0755}\n",
    "a:\n  [0755]\n",
    "base: &b {x: 1}\nc:\n  <<: *b\n",  # merge keys
    "a: <<\n",  # the merge tag where a value stands: an error to the reference reader
    "... \n",  # a document end marker (libyaml refuses this one, yaml-rs does not)
    "? complex\n: key\n",
    "%YAML 1.1\n---\na: 1\n",
    "a: b\tc\n",  # tab
    "a: b\rc\n",
    "a: b\x85c\n",  # NEL: a line break to YAML 1.1
    "a: b\u2028c\n",
    "a: \ufeffb\n",
    "a: \x07\n",
    "a: 1\na: 2\n",  # a duplicate key (last wins, or an error, is the reference reader's)
    "a: 1\n'a': 2\n",
    "1: a\n",  # a key that is not a string
    "true: a\n",
    "a: .nan\n",
    "a: .inf\n",  # (read alike, but the cache's JSON cannot hold it)
]


@pytest.mark.parametrize("snippet", DECLINED)
def test_what_only_the_reference_reader_reads_right_is_declined(snippet):
    assert _fast(_padded(snippet)) is None


# Texts the fast path takes: what each reader reads must be equal, types included.
AGREED = [
    "a: 1\nb: -2\nc: 1.5\nd: 1e3\ne: true\nf: false\ng: null\nh: ~\ni:\nj: ''\n",
    "port: 443\nname: '0755'\nmode: \"yes\"\nquoted: 'on'\n",
    "when: 2001-12-14 21:59:43.10 -5\nday: 2002-12-14\ntime: 1:20\nv: 1.2.3\n",
    "a: 0o17\nb: 1_000\nc: 0x10\nd: 0b101\ne: +1\nf: 1.0e+2\ng: 00\nh: 0x1p3\ni: 1__0\n",
    "text: |\n  0755\n  on\n  [a, b]\n  &x *y !z\n  key: yes\nnext: 1\n",
    "text: >-\n  folded\n  on\n\n  yes\n",
    "keep: |+\n  a\n\n",
    "- a\n- b\n",
    "empty: []\nalso: {}\n",
    "a: 'it''s'\nb: \"\\t\\u00e9\"\nc: caf\u00e9\nd: \U0001f600\n",
    "long: a plain scalar that goes on\n  over a second line\n",
    "url: http://example.com:8080/path#frag\nx: a #comment\n",
    "b: '-'\nc: --x\nd: .\ne: -x\n",
]


@pytest.mark.parametrize("snippet", AGREED)
def test_what_the_fast_path_takes_reads_as_the_reference_reads_it(snippet):
    text = _padded(snippet)
    fast = _fast(text)
    assert fast is not None
    assert fast == _reference(text)
    for got, want in zip(_walk(fast), _walk(_reference(text)), strict=True):
        assert type(got) is type(want)


def _walk(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return [x for k, v in node.items() for x in (k, *_walk(v))]
    if isinstance(node, list):
        return [x for item in node for x in _walk(item)]
    return [node]


# Texts on which the readers might differ in what they accept or how they fold and escape: for
# each, the fast path declines, or both give equal documents, or (when the reference reader
# refuses the text) the fast path declines too.
EDGES = [
    'a: "\\/"\n', 'a: "\\x41\\u00e9\\U0001F600"\n', 'a: "\\N\\_\\L\\P"\n', 'a: "\\q"\n',
    'a: "x\\\n  y"\n', 'a: "line1\n  line2\n\n  line3"\n', "a: 'it''s\n  folded\n\n  more'\n",
    "a: plain\n  folded\n\n  more\n", "a: |+\n  keep\n\n\nb: 1\n", "a: |2\n    two\n   one\n",
    "a: >\n  fold\n  this\n\n  para\n   indented\n", "a: >-\n\n  leading\n", "a: x#y\n",
    "a: 123456789012345678901234567890\n", "a: 9223372036854775808\nb: 18446744073709551616\n",
    "a: -9223372036854775809\n", 'a: "unterminated\n', "a: [1, 2\n", "a:\n  b: 1\n c: 2\n",
    "a: b: c\n", "- a\nb: c\n", "a: @x\n", 'a: "x" y\n', "a: 1\n...\n---\nb: 2\n", "a: 1e\n",
    'a: "\\ud800"\n', "a: x\n  - y\n", "a: \u00a0x\n", "a: !!binary aGVsbG8=\n", "a: =\n",
]  # fmt: skip


@pytest.mark.parametrize("snippet", EDGES)
def test_the_fast_path_accepts_and_reads_only_what_the_reference_reader_does(snippet):
    text = _padded(snippet)
    fast = _fast(text)
    try:
        reference = _reference(text)
    except Exception:  # a syntax error, or eksinf's own refusal (a tag)
        assert fast is None
        return
    assert fast is None or fast == reference


def test_bounds_are_the_reference_readers():
    deep = "a:\n" + "".join("  " * i + "- b:\n" for i in range(1, 120))
    text = _padded(deep + "  " * 120 + "  c: 1\n")
    assert _fast(text) is None  # deeper than MAX_DEPTH: the reference reader names the place
    assert yamlfast.read(_padded("a: 1\n"), yamlio.MAX_DEPTH, 10) is None


def test_load_docs_uses_the_fast_path_and_gives_the_reference_reading():
    text = _padded("mode: 0755\nport: 443\n")
    docs = yamlio.load_docs(text, cached=False)
    assert docs[0] == {"mode": 0o755, "port": 443}
    assert not math.isnan(docs[0]["port"])
