"""The local hub survives a full disk: a write that does not fit is reported
as disk full (exit 4) and rolled back, the hub opens again once there is space, with its history
intact; "corrupt" is said only when SQLite's own check says so, with the WAL read; and no hint
tells anyone to move a healthy hub aside.

A full filesystem cannot be made here (no small tmpfs), so SQLite is made to run out of room
itself: `PRAGMA max_page_count` caps the database at its current size, and SQLite then fails a
growing write with SQLITE_FULL, the error a full disk gives (the unix VFS maps ENOSPC to it).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from safety import fingerprint

from eksinf.errors import ENVIRONMENT
from eksinf.hub import dbfile
from eksinf.hub.local import LocalHub

UNIT = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  k: v\n"


def content(db_path: Path) -> list[str]:
    """Everything the hub holds, read by SQLite (WAL included), as SQL text."""
    with sqlite3.connect(db_path) as db:
        return list(db.iterdump())


@pytest.fixture
def hub_db(stack_dir: Path, eksinf) -> Path:
    assert eksinf("install", cwd=stack_dir).code == 0
    return stack_dir / ".eksinf" / "hub.db"


def test_a_full_disk_is_disk_full_and_the_hub_keeps_its_history(
    hub_db, eksinf, tmp_path, monkeypatch
):
    stack = hub_db.parent.parent
    before = content(hub_db)
    history_before = eksinf("hub", "history", "aws-network-base", "network", cwd=stack)
    assert history_before.code == 0, history_before.err

    real_connect = dbfile.connect

    def full_disk(path: Path) -> dbfile.Connection:
        db = real_connect(path)
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages}")  # not one page more
        return db

    monkeypatch.setattr(dbfile, "connect", full_disk)
    watched = fingerprint(stack / "render", stack / "configs")
    result = eksinf("hub", "create-variant", "dev", "aws-network-base", cwd=stack)
    assert result.code == ENVIRONMENT, (result.code, result.err)
    assert f"disk full: the hub database {hub_db} cannot grow" in result.err
    assert "Free space on the filesystem" in result.err
    for never in ("corrupt", "move it aside", " mv ", "Traceback"):
        assert never not in result.err, result.err

    # space is free again: the hub opens, nothing was lost and nothing half-written kept
    monkeypatch.setattr(dbfile, "connect", real_connect)
    assert content(hub_db) == before
    assert (
        eksinf("hub", "history", "aws-network-base", "network", cwd=stack).out == history_before.out
    )
    retry = eksinf("hub", "create-variant", "dev", "aws-network-base", cwd=stack)
    assert retry.code == 0, retry.err
    assert fingerprint(stack / "render", stack / "configs") == watched


def wal_snapshot(tmp_path: Path, stack: Path) -> Path:
    """A hub copied while its writer still had it open: its committed data is in hub.db-wal
    only (no checkpoint ran), as after a crash or a checkpoint cut short."""
    live = tmp_path / "live" / "hub.db"
    hub = LocalHub(live)
    try:
        hub._db.execute("PRAGMA wal_autocheckpoint = 0")
        hub.create_space("app-base", {"Component": "app"})
        hub.create_unit("app-base", "web", UNIT)
        hub.update_unit("app-base", "web", UNIT.replace("k: v", "k: w"), "second")
        copy = stack / ".eksinf" / "hub.db"
        copy.parent.mkdir(parents=True)
        shutil.copyfile(live, copy)
        shutil.copyfile(live.with_name("hub.db-wal"), copy.with_name("hub.db-wal"))
    finally:
        hub.close()
    return copy


def test_a_hub_whose_committed_data_is_in_its_wal_is_healthy(tmp_path, stack_dir, eksinf):
    db = wal_snapshot(tmp_path, stack_dir)
    # a checkpoint cut short by a full disk: page 1 (with a larger page count) written, the
    # file not yet extended; every committed page is still in the WAL
    head = bytearray(db.read_bytes())
    page_size = int.from_bytes(head[16:18], "big")
    claimed = len(head) // page_size + 8
    head[28:32] = claimed.to_bytes(4, "big")
    db.write_bytes(bytes(head))
    assert db.stat().st_size < claimed * page_size
    assert dbfile.sqlite_verdict(db) == (True, "ok")

    result = eksinf("hub", "history", "app-base", "web", cwd=db.parent.parent)
    assert result.code == 0, result.err
    assert "second" in result.out
    hub = LocalHub(db)
    try:
        assert "k: w" in hub.unit_data("app-base", "web")
        assert hub.unit_data("app-base", "web", 1) == UNIT
    finally:
        hub.close()


def test_corrupt_is_said_only_when_sqlite_finds_it(tmp_path, stack_dir, eksinf):
    db = wal_snapshot(tmp_path, stack_dir)
    stack = db.parent.parent
    # the same short file without the WAL that held the data: now SQLite finds damage
    db.with_name("hub.db-wal").unlink()
    head = bytearray(db.read_bytes())
    page_size = int.from_bytes(head[16:18], "big")
    head[28:32] = (len(head) // page_size + 8).to_bytes(4, "big")
    db.write_bytes(bytes(head))
    assert dbfile.sqlite_verdict(db) == (False, "database disk image is malformed")
    before = fingerprint(tmp_path)
    result = eksinf("hub", "spaces", cwd=stack)
    assert result.code == ENVIRONMENT, result.err
    assert f"hub database {db} is corrupt or truncated" in result.err
    assert "SQLite's quick_check: database disk image is malformed" in result.err
    assert fingerprint(tmp_path) == before  # checked on a copy: no -wal/-shm left beside it


def test_a_new_hub_the_disk_cannot_hold_leaves_nothing_behind(tmp_path, monkeypatch):
    """Creating the hub needs room for its schema; a full disk then fails it as disk full and
    removes the file it had just created, which the next run would otherwise refuse as an empty
    file that is not a hub."""
    from eksinf.hub.protocol import Unavailable

    real_connect = dbfile.connect

    def full_disk(path: Path) -> dbfile.Connection:
        db = real_connect(path)
        db.execute("PRAGMA max_page_count = 1")
        return db

    path = tmp_path / "hub" / "hub.db"
    monkeypatch.setattr(dbfile, "connect", full_disk)
    with pytest.raises(Unavailable, match="disk full: the hub database"):
        LocalHub(path)
    assert sorted(p.name for p in path.parent.iterdir()) == []
    monkeypatch.setattr(dbfile, "connect", real_connect)
    LocalHub(path).close()  # space again: a new hub
    assert path.stat().st_size > 0
