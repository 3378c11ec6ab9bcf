"""Edits through core.roundtrip keep a unit as its author wrote it (ruamel.yaml's round trip),
and mean exactly what yamlio reads; where the two readers disagree, the canonical writer."""

from __future__ import annotations

import difflib
from collections import Counter

import pytest
from conftest import REPO

from eksinf.core.kubeyaml import same_tree
from eksinf.core.roundtrip import _placed, edit_text
from eksinf.core.yamlio import load_docs
from eksinf.hub.functions import set_annotation, set_env_var, set_replicas

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


@pytest.mark.parametrize("path", UNITS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_unit_keeps_its_layout_through_an_edit(path):
    """Indentless and indented sequences, quoting, nulls, comments before a first `---`, and the
    long lines a pinned manifest's upstream folded (Argo CD's): an added annotation is the only
    change in every unit the stack has."""
    text = path.read_text(encoding="utf-8")
    after = edit_text(text, lambda docs: set_annotation(docs, ["example.dev/edited", "yes"]))
    if after is None:
        return
    other = [
        line
        for line in _changed(text, after)
        if "example.dev/edited" not in line and not line.endswith("annotations:")
    ]
    assert other == []
    edited = load_docs(text)
    set_annotation(edited, ["example.dev/edited", "yes"])
    assert same_tree(load_docs(after), edited)  # meaning: exactly the edit


# a scalar folded over lines, as upstream manifests write long descriptions and commands
FOLDED = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    description: a long text that its author folded over two lines at eighty
      columns, as upstream does
spec:
  replicas: 1
  template:
    spec:
      containers:
      - name: web
        command:
        - /bin/sh
        - -c
        - /bin/cp /usr/local/bin/tool /var/run/tool && /bin/ln -sf /var/run/tool
          /var/run/tool-server
        image: "web:1"
"""


def _annotate(key: str, value: str):
    def edit(docs: list) -> bool:
        docs[0]["metadata"]["annotations"][key] = value
        return True

    return edit


def test_an_edit_beside_a_folded_line_changes_only_its_own_line():
    """The field right after a folded scalar, and one added right after another: the folded
    lines stay as written (the edit is placed on the original text, and reads as the edit)."""
    after = edit_text(FOLDED, lambda docs: set_replicas(docs, ["3"]))
    assert after is not None
    assert _changed(FOLDED, after) == ["-  replicas: 1", "+  replicas: 3"]
    after = edit_text(FOLDED, _annotate("owner", "team-a"))
    assert after is not None
    assert _changed(FOLDED, after) == ["+    owner: team-a"]
    expected = load_docs(FOLDED)
    expected[0]["metadata"]["annotations"]["owner"] = "team-a"
    assert same_tree(load_docs(after), expected)


def test_an_edit_of_a_folded_scalar_means_exactly_the_edit():
    """Rewriting the folded value itself touches lines the round trip changed: the edit cannot
    be placed on the original, so the top-level entry it is in (`metadata`) is written as its
    round trip, with the edit's meaning; an entry it does not touch (`spec`, with a fold of its
    own) stays as written."""
    after = edit_text(FOLDED, _annotate("description", "short now"))
    assert after is not None
    assert "    description: short now\n" in after
    assert FOLDED[FOLDED.index("spec:") :] in after  # the other fold kept
    expected = load_docs(FOLDED)
    expected[0]["metadata"]["annotations"]["description"] = "short now"
    assert same_tree(load_docs(after), expected)


def test_a_text_whose_round_trip_is_itself_is_written_once(monkeypatch):
    """Where nothing spans lines, ruamel's round trip is the text itself: only the top-level
    entry the edit changed is written (here `spec`, not the comments and `metadata` before it),
    once, and the answer is the original with that entry's text in its place."""
    import eksinf.core.roundtrip as roundtrip

    text = (REPO / "configs" / "inference-workloads" / "vllm.yaml").read_text()
    real = roundtrip._dump
    dumps: list[str] = []
    monkeypatch.setattr(roundtrip, "_dump", lambda *a: dumps.append(real(*a)) or dumps[-1])
    after = edit_text(text, lambda docs: set_replicas(docs, ["3"]))
    assert after is not None and len(dumps) == 1
    entry = dumps[0].removesuffix(f"{roundtrip._REGION_END}: true\n")
    assert entry.startswith("spec:\n  replicas: 3\n")
    start = text.index("spec:\n")
    end = text.index("\n---\n", start) + 1  # the next document, a Service, as written
    assert after == text[:start] + entry + text[end:]
    dumps.clear()
    after = edit_text(FOLDED, lambda docs: set_replicas(docs, ["3"]))
    assert len(dumps) == 2 and after not in dumps  # the unedited and the edited round trips


