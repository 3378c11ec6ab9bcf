"""Cached admission verdicts: a document checked before is not checked again, anything new or
changed is checked by every rule, and the cache changes no verdict (validate.admission)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import MIRROR
from test_validate import NODEPOOLS, edit, invalid, run

from eksinf.build.validate import admission
from eksinf.build.validate.admission import Admission, Finding, Verdict
from eksinf.core import cache
from eksinf.errors import CONTRACT


@pytest.fixture
def verdicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache of this test's own; the folder its verdicts go to."""
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(cache.NO_CACHE_ENV, raising=False)
    # an empty cache: the CRDs the cluster provides come from the offline mirror again
    monkeypatch.setenv("EKSINF_MANIFEST_MIRROR", str(MIRROR.parent / "manifests"))
    return tmp_path / "cache" / "derived" / admission.VERDICTS


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The resources each run checked by its rules (not served from the cache)."""
    seen: list[str] = []
    real = Admission._check_doc

    def spy(self, report, unit, doc, *args):
        seen.append(admission._resource(doc))
        return real(self, report, unit, doc, *args)

    monkeypatch.setattr(Admission, "_check_doc", spy)
    return seen


def entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))


def broken_limit(doc: dict) -> None:
    doc["spec"]["limits"]["cpu"] = "lots"


def test_a_warm_run_checks_nothing_and_a_changed_document_is_checked_again(
    stack_dir, eksinf, verdicts, checked
):
    code, first = run(eksinf, stack_dir)
    assert code == 0 and first["invalid"] == 0
    assert len(checked) > 100 and len(entries(verdicts)) > 100
    checked.clear()
    code, again = run(eksinf, stack_dir)
    assert (code, again) == (0, first)
    assert checked == []  # every verdict came from the cache

    # a schema violation in one NodePool: its new bytes have no verdict, so it is checked, and
    # the clean verdict of its old bytes is not reused
    edit(stack_dir, NODEPOOLS, "general", broken_limit)
    code, broken = run(eksinf, stack_dir)
    assert code == CONTRACT
    assert {(f["resource"], f["path"]) for f in invalid(broken)} == {
        ("karpenter.sh/v1 NodePool general", "spec.limits.cpu")
    }
    # that document raw and resolved (the profile writes into it); the rest from the cache
    assert set(checked) == {"karpenter.sh/v1 NodePool general"}
    checked.clear()
    code, cached = run(eksinf, stack_dir)
    assert (code, cached) == (CONTRACT, broken)
    assert checked == []


def test_a_forged_verdict_is_ignored_and_the_document_checked(
    stack_dir, eksinf, verdicts, checked, monkeypatch
):
    edit(stack_dir, NODEPOOLS, "general", broken_limit)
    code, first = run(eksinf, stack_dir)
    assert code == CONTRACT and invalid(first)
    # every entry now says "admitted, nothing found", its HMAC left as it was
    clean = json.dumps(
        {"findings": [], "schema": "crd", "rules": 0, "transitions": 0, "counted": []}
    ).encode()
    for entry in entries(verdicts):
        entry.write_bytes(entry.read_bytes()[: cache.MAC_BYTES] + clean)
    checked.clear()
    monkeypatch.setattr(cache, "_warned", set())  # as in a new process: warned once
    result = eksinf("validate", "--json", cwd=stack_dir)
    assert (result.code, json.loads(result.out)) == (CONTRACT, first)
    assert len(checked) > 100  # nothing forged was taken
    assert "fails its HMAC check; derived data is recomputed" in result.err


def test_no_cache_gives_the_same_verdicts_and_output(
    stack_dir, eksinf, verdicts, monkeypatch, checked
):
    edit(stack_dir, NODEPOOLS, "general", broken_limit)

    def both() -> tuple[tuple[int, dict], tuple[int, str, str]]:
        text = eksinf("validate", cwd=stack_dir)
        timing = re.compile(r" in \d+\.\d+s$", re.M)  # the one part that differs run to run
        return run(eksinf, stack_dir), (text.code, text.out, timing.sub("", text.err))

    cold = both()  # an empty cache: checked and stored
    warm = both()  # served from the cache
    monkeypatch.setenv(cache.NO_CACHE_ENV, "1")
    checked.clear()
    off = both()
    assert len(checked) > 100  # with the cache off every document is checked
    assert cold == warm == off
    assert cold[0][0] == CONTRACT and "spec.limits.cpu" in cold[1][1]
    assert "celRulesDistinct" in cold[0][1] and cold[0][1]["celRulesDistinct"] > 0


def test_a_release_gate_admits_the_same_with_and_without_its_cache(
    stack_dir, verdicts, monkeypatch, checked
):
    """The releases sandbox up and deploy publish go through the same cached verdicts."""
    from eksinf.build.validate.release import ReleaseGate
    from eksinf.model import configs
    from eksinf.model.stack import load_stack

    edit(stack_dir, NODEPOOLS, "general", broken_limit)
    units = configs.read_units(stack_dir / "configs", ["karpenter"])
    release = {"nodepools": units["karpenter/nodepools"]}

    def findings() -> list[Finding]:
        return ReleaseGate(load_stack(stack_dir)).check("karpenter-x", release).findings

    fresh = findings()
    assert [f.path for f in fresh if f.status == "invalid"] == ["spec.limits.cpu"]
    checked.clear()
    assert findings() == fresh and checked == []
    monkeypatch.setenv(cache.NO_CACHE_ENV, "1")
    assert findings() == fresh and checked


def test_a_verdict_json_cannot_hold_exactly_is_not_stored() -> None:
    exact = Verdict(
        [Finding("invalid", "", "v1 X a", "spec.a", "type", 1.0)], "builtin", 0, 0, frozenset()
    )
    assert Verdict.from_json(exact.to_json() or b"") == exact
    # an integer key would come back a string key: recomputed every run instead
    inexact = Verdict(
        [Finding("invalid", "", "v1 X a", "spec", "type", {1: "a"})], "", 0, 0, frozenset()
    )
    assert inexact.to_json() is None
    for damaged in (b"", b"[]", b'{"findings": [[1, 2]]}', b'{"findings": [], "schema": 3}'):
        assert Verdict.from_json(damaged) is None


def test_document_digests_name_types_exactly() -> None:
    same = {"a": 1, "b": [True, None, "x"]}
    assert admission.digest(same) == admission.digest(json.loads(json.dumps(same)))
    for other in (
        {"a": 1.0, "b": [True, None, "x"]},
        {"a": True, "b": [True, None, "x"]},
        {"a": "1", "b": [True, None, "x"]},
        {"b": [True, None, "x"], "a": 1},
    ):
        assert admission.digest(other) != admission.digest(same)


def test_an_unchanged_release_is_admitted_from_its_index_and_verdicts_alone(
    stack_dir, verdicts, monkeypatch, checked
):
    """`sandbox up` and `deploy` admit a release by its unit texts: when every document's
    verdict is cached the report is the one `check` gave, with no YAML parsed; a changed text
    (or the cache off) goes the whole way."""
    from eksinf.build.validate.release import ReleaseGate
    from eksinf.core import yamlio
    from eksinf.model import configs
    from eksinf.model.stack import load_stack

    edit(stack_dir, NODEPOOLS, "general", broken_limit)
    karpenter = stack_dir / "configs" / "karpenter"
    texts = {s: (karpenter / f"{s}.yaml").read_text() for s in ("nodepools", "karpenter-crds")}
    units = {slug: yamlio.load_docs(text) for slug, text in texts.items()}
    gate = ReleaseGate(load_stack(stack_dir))
    assert gate.check_texts("karpenter-x", texts) is None  # nothing cached yet
    slow = gate.check("karpenter-x", units)
    gate.remember(texts, units)
    assert [f.path for f in slow.findings if f.status == "invalid"] == ["spec.limits.cpu"]
    assert checked  # checked by its rules

    parsed: list[str] = []
    real_parse = configs.parse_unit
    monkeypatch.setattr(configs, "parse_unit", lambda *a: parsed.append(a[1]) or real_parse(*a))
    monkeypatch.setattr(yamlio, "load_docs", lambda *a, **k: parsed.append("release"))
    checked.clear()
    fast = ReleaseGate(load_stack(stack_dir)).check_texts("karpenter-x", texts)
    assert fast is not None and fast.as_dict() == slow.as_dict()
    assert fast.findings == slow.findings
    assert (checked, parsed) == ([], [])

    # one byte more in a unit: no index, no verdicts for it: the whole way again
    changed = {**texts, "nodepools": texts["nodepools"] + "\n"}
    assert ReleaseGate(load_stack(stack_dir)).check_texts("karpenter-x", changed) is None
    monkeypatch.setenv(cache.NO_CACHE_ENV, "1")
    assert ReleaseGate(load_stack(stack_dir)).check_texts("karpenter-x", texts) is None


def test_a_warm_validate_loads_no_checking_library(stack_dir, eksinf, verdicts):
    """With every verdict cached, jsonschema and the CEL engine are not even imported."""
    import os
    import subprocess
    import sys

    assert run(eksinf, stack_dir)[0] == 0  # fills this test's cache
    probe = (
        "import sys\nfrom eksinf.cli import run\ncode = run(['validate'])\n"
        "print(code, sorted({'jsonschema', 'celpy', 'lark'} & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=stack_dir,
        env={**os.environ},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.split("\n")[0] == "0 []", done.stderr[-800:]


def test_sandbox_sources_unpacked_once_per_bundle(stack_dir, verdicts, monkeypatch):
    """sandbox up reads each component's bundle back through the safe unpack; a bundle made of
    the same files and unpacked to them before is taken as its files, in the unpack's order,
    and is not even built again (its digest is known by the files)."""
    from eksinf.flows import sandbox
    from eksinf.model.stack import load_stack
    from eksinf.publish import bundle

    stack = load_stack(stack_dir)
    first = sandbox.bundled_sources(stack)
    unpacks: list[bytes] = []
    real = sandbox.unpacked_files
    monkeypatch.setattr(sandbox, "unpacked_files", lambda blob: unpacks.append(blob) or real(blob))
    built: list[dict[str, bytes]] = []
    real_build = bundle.bundle_bytes
    monkeypatch.setattr(bundle, "bundle_bytes", lambda f: built.append(f) or real_build(f))
    again = sandbox.bundled_sources(stack)
    assert (unpacks, built) == ([], [])
    assert {k: (list(v.files.items()), v.digest) for k, v in again.items()} == {
        k: (list(v.files.items()), v.digest) for k, v in first.items()
    }
    # another byte in one unit: that bundle alone is unpacked again
    nodepools = stack_dir / NODEPOOLS
    nodepools.write_text(nodepools.read_text() + "\n")
    changed = sandbox.bundled_sources(stack)
    assert len(unpacks) == 1
    assert changed["karpenter"].files["nodepools.yaml"] == nodepools.read_bytes()
    monkeypatch.setenv(cache.NO_CACHE_ENV, "1")
    sandbox.bundled_sources(stack)
    assert len(unpacks) == 1 + len(first)
