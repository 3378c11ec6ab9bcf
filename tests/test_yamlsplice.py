"""A pinned manifest keeps its own text, with its stamps spliced in (core/yamlsplice): what the
units mean is exactly what parsing the manifest and stamping it gives, for every document of every
shipped manifest, and for odd shapes, which are either spliced right or written again."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from conftest import MIRROR

from eksinf.build import manifestsplit
from eksinf.build.manifests import ResolvedManifest
from eksinf.build.render import render_stack
from eksinf.build.units import CONTROLLER_WAVE, CRD_WAVE, Unit
from eksinf.core.yamldump import dump_docs
from eksinf.core.yamlio import load_docs
from eksinf.model.configs import SYNC_WAVE
from eksinf.model.resources import CLUSTER_SCOPED_KINDS
from eksinf.model.stack import load_stack

REPO = Path(__file__).resolve().parents[1]
MANIFESTS = MIRROR.parent / "manifests"


def stamped(text: str, namespace: str = "argocd") -> list[Any]:
    """What the units must mean: the manifest's documents, each with its namespace (when
    namespaced and without one) and its sync wave, CRDs after the rest as the units hold them."""
    docs = load_docs(text, cached=False)
    for doc in docs:
        meta = doc.setdefault("metadata", {})
        if doc["kind"] not in CLUSTER_SCOPED_KINDS:
            meta.setdefault("namespace", namespace)
        crd = doc["kind"] == "CustomResourceDefinition"
        meta["annotations"] = meta.get("annotations") or {}
        meta["annotations"][SYNC_WAVE] = CRD_WAVE if crd else CONTROLLER_WAVE
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    return [d for d in docs if d["kind"] != "CustomResourceDefinition"] + crds


def split(text: str) -> list[Unit]:
    """manifest_units over `text` as the stack's argocd manifest, with nothing excluded."""
    stack = load_stack(REPO)
    comp = next(c for c in stack.components if c.manifests)
    spec = dataclasses.replace(comp.manifests[0], exclude=())
    comp = dataclasses.replace(comp, manifests=(spec,))
    units, _ = manifestsplit.manifest_units(
        stack, comp, {spec.name: ResolvedManifest(spec, text, "0" * 64, "test")}
    )
    return sorted(units, key=lambda u: u.filename)  # controller, then crds


def meaning(units: list[Unit]) -> str:
    """The units' documents as read back, key order and types included (repr tells 1, True
    and "1" apart, and a dict's order)."""
    return repr([d for u in units for d in load_docs(u.text, cached=False)])


def rewritten(units: list[Unit]) -> bool:
    """Whether the units were written again: upstream's comment (`# kept`, on a line the
    splicer does not touch) is gone."""
    return not any("# kept" in u.text for u in units)


SHIPPED = sorted(MANIFESTS.rglob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(MANIFESTS)))
def test_every_shipped_manifest_means_exactly_its_stamped_documents(path):
    text = path.read_text()
    units = split(text)
    expected = repr(stamped(text))
    assert meaning(units) == expected
    assert repr([d for u in units for d in u.parsed or ()]) == expected
    # every document kept its own text: none was written again (the re-emit path quotes '' and
    # folds nothing, upstream writes "" and folds long lines)
    assert all(u.text != dump_docs(list(u.parsed or ())) for u in units)


def test_the_stacks_argocd_units_keep_upstreams_text(stack_dir):
    """The manifest as the stack resolves it (the lock, the mirror, the exclude entries)."""
    result = render_stack(load_stack(stack_dir), MIRROR, components=["argocd"])
    (out,) = [o for o in result.outputs if o.component.name == "argocd"]
    upstream = (MANIFESTS / "argo-cd-v3.4.7-install.yaml").read_text()
    for unit in out.units:
        assert repr(load_docs(unit.text, cached=False)) == repr(list(unit.docs))
    crds = next(u for u in out.units if u.filename == "argocd-crds.yaml")
    # a CRD's schema is upstream's text, line for line
    schema = upstream[upstream.index("  versions:\n") : upstream.index("\n---\n")]
    assert schema in crds.text
    expected = [d for d in stamped(upstream) if d["kind"] != "Secret"]
    units = sorted(
        (u for u in out.units if u.filename.startswith("argocd-")), key=lambda u: u.filename
    )
    assert meaning(units) == repr(expected)


def test_the_same_manifest_gives_the_same_bytes():
    text = (MANIFESTS / "argo-cd-v3.4.7-install.yaml").read_text()
    assert [u.text for u in split(text)] == [u.text for u in split(text)]