def test_a_placed_edit_must_read_as_the_round_trip_does():
    """Placing refuses a hunk on lines where the original and its round trip differ, and a
    result whose reading is not the edited one (key order and types included)."""
    original = "a: 'x'\nb: 1\n"
    unedited = "a: x\nb: 1\n"  # differs from the original on its first line
    edited = "a: x\nb: 2\n"
    meaning = load_docs(edited)
    assert _placed(original, unedited, edited, meaning, "t") == "a: 'x'\nb: 2\n"
    assert _placed(original, unedited, "a: z\nb: 1\n", load_docs("a: z\nb: 1\n"), "t") is None
    # a first line that reads otherwise than the round trip's: the result is not the edit
    assert _placed("a: y\nb: 1\n", unedited, edited, meaning, "t") is None
    assert _placed(original, unedited, "a: x\nb: '2'\n", meaning, "t") is None


def test_a_new_string_kubernetes_would_read_otherwise_is_quoted():
    text = (REPO / "configs" / "inference-workloads" / "vllm.yaml").read_text()
    after = edit_text(text, lambda docs: set_env_var(docs, ["vllm", "HF_HOME", "on"]))
    assert after is not None
    assert "+              value: 'on'" in _changed(text, after)
    env = load_docs(after)[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "HF_HOME", "value": "on"} in env


def test_where_the_readers_disagree_the_meaning_wins_over_the_layout():
    """`yes` is true to Kubernetes (YAML 1.1) and text to ruamel (YAML 1.2): the edit runs on
    yamlio's reading and the entry it is in is written in eksinf's style; the lines outside that
    entry (a comment, `metadata`) stay as written."""
    text = (
        "# a comment\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n"
        "spec:\n  paused: yes\n  replicas: 1\n"
    )
    after = edit_text(text, lambda docs: set_replicas(docs, ["2"]))
    assert after is not None
    assert after.startswith("# a comment\napiVersion: apps/v1\n")
    assert after.endswith("spec:\n  paused: true\n  replicas: 2\n")
    doc = load_docs(after)[0]
    assert doc["spec"] == {"paused": True, "replicas": 2}


def test_an_edit_that_changes_nothing_needs_no_round_trip(monkeypatch):
    """A rerun's edits mostly change nothing: that is known from yamlio's documents alone, so
    ruamel never parses the unit; an edit that does change it parses the entry it changes
    alone, and still keeps the layout."""
    import eksinf.core.roundtrip as roundtrip

    text = (REPO / "configs" / "inference-workloads" / "vllm.yaml").read_text()
    real = roundtrip._yaml
    parses: list[str] = []
    monkeypatch.setattr(roundtrip, "_yaml", lambda t, layout: parses.append(t) or real(t, layout))
    assert edit_text(text, lambda docs: set_replicas(docs, ["0"])) is None
    assert parses == []
    after = edit_text(text, lambda docs: set_replicas(docs, ["3"]))
    assert after is not None and len(parses) == 1 and parses[0].startswith("spec:\n")
    assert _changed(text, after) == ["-  replicas: 0", "+  replicas: 3"]


def test_an_edit_of_a_large_unit_round_trips_only_the_entries_it_changes(monkeypatch):
    """A label on every document of Argo CD's CRD unit (1.8 MB, three CRDs): ruamel parses only
    the three `metadata:` entries, never a CRD's schema, and the unit gains exactly the three
    lines, meaning exactly the edit."""
    import eksinf.core.roundtrip as roundtrip

    text = (REPO / "configs" / "argocd" / "argocd-crds.yaml").read_text()
    real = roundtrip._yaml
    parses: list[str] = []
    monkeypatch.setattr(roundtrip, "_yaml", lambda t, layout: parses.append(t) or real(t, layout))
    after = edit_text(text, lambda docs: set_annotation(docs, ["example.dev/owner", "team-a"]))
    assert after is not None
    assert len(parses) == 3 and all(p.startswith("metadata:\n") for p in parses)
    assert sum(map(len, parses)) < 10_000
    assert _changed(text, after) == ["+    example.dev/owner: team-a"] * 3
    expected = load_docs(text)
    set_annotation(expected, ["example.dev/owner", "team-a"])
    assert same_tree(load_docs(after), expected)


