"""Code never comes from data: the derived-data cache holds plain data under
an HMAC, in a folder only the user can change, and a run served from it accepts exactly what a
fresh run accepts. Through the CLI where a command reads the cache, with the stack, a decoy
folder, the cache and the hub fingerprinted before and after."""

from __future__ import annotations

import json
import os
import pickle
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import MIRROR
from safety import fingerprint

from eksinf.build.validate import cel
from eksinf.core import cache, yamlio

SRC = Path(__file__).resolve().parent.parent / "src" / "eksinf"
BIG = "".join(f"---\nkind: ConfigMap\nmetadata:\n  name: m{i}\n" for i in range(400))


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh cache root and key for this test; the CRDs the cluster provides come from the
    offline mirror, as on a machine's first run."""
    root = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_ENV, str(root))
    monkeypatch.setenv(cache.KEY_ENV, str(tmp_path / "state" / "eksinf" / "cache.key"))
    monkeypatch.delenv(cache.NO_CACHE_ENV, raising=False)
    monkeypatch.setenv("EKSINF_MANIFEST_MIRROR", str(MIRROR.parent / "manifests"))
    monkeypatch.setenv("EKSINF_CHART_MIRROR", str(MIRROR))
    monkeypatch.setattr(cache, "_warned", set())
    cache._trust.cache_clear()
    yield root
    cache._trust.cache_clear()


def _entries(root: Path) -> list[Path]:
    folder = root / "derived"
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))


class _Planted:
    """A pickle that creates `sentinel` when unpickled: what a hostile cache step would plant."""

    def __init__(self, sentinel: Path) -> None:
        self.sentinel = sentinel

    def __reduce__(self):
        return (open, (str(self.sentinel), "w"))


# ---- no format that builds objects -----------------------------------------------------------


def test_no_module_reads_a_format_that_builds_objects() -> None:
    """pickle, marshal, shelve and YAML's object-building loaders appear nowhere in eksinf."""
    banned = re.compile(
        r"^\s*(import|from)\s+(pickle|cPickle|marshal|shelve|dill|cloudpickle|jsonpickle)\b"
        r"|yaml\.(unsafe_load|full_load)\b|(Unsafe|Full|Unsafe)Loader\b|Loader=yaml\.Loader\b",
        re.MULTILINE,
    )
    found = [
        f"{p.relative_to(SRC)}: {m.group(0).strip()}"
        for p in sorted(SRC.rglob("*.py"))
        for m in banned.finditer(p.read_text())
    ]
    assert found == []


def test_planted_code_in_the_cache_never_runs(private_cache, stack_dir, eksinf, tmp_path):
    """Every file of the derived store (parsed CEL rules included) replaced with a pickle that
    would create a file: validate and sandbox up, with the cache on and switched off, run
    nothing, refuse every planted entry, and say what a fresh run says."""
    sentinel = tmp_path / "ran"
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "keep.txt").write_text("mine")
    fresh = eksinf("validate", "--json", cwd=stack_dir)
    assert fresh.code == 0, fresh.err
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    planted = pickle.dumps(_Planted(sentinel))
    entries = _entries(private_cache)
    assert any(p.parent.name == "cel" for p in entries)  # the parsed rules are in the store
    for entry in entries:
        entry.write_bytes(planted)
    # and where the parsed rules used to be kept, outside the store
    (private_cache / "cel").mkdir()
    (private_cache / "cel" / "rules.pickle").write_bytes(planted)
    sources = [stack_dir / n for n in ("render", "configs", "iam", "components.yaml")]
    before = fingerprint(decoy, *sources)
    for switched_off in ("0", "1"):
        os.environ[cache.NO_CACHE_ENV] = switched_off
        cache._warned.clear()  # as in a new process
        try:
            again = eksinf("validate", "--json", cwd=stack_dir)
            assert again.code == 0, again.err
            assert json.loads(again.out) == json.loads(fresh.out)
            # many forged entries, one line (none when the cache is off: nothing is read)
            assert again.err.count("warning: cache entry") == (switched_off == "0"), again.err
            assert eksinf("sandbox", "down", "--yes", cwd=stack_dir).code == 0
            assert eksinf("sandbox", "up", cwd=stack_dir).code == 0, sentinel
        finally:
            del os.environ[cache.NO_CACHE_ENV]
        assert not sentinel.exists()
    assert fingerprint(decoy, *sources) == before


