"""core/textdiff: difflib's opcodes and unified diffs, found from both ends and document by
document; any answer must turn the one text into the other exactly."""

from __future__ import annotations

import difflib
import random
import re

import pytest

from eksinf.core import textdiff

_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@\n")


def _check_opcodes(a: list[str], b: list[str], codes: list[textdiff.Opcode]) -> None:
    """The opcodes cover both sequences in order, and `equal` runs are equal."""
    i = j = 0
    for tag, i1, i2, j1, j2 in codes:
        assert (i1, j1) == (i, j)
        if tag == "equal":
            assert a[i1:i2] == b[j1:j2]
        i, j = i2, j2
    assert (i, j) == (len(a), len(b))


def _apply(a: list[str], diff: list[str]) -> list[str]:
    """The unified diff applied to `a`, each hunk checked against it."""
    out: list[str] = []
    at = 0
    lines = iter(diff[2:])
    for header in lines:
        found = _HUNK.fullmatch(header)
        assert found is not None, header
        start, count = int(found.group(1)), int(found.group(2) or 1)
        begin = start - 1 if count else start
        out += a[at:begin]
        at = begin
        taken = 0
        added_or_kept = int(found.group(4) or 1)
        while taken < count or added_or_kept:
            line = next(lines)
            if line[0] in " -":
                assert a[at] == line[1:]
                at += 1
                taken += 1
            if line[0] in " +":
                added_or_kept -= 1
                if line[0] == " ":
                    out.append(a[at - 1])
                else:
                    out.append(line[1:])
    return out + a[at:]


def _random_text(rng: random.Random, size: int) -> list[str]:
    words = ["---\n", "kind: A\n", "  name: x\n", "  name: y\n", "spec:\n", "  a: 1\n", "\n"]
    return [rng.choice(words) for _ in range(size)]


def _mutated(rng: random.Random, lines: list[str]) -> list[str]:
    out = list(lines)
    for _ in range(rng.randint(0, 6)):
        at = rng.randint(0, len(out))
        action = rng.choice(["insert", "delete", "replace"])
        if action == "insert" or not out or at == len(out):
            out.insert(at, rng.choice(["  new: 1\n", "---\n", "kind: B\n"]))
        elif action == "delete":
            del out[at]
        else:
            out[at] = "  changed: 2\n"
    return out


@pytest.mark.parametrize("seed", range(300))
def test_the_opcodes_and_the_diff_turn_one_text_into_the_other(seed):
    rng = random.Random(seed)
    a = _random_text(rng, rng.randint(0, 60))
    b = _mutated(rng, a) if rng.random() < 0.8 else _random_text(rng, rng.randint(0, 60))
    _check_opcodes(a, b, textdiff.opcodes(a, b))
    _check_opcodes(a, b, textdiff.opcodes(a, b, autojunk=False))
    diff = textdiff.unified_diff(a, b, "old", "new")
    assert (diff == []) == (a == b)
    if diff:
        assert diff[:2] == ["--- old\n", "+++ new\n"]
        assert _apply(a, diff) == b


def test_a_small_change_reads_as_difflib_writes_it():
    a = [f"line {i}\n" for i in range(40)]
    b = list(a)
    b[20] = "changed\n"
    b.insert(30, "added\n")
    assert textdiff.unified_diff(a, b, "x", "y") == list(difflib.unified_diff(a, b, "x", "y"))


def test_difflib_sees_only_the_lines_around_each_change(monkeypatch):
    """Three long documents, one line changed in each: difflib compares only those lines, not
    the ~30,000 between them."""
    compared: list[int] = []
    real = difflib.SequenceMatcher

    def watched(junk, x, y, autojunk=True):
        compared.append(len(x) + len(y))
        return real(junk, x, y, autojunk)

    monkeypatch.setattr(textdiff.difflib, "SequenceMatcher", watched)
    doc = [f"  field{i}: value\n" for i in range(10_000)]
    a = [line for k in range(3) for line in ["---\n", f"name: d{k}\n", *doc]]
    b = list(a)
    for k in range(3):
        b[k * 10_002 + 5_000] = "  field: edited\n"
    diff = textdiff.unified_diff(a, b, "old", "new")
    assert sum(line.startswith("+  field: edited") for line in diff) == 3
    assert _apply(a, diff) == b
    assert compared and max(compared) <= 4
