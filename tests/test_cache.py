"""The derived-data cache makes parses and serialisations faster, never different."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eksinf.core import cache, yamldump, yamlio

# over yamlio.CACHED_TEXT, so both the parse and the dump go through the cache
BIG = "".join(
    f"---\nkind: ConfigMap\nmetadata:\n  name: m{i}\ndata:\n  k: v{i}\n" for i in range(800)
)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(cache.NO_CACHE_ENV, raising=False)
    return tmp_path / "cache" / "derived" / "yaml"


def _entries(folder: Path) -> list[Path]:
    return (
        sorted(p for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []
    )


def test_a_parse_is_stored_and_served_equal(cache_dir: Path) -> None:
    first = yamlio.load_docs(BIG)
    assert len(_entries(cache_dir)) == 1
    again = yamlio.load_docs(BIG)
    assert again == first and len(again) == 800
    again[0]["kind"] = "Changed"  # a served parse is a fresh object, not shared state
    assert yamlio.load_docs(BIG)[0]["kind"] == "ConfigMap"


def test_a_parse_of_text_beyond_ascii_is_served_equal(cache_dir: Path) -> None:
    """Entries are UTF-8 JSON, characters beyond ASCII (one beyond the BMP too) written as
    they are, and read back the same."""
    text = BIG.replace("v1", "grüße 日本 \U0001f680 v1")
    first = yamlio.load_docs(text)
    [entry] = _entries(cache_dir)
    assert json.loads(entry.read_bytes()[cache.MAC_BYTES :].decode("utf-8")) == first
    again = yamlio.load_docs(text)
    assert again == first and again[1]["data"]["k"] == "grüße 日本 \U0001f680 v1"


def test_a_corrupt_entry_is_recomputed(cache_dir: Path) -> None:
    expected = yamlio.load_docs(BIG)
    for entry in _entries(cache_dir):
        entry.write_bytes(b"\x00not marshal data")
    assert yamlio.load_docs(BIG) == expected
    for entry in _entries(cache_dir):
        entry.write_bytes(b"")
    assert yamlio.load_docs(BIG) == expected


def test_a_different_text_is_a_different_entry(cache_dir: Path) -> None:
    yamlio.load_docs(BIG)
    changed = BIG.replace("v799", "v800")
    assert yamlio.load_docs(changed)[-1]["data"]["k"] == "v800"
    assert len(_entries(cache_dir)) == 2


def test_dump_keys_name_types_exactly(cache_dir: Path) -> None:
    """Documents equal as JSON but not as YAML (an int key vs a string key, 1 vs True vs "1")
    never share an entry. (String-keyed documents are written by the fast path, which is quicker
    than a cache lookup and stores nothing.)"""
    filler = {"pad": "x" * (yamlio.CACHED_TEXT + 1)}
    int_key = yamldump.dump_docs([{1: "a", **filler}])
    str_key = yamldump.dump_docs([{"1": "a", **filler}])
    true_key = yamldump.dump_docs([{True: "a", **filler}])
    assert "\n1: a\n" in int_key and "\n'1': a\n" in str_key and "\ntrue: a\n" in true_key
    assert yamldump.dump_docs([{1: "a", **filler}]) == int_key  # now from the cache
    assert yamldump.dump_docs([{True: "a", **filler}]) == true_key
    assert len(_entries(cache_dir)) == 2


def test_no_cache_stores_nothing(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.NO_CACHE_ENV, "1")
    assert len(yamlio.load_docs(BIG)) == 800
    yamldump.dump_docs(yamlio.load_docs(BIG))
    assert _entries(cache_dir) == []


def test_an_unwritable_cache_costs_time_not_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv(cache.CACHE_ENV, str(blocker))
    assert len(yamlio.load_docs(BIG)) == 800
    assert yamldump.dump_docs(yamlio.load_docs(BIG)).count("---\n") == 800


def test_each_space_is_bounded(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "MAX_ENTRIES", 3)
    for i in range(6):
        cache.put("yaml", cache.key(str(i).encode()), b"x")
    assert len(_entries(cache_dir)) == 3


def test_an_oversized_entry_is_never_read_whole(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = yamlio.load_docs(BIG)
    monkeypatch.setattr(cache, "MAX_ENTRY_BYTES", 64)
    [entry] = _entries(cache_dir)
    entry.write_bytes(b"x" * 65)  # larger than any entry eksinf writes
    assert cache.get("yaml", entry.name) is None
    assert yamlio.load_docs(BIG) == expected


def test_keys_are_unambiguous() -> None:
    assert cache.key(b"ab", b"c") != cache.key(b"a", b"bc")


def test_bundle_bytes_are_the_same_with_and_without_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eksinf.publish.bundle import bundle_bytes

    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    files = {"a.yaml": BIG.encode(), "b.yaml": b"kind: ConfigMap\n"}
    fresh = bundle_bytes(files)
    [entry] = (tmp_path / "cache" / "derived" / "gzip").iterdir()
    assert bundle_bytes(files) == fresh
    entry.write_bytes(b"\x1f\x8b not gzip")  # corrupt: recompressed, same bytes
    assert bundle_bytes(files) == fresh
    monkeypatch.setenv(cache.NO_CACHE_ENV, "1")
    assert bundle_bytes(files) == fresh


def test_the_schema_checks_run_on_every_load_with_the_cache_on(
    stack_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No recorded pass stands in for components.yaml's or the profile's schema check (its key
    would have to follow the checker's code): an edit after a passing load is refused."""
    from eksinf.errors import EksinfError
    from eksinf.model.profile import check_profile, load_profile
    from eksinf.model.stack import load_stack

    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    stack = load_stack(stack_dir)
    profile = load_profile(stack)
    docs = yamlio.load_source(
        stack_dir / "render/platform-profile/profile.yaml", label="profile.yaml"
    )
    assert check_profile(docs[0], "profile.yaml") == profile
    changed = {**docs[0], "spec": {**docs[0]["spec"], "region": 7}}
    for _ in range(2):
        with pytest.raises(EksinfError, match="spec.region: 7 is not of type 'string'"):
            check_profile(changed, "profile.yaml")
    path = stack_dir / "components.yaml"
    path.write_text(path.read_text().replace("plane: mgmt", "plane: 7", 1))
    with pytest.raises(EksinfError, match="is not of type 'string'"):
        load_stack(stack_dir)