def test_a_cache_folder_others_may_write_is_neither_read_nor_written(
    private_cache, stack_dir, eksinf, tmp_path
):
    """A CI cache step restored the folder world-writable, with planted entries: validate says
    what a fresh run says, runs nothing, writes nothing there, and warns once."""
    sentinel = tmp_path / "ran"
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "keep.txt").write_text("mine")
    fresh = eksinf("validate", "--json", cwd=stack_dir)
    assert fresh.code == 0, fresh.err
    for entry in _entries(private_cache):
        entry.write_bytes(pickle.dumps(_Planted(sentinel)))
    os.chmod(private_cache, 0o777)
    cache._trust.cache_clear()  # as in a new process
    cache._warned.clear()
    before = fingerprint(private_cache, stack_dir, decoy)
    again = eksinf("validate", "--json", cwd=stack_dir)
    assert again.code == 0, again.err
    assert json.loads(again.out) == json.loads(fresh.out)
    assert again.err.count("warning") == 1
    assert f"cache folder {private_cache} refused: others may write in it" in again.err
    assert fingerprint(private_cache, stack_dir, decoy) == before
    assert not sentinel.exists()


# ---- tampered entries are recomputed ---------------------------------------------------------


def test_a_tampered_entry_is_refused_once_and_recomputed(private_cache, capsys) -> None:
    expected = yamlio.load_docs(BIG)
    [entry] = _entries(private_cache)
    body = entry.read_bytes()
    assert json.loads(body[cache.MAC_BYTES :]) == expected  # plain JSON after the MAC
    forged = json.dumps([{"kind": "Secret"}] * len(expected)).encode()
    entry.write_bytes(body[: cache.MAC_BYTES] + forged)
    assert yamlio.load_docs(BIG) == expected
    assert yamlio.load_docs(BIG) == expected
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == [
        f"eksinf: warning: cache entry {entry} refused: it fails its HMAC check; "
        "derived data is recomputed"
    ]
    assert cache.get("yaml", entry.name) is not None  # the recomputed entry replaced it


def test_an_entry_made_under_another_key_is_refused(private_cache, tmp_path, monkeypatch):
    """A cache folder restored from another machine or job: its entries are well formed, but
    not this user's, so each is recomputed."""
    expected = yamlio.load_docs(BIG)
    [entry] = _entries(private_cache)
    monkeypatch.setenv(cache.KEY_ENV, str(tmp_path / "other" / "cache.key"))
    cache._trust.cache_clear()
    assert cache.get("yaml", entry.name) is None
    assert yamlio.load_docs(BIG) == expected


def test_a_tampered_render_serves_what_a_fresh_render_gives(private_cache, stack_dir, eksinf):
    """Every render-cache entry edited after a warm render (units, CRD schemas, chart output):
    render, verify and validate say exactly what they say with the cache off."""
    assert eksinf("render", cwd=stack_dir).code == 0
    committed = fingerprint(stack_dir / "configs")
    edited = 0
    for entry in _entries(private_cache):
        body = entry.read_bytes()
        changed = body.replace(b"replicas", b"replicaz").replace(b"string", b"strinG")
        if changed != body:
            entry.write_bytes(changed)
            edited += 1
    assert edited > 0
    verify = eksinf("verify", "--json", cwd=stack_dir)
    validate = eksinf("validate", "--json", cwd=stack_dir)
    assert eksinf("render", cwd=stack_dir).code == 0
    assert fingerprint(stack_dir / "configs") == committed
    os.environ[cache.NO_CACHE_ENV] = "1"
    try:
        assert eksinf("verify", "--json", cwd=stack_dir).out == verify.out
        assert eksinf("validate", "--json", cwd=stack_dir).out == validate.out
    finally:
        del os.environ[cache.NO_CACHE_ENV]
    assert verify.code == 0 and validate.code == 0


def test_determinism_records_carry_the_mac_too(private_cache) -> None:
    cache.write_record("render-references", "k", b'{"a": "1"}')
    [entry] = _entries(private_cache)
    assert cache.read_record("render-references", "k") == b'{"a": "1"}'
    entry.write_bytes(entry.read_bytes()[: cache.MAC_BYTES] + b'{"a": "2"}')
    assert cache.read_record("render-references", "k") is None


# ---- the folder, its files and the key are the user's alone ----------------------------------


def test_a_new_cache_is_private(private_cache, tmp_path) -> None:
    yamlio.load_docs(BIG)
    key = tmp_path / "state" / "eksinf" / "cache.key"
    assert stat.S_IMODE(private_cache.stat().st_mode) == 0o700
    assert stat.S_IMODE((private_cache / "derived" / "yaml").stat().st_mode) == 0o700
    assert [stat.S_IMODE(p.stat().st_mode) for p in _entries(private_cache)] == [0o600]
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_size == cache.KEY_BYTES
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700


def test_a_readable_cache_of_the_users_is_made_private(private_cache) -> None:
    private_cache.mkdir(mode=0o755)
    os.chmod(private_cache, 0o755)
    yamlio.load_docs(BIG)
    assert stat.S_IMODE(private_cache.stat().st_mode) == 0o700
    assert len(_entries(private_cache)) == 1