_SPEC = FOLDED.index("spec:")


@pytest.mark.parametrize(
    ("change", "kept"),
    [
        (lambda d: d[0]["spec"]["template"]["spec"]["containers"][0].update(image="web:2"),
         FOLDED[:_SPEC]),
        (lambda d: d[0]["spec"]["template"]["spec"]["containers"][0]["command"].pop(),
         FOLDED[:_SPEC]),
        (lambda d: d[0]["spec"].update(paused=True), FOLDED[:_SPEC]),
        (lambda d: d[0]["metadata"].pop("annotations"), FOLDED[_SPEC:]),
        (lambda d: d[0].update(status={"replicas": 1}), None),  # a new top-level entry
        (lambda d: d[0].pop("spec"), None),
    ],
    ids=["list-item-field", "list-shorter", "key-added", "key-removed", "top-added", "top-gone"],
)  # fmt: skip
def test_any_edit_of_an_entry_means_exactly_the_edit(change, kept):
    """Whatever an edit does inside a top-level entry (a field of a list item, a shorter list, a
    key added or removed), or to the entries themselves, the unit reads as the edit; the lines
    of an entry it did not touch stay as written."""

    def edit(docs: list) -> bool:
        change(docs)
        return True

    after = edit_text(FOLDED, edit)
    assert after is not None
    expected = load_docs(FOLDED)
    edit(expected)
    assert same_tree(load_docs(after), expected)
    if kept is not None:
        assert kept in after


def test_a_block_an_edit_adds_is_indented_as_the_unit_indents_its_own():
    """An entry round-tripped on its own (`metadata:`, which holds no list) writes a new list as
    the rest of the unit writes lists (vllm.yaml indents them under their key)."""

    def edit(docs: list) -> bool:
        docs[0]["metadata"]["finalizers"] = ["example.dev/keep"]
        return True

    text = (REPO / "configs" / "inference-workloads" / "vllm.yaml").read_text()
    assert "tolerations:\n        - key:" in text  # the unit's own style
    after = edit_text(text, edit)
    assert after is not None
    assert _changed(text, after) == ["+  finalizers:", "+    - example.dev/keep"]


@pytest.mark.parametrize("path", UNITS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_unit_reads_as_an_edit_that_changes_and_removes(path):
    """A value changed and an entry removed in every document of every unit the stack has (the
    name renamed, the sync wave dropped): the unit reads exactly as the edited documents, and
    only `metadata:` lines change."""

    def edit(docs: list) -> bool:
        for doc in docs:
            meta = doc["metadata"]
            meta["name"] = meta["name"] + "-renamed"
            (meta.get("annotations") or {}).pop("argocd.argoproj.io/sync-wave", None)
        return True

    text = path.read_text(encoding="utf-8")
    after = edit_text(text, edit)
    assert after is not None
    expected = load_docs(text)
    edit(expected)
    assert same_tree(load_docs(after), expected)
    # lines gained or lost, counted (difflib would show a unit's oft-repeated label lines as
    # changed when a neighbour is)
    before_lines, after_lines = Counter(text.splitlines()), Counter(after.splitlines())
    changed = list((before_lines - after_lines) + (after_lines - before_lines))
    assert all(any(part in line for part in ("name: ", "sync-wave", "annotations:"))
               for line in changed), changed  # fmt: skip


def test_an_entry_that_is_not_read_alone_falls_back_to_the_whole_text():
    """`data` holds an alias of an anchor in `metadata`: read alone it does not parse, so the
    whole unit goes through the round trip, and reads as the edit."""
    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels: &l\n    a: b\n"
        "data:\n  copy: *l\n  other: y\n"
    )

    def edit(docs: list) -> bool:
        docs[0]["data"]["other"] = "z"
        return True

    after = edit_text(text, edit)
    assert after is not None
    assert load_docs(after)[0]["data"] == {"copy": {"a": "b"}, "other": "z"}