def test_the_code_digest_follows_every_write_to_a_module(
    cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source digest is kept under the modules' stat once they are settled; an edit that
    keeps a module's size and modification time still changes its change time (in a later
    tick of the file system's clock, which settling guarantees), so it is taken afresh."""
    import os
    import time

    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("A = 1\n")
    (package / "sub" / "b.py").write_text("B = 2\n")
    (package / "notes.txt").write_text("not a module\n")
    assert cache.package_digest(str(package)) == cache.package_digest(str(package))
    assert not list((cache_dir.parent / "code").glob("*"))  # just written: not kept
    later = time.time_ns() + 2 * cache.SETTLED_NS
    monkeypatch.setattr(time, "time_ns", lambda: later)  # as if they were written long ago
    first = cache.package_digest(str(package))
    reads: list[str] = []
    real_read = cache._module_bytes

    def counted(path: str, size: int) -> bytes:
        reads.append(path)
        return real_read(path, size)

    monkeypatch.setattr(cache, "_module_bytes", counted)
    assert cache.package_digest(str(package)) == first and not reads  # kept: nothing read
    before = os.stat(package / "a.py")
    (package / "a.py").write_text("A = 2\n")  # the same size
    os.utime(package / "a.py", ns=(before.st_atime_ns, before.st_mtime_ns))  # and mtime
    while os.stat(package / "a.py").st_ctime_ns == before.st_ctime_ns:  # a later tick
        os.utime(package / "a.py", ns=(before.st_atime_ns, before.st_mtime_ns))
    changed = cache.package_digest(str(package))
    assert changed != first and reads
    monkeypatch.setenv("EKSINF_NO_CACHE", "1")  # nothing kept: read and hashed every time
    assert cache.package_digest(str(package)) == changed
    (package / "notes.txt").write_text("still not a module\n")
    assert cache.package_digest(str(package)) == changed


def test_an_entry_is_written_whole_even_in_short_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The MAC and the data go out in one writev; one that writes less is continued."""
    import os

    real = os.writev
    monkeypatch.setattr(os, "writev", lambda fd, parts: real(fd, [bytes(parts[0][:5])]))
    cache.write_private(tmp_path / "entry", b"0123456789" * 4, b"", b"abcdefg")
    assert (tmp_path / "entry").read_bytes() == b"0123456789" * 4 + b"abcdefg"
    assert (tmp_path / "entry").stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]  # no temporary file left


def test_a_space_is_bounded_across_a_run_of_writes(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The space is listed on its first write and when the run's count passes the bound."""
    monkeypatch.setattr(cache, "MAX_ENTRIES", 5)
    listed: list[int] = []
    real = cache._prune
    monkeypatch.setattr(cache, "_prune", lambda f, b, k: listed.append(b) or real(f, b, k))
    for i in range(12):
        cache.put("yaml", cache.key(str(i).encode()), b"x")
    assert len(_entries(cache_dir)) == 5
    assert len(listed) < 12


def test_a_space_removed_during_a_run_is_made_again(cache_dir: Path) -> None:
    import shutil

    cache.put("yaml", "a", b"x")
    shutil.rmtree(cache_dir)
    cache.put("yaml", "b", b"y")  # lost: the folder went
    cache.put("yaml", "c", b"z")
    assert [p.name for p in _entries(cache_dir)] == ["c"]
    assert cache_dir.stat().st_mode & 0o777 == 0o700


def test_a_full_space_is_pruned_below_its_bound(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over its bound, a space keeps its newest entries, a sixteenth fewer than the bound, so
    the writes that follow do not list it each time."""
    import os

    monkeypatch.setattr(cache, "MAX_ENTRIES", 32)
    for i in range(33):
        cache.put("yaml", f"{i:02}", b"x")
        os.utime(cache_dir / f"{i:02}", ns=(i * 10**9, i * 10**9))  # written in this order
    assert [p.name for p in _entries(cache_dir)] == [f"{i:02}" for i in range(3, 33)]


def test_a_module_is_read_whole_whatever_size_its_stat_gave(tmp_path: Path) -> None:
    """A module written between its stat and its read is hashed as it is now, not cut off at
    the stat's size nor padded."""
    module = tmp_path / "m.py"
    module.write_bytes(b"x = 1\n" * 1000)
    for size in (0, 100, 6000, 9000):
        assert cache._module_bytes(str(module), size) == b"x = 1\n" * 1000