def _refused(private_cache: Path, capsys: pytest.CaptureFixture, why: str) -> None:
    expected = yamlio.load_docs(BIG)  # served fresh: nothing stored, nothing read
    assert yamlio.load_docs(BIG) == expected
    assert cache.get("yaml", "0" * 64) is None
    err = capsys.readouterr().err
    assert err.count("warning") == 1, err
    assert why in err


def test_a_cache_others_may_write_is_refused(private_cache, capsys) -> None:
    private_cache.mkdir()
    os.chmod(private_cache, 0o777)
    _refused(private_cache, capsys, f"cache folder {private_cache} refused: others may write")
    assert not (private_cache / "derived").exists()
    assert stat.S_IMODE(private_cache.stat().st_mode) == 0o777  # not eksinf's to change


def test_a_cache_root_that_is_a_link_is_refused(private_cache, tmp_path, capsys) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    private_cache.symlink_to(target)
    _refused(private_cache, capsys, "it is a symbolic link")
    assert list(target.iterdir()) == []


def test_a_cache_of_another_user_is_refused(private_cache, capsys, monkeypatch) -> None:
    """Stub: no second user exists here, so eksinf is told it runs as another uid."""
    private_cache.mkdir(mode=0o700)
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
    _refused(private_cache, capsys, f"belongs to uid {os.getuid()}, not to you")


def test_an_entry_others_may_read_or_a_link_is_refused(private_cache) -> None:
    yamlio.load_docs(BIG)
    [entry] = _entries(private_cache)
    os.chmod(entry, 0o644)
    assert cache.get("yaml", entry.name) is None
    os.chmod(entry, 0o600)
    assert cache.get("yaml", entry.name) is not None
    link = entry.with_name("0" * 64)
    link.symlink_to(entry)
    assert cache.get("yaml", link.name) is None


@pytest.mark.parametrize("damage", ["link", "readable", "short"])
def test_a_key_that_is_not_private_turns_the_store_off(
    private_cache, tmp_path, capsys, damage
) -> None:
    key = tmp_path / "state" / "eksinf" / "cache.key"
    key.parent.mkdir(parents=True, mode=0o700)
    if damage == "link":
        real = tmp_path / "real.key"
        real.write_bytes(b"k" * cache.KEY_BYTES)
        os.chmod(real, 0o600)
        key.symlink_to(real)
    else:
        key.write_bytes(b"k" * (cache.KEY_BYTES if damage == "readable" else 3))
        os.chmod(key, 0o644 if damage == "readable" else 0o600)
    _refused(private_cache, capsys, f"cache key {key} refused")
    assert not (private_cache / "derived" / "yaml").exists()


# ---- CEL parse trees as JSON -------------------------------------------------------------------


def _rules(stack: Path) -> list[str]:
    found: list[str] = []
    for path in sorted((stack / "configs").rglob("*.yaml")):
        todo = list(yamlio.load_docs(path.read_text()))
        while todo:
            node = todo.pop()
            if isinstance(node, dict):
                for rule in node.get("x-kubernetes-validations") or []:
                    if isinstance(rule, dict) and isinstance(rule.get("rule"), str):
                        found.append(rule["rule"])
                todo.extend(node.values())
            elif isinstance(node, list):
                todo.extend(node)
    return sorted(set(found))


def test_every_cel_rule_of_the_stack_survives_json(stack_dir) -> None:
    """The parse tree rebuilt from JSON is the tree the parser gave, positions included."""
    import celpy

    env = celpy.Environment()
    rules = _rules(stack_dir)
    assert len(rules) > 50
    for rule in rules:
        try:
            tree = env.compile(rule)
        except celpy.CELParseError:
            continue
        plain = cel.tree_to_plain(tree)
        back = cel.tree_from_plain(json.loads(json.dumps(plain)))
        assert back == tree, rule
        assert cel.tree_to_plain(back) == plain, rule


def test_a_rule_from_the_cache_judges_as_a_fresh_parse(private_cache) -> None:
    rules = ["self.size() <= 3", "self.all(x, x.matches('^[a-z]+$'))", "self.name.size( > 1"]
    fresh = cel.Engine(rules)
    served = cel.Engine(rules)  # every rule from the cache
    assert served._parsed == fresh._parsed
    for value in (["a", "b"], ["a", "b", "c", "D"], []):
        assert [served.evaluate(r, value) for r in rules[:2]] == [
            fresh.evaluate(r, value) for r in rules[:2]
        ]
    assert served.evaluate(rules[2], {}).status == cel.NOT_EVALUATED
