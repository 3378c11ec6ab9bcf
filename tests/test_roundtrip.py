"""Edits through core.roundtrip keep a unit as its author wrote it (ruamel.yaml's round trip),
and mean exactly what yamlio reads; where the two readers disagree, the canonical writer."""

from __future__ import annotations

import difflib
import functools

import pytest
from conftest import REPO

from eksinf.core.roundtrip import edit_text
from eksinf.core.yamlio import load_docs
from eksinf.hub.functions import set_annotation, set_env_var, set_replicas
from eksinf.model.stack import load_stack

UNITS = sorted(REPO.glob("configs/*/*.yaml"))  # the handwritten ones are copied in byte for byte


def _changed(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def test_set_replicas_changes_one_line_and_keeps_the_comments():
    text = (REPO / "configs" / "inference-workloads" / "vllm.yaml").read_text()
    after = edit_text(text, lambda docs: set_replicas(docs, ["3"]))
    assert after is not None
    assert _changed(text, after) == ["-  replicas: 0", "+  replicas: 3"]


def test_an_edit_that_changes_nothing_writes_nothing():
    text = (REPO / "configs" / "inference-workloads" / "vllm.yaml").read_text()
    assert edit_text(text, lambda docs: set_replicas(docs, ["0"])) is None


@functools.cache
def _manifest_units() -> frozenset[str]:
    """configs/ paths of the units that keep a pinned upstream manifest's own text."""
    stack = load_stack(REPO)
    return frozenset(
        f"configs/{c.name}/{m.name}-{part}.yaml"
        for c in stack.components
        for m in c.manifests
        for part in ("controller", "crds")
    )


def _touch(docs: list) -> bool:
    return True  # "changed", changing nothing: the round trip's own layout


@pytest.mark.parametrize("path", UNITS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_unit_keeps_its_layout_through_an_edit(path):
    """Indentless and indented sequences, quoting, nulls, comments before a first `---`: an
    added annotation is the only change in every unit eksinf writes. A unit that keeps a pinned
    manifest's text keeps it too, except that a plain scalar upstream folded over several lines
    is written on one (ruamel does not keep a scalar's folding): exactly what a round trip
    with no edit at all changes, and nothing else."""
    text = path.read_text(encoding="utf-8")
    after = edit_text(text, lambda docs: set_annotation(docs, ["example.dev/edited", "yes"]))
    if after is None:
        return
    other = [
        line
        for line in _changed(text, after)
        if "example.dev/edited" not in line and not line.endswith("annotations:")
    ]
    round_trip = edit_text(text, _touch) or text
    unfolded = _changed(text, round_trip)
    if str(path.relative_to(REPO)) in _manifest_units():
        # only line breaks and indentation moved: the same words in the same order
        assert unfolded and round_trip.split() == text.split()
    else:
        assert unfolded == []
    assert other == unfolded
    edited = load_docs(text)
    set_annotation(edited, ["example.dev/edited", "yes"])
    assert load_docs(after) == edited  # meaning: exactly the edit


def test_a_new_string_kubernetes_would_read_otherwise_is_quoted():
    text = (REPO / "configs" / "inference-workloads" / "vllm.yaml").read_text()
    after = edit_text(text, lambda docs: set_env_var(docs, ["vllm", "HF_HOME", "on"]))
    assert after is not None
    assert "+              value: 'on'" in _changed(text, after)
    env = load_docs(after)[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "HF_HOME", "value": "on"} in env


def test_where_the_readers_disagree_the_meaning_wins_over_the_layout():
    """`yes` is true to Kubernetes (YAML 1.1) and text to ruamel (YAML 1.2): the edit runs on
    yamlio's reading and the unit is written in eksinf's style, the comment lost."""
    text = (
        "# a comment\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n"
        "spec:\n  paused: yes\n  replicas: 1\n"
    )
    after = edit_text(text, lambda docs: set_replicas(docs, ["2"]))
    assert after is not None
    assert "# a comment" not in after
    doc = load_docs(after)[0]
    assert doc["spec"] == {"paused": True, "replicas": 2}


def test_an_edit_that_changes_nothing_needs_no_round_trip(monkeypatch):
    """A rerun's edits mostly change nothing: that is known from yamlio's documents alone, so
    ruamel never parses the unit; an edit that does change it still keeps its layout."""
    import eksinf.core.roundtrip as roundtrip

    text = (REPO / "configs" / "inference-workloads" / "vllm.yaml").read_text()
    real = roundtrip._yaml
    parses: list[str] = []
    monkeypatch.setattr(roundtrip, "_yaml", lambda t: parses.append(t) or real(t))
    assert edit_text(text, lambda docs: set_replicas(docs, ["0"])) is None
    assert parses == []
    after = edit_text(text, lambda docs: set_replicas(docs, ["3"]))
    assert after is not None and parses == [text]
    assert _changed(text, after) == ["-  replicas: 0", "+  replicas: 3"]