HEAD = "apiVersion: v1\nkind: ConfigMap # kept\n"
CASES = {
    # shape -> (text, spliced: True when the stamps are written into upstream's text)
    "plain": (HEAD + "metadata:\n  name: a\ndata:\n  k: v\n", True),
    "leading marker and comment": ("# generated\n---\n" + HEAD + "metadata:\n  name: a\n", True),
    "end marker": (HEAD + "metadata:\n  name: a\n...\n---\n" + HEAD + "metadata:\n  name: b\n", True),
    "list at column 0": ("apiVersion: v1 # kept\nkind: List\nmetadata:\n  name: a\nitems:\n- a\n- b\n", True),
    "metadata last, blank lines after": (HEAD + "metadata:\n  name: a\n\n\n", True),
    "comments inside metadata": (
        HEAD + "metadata:\n  # who\n  name: a # trailing\n  labels:\n    x: y\n# at column 0\n"
        "data:\n  k: v\n",
        True,
    ),
    "annotations as a block": (
        HEAD + "metadata:\n  annotations:\n    a: b\n    c: |\n      text\n  name: a\n", True
    ),
    "annotations indented by 4": (
        HEAD + "metadata:\n    annotations:\n        a: b\n    name: a\ndata:\n    k: v\n", True
    ),
    "namespace given": (HEAD + "metadata:\n  name: a\n  namespace: other\n", True),
    "a keep block last in metadata": (
        HEAD + "metadata:\n  name: a\n  annotations:\n    note: |+\n      kept\n\n\ndata: {}\n",
        False,
    ),
    "flow-style metadata": (HEAD + "metadata: {name: a, labels: {x: y}}\n", False),
    "annotations in flow style": (HEAD + "metadata:\n  annotations: {a: b}\n  name: a\n", False),
    "null annotations": (HEAD + "metadata:\n  annotations:\n  name: a\n", False),
    "quoted key": ('apiVersion: v1 # kept\n"kind": ConfigMap\nmetadata:\n  name: a\n', False),
    "quoted metadata key": (HEAD + '"metadata":\n  name: a\n', False),
    "existing sync wave": (
        HEAD + f"metadata:\n  annotations:\n    {SYNC_WAVE}: '5'\n  name: a\n", False
    ),
    "no metadata": (HEAD + "data:\n  k: v\n", False),
    "document indented by 4": (
        "    apiVersion: v1 # kept\n    kind: ConfigMap\n    metadata:\n      name: a\n", False
    ),
    "CRLF": ((HEAD + "metadata:\n  name: a\n").replace("\n", "\r\n"), False),
    "a key after NEL, a line break to YAML": (
        'apiVersion: v1\nkind: ConfigMap # kept\ndata: "x"\x85metadata:\n  name: a\n', False
    ),
    "anchor in metadata": (
        HEAD + "metadata:\n  labels: &l\n    x: y\n  name: a\ndata:\n  copy: *l\n", False
    ),
    "alias into metadata": (
        HEAD + "data: &d\n  x: y\nmetadata:\n  labels: *d\n  name: a\n", False
    ),
    "multi-line string at column 0 that looks like a key": (
        'apiVersion: v1 # kept\nkind: ConfigMap\ndata: "one\nmetadata: two"\nmetadata:\n  name: a\n',
        False,
    ),
    "a tag": (HEAD + "metadata:\n  name: !!str a\n", True),
    "directive": ("%YAML 1.1\n---\n" + HEAD + "metadata:\n  name: a\n", False),
    "content on the marker line": ("--- !!map\n" + HEAD + "metadata:\n  name: a\n", False),
    "no final line break": (HEAD + "metadata:\n  name: a", False),
    "a null document between": (HEAD + "metadata:\n  name: a\n---\n~\n---\n" + HEAD
                                + "metadata:\n  name: b\n", False),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_odd_shape_is_spliced_right_or_written_again(name):
    text, spliced = CASES[name]
    units = split(text)
    assert meaning(units) == repr(stamped(text))
    assert rewritten(units) is not spliced


def test_a_bom_is_not_part_of_the_first_document():
    text = "\ufeff" + HEAD + "metadata:\n  name: a\n"
    units = split(text)
    assert meaning(units) == repr(stamped(text))
    assert not rewritten(units) and "\ufeff" not in units[0].text


def test_one_odd_document_is_written_again_and_the_rest_keep_their_text():
    text = HEAD + "metadata: {name: a}\n---\n" + HEAD + "metadata:\n  name: b # kept\n"
    (unit,) = split(text)
    assert meaning([unit]) == repr(stamped(text))
    assert "metadata:\n  name: a\n" in unit.text and "name: b # kept\n" in unit.text
