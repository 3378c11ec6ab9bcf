"""The local hub's storage: each distinct text stored once, listings that never read a body, and
numbered schema steps that carry an existing hub.db forward with its history.

The first released schema is written out below verbatim (as eksinf created it before content
addressing) and filled with the real rows an `eksinf sandbox up` makes, laid out the way that
schema held them: unit text in `units.data` and again in every `revisions.data`, upload bases as
text. Opening it must carry every revision's text, metadata and history forward.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from eksinf.hub.local import SCHEMA_VERSION, LocalHub
from eksinf.hub.protocol import HubError
from eksinf.hub.schema import STEPS
from eksinf.model.digest import sha256_hex

# The first released schema, verbatim.
V1_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE spaces(
  id TEXT PRIMARY KEY, slug TEXT NOT NULL UNIQUE,
  labels TEXT NOT NULL, annotations TEXT NOT NULL,
  release_target_id TEXT REFERENCES targets(id));
CREATE TABLE targets(
  id TEXT PRIMARY KEY, space_id TEXT NOT NULL REFERENCES spaces(id), slug TEXT NOT NULL,
  registry TEXT NOT NULL, apps_space TEXT, trigger_space_id TEXT REFERENCES spaces(id),
  UNIQUE(space_id, slug));
CREATE TABLE triggers(
  id TEXT PRIMARY KEY, space_id TEXT NOT NULL REFERENCES spaces(id), slug TEXT NOT NULL,
  function TEXT NOT NULL, description TEXT NOT NULL, UNIQUE(space_id, slug));
CREATE TABLE units(
  id TEXT PRIMARY KEY, space_id TEXT NOT NULL REFERENCES spaces(id), slug TEXT NOT NULL,
  target_id TEXT REFERENCES targets(id), head INTEGER NOT NULL, data TEXT NOT NULL,
  data_hash TEXT NOT NULL, placeholders TEXT NOT NULL, validation_errors TEXT NOT NULL,
  upload_base TEXT, upstream_unit_id TEXT, upstream_revision INTEGER,
  last_released INTEGER NOT NULL DEFAULT 0, labels TEXT NOT NULL,
  UNIQUE(space_id, slug));
CREATE INDEX units_target ON units(target_id);
CREATE TABLE revisions(
  unit_id TEXT NOT NULL REFERENCES units(id), num INTEGER NOT NULL, description TEXT NOT NULL,
  data TEXT NOT NULL, data_hash TEXT NOT NULL, PRIMARY KEY(unit_id, num));
CREATE TABLE links(
  id TEXT PRIMARY KEY, slug TEXT NOT NULL, space_id TEXT NOT NULL REFERENCES spaces(id),
  from_unit_id TEXT NOT NULL REFERENCES units(id), to_unit_id TEXT NOT NULL REFERENCES units(id),
  update_type TEXT NOT NULL, body TEXT NOT NULL,
  UNIQUE(from_unit_id, to_unit_id), UNIQUE(space_id, slug));
CREATE INDEX links_to ON links(to_unit_id);
CREATE TABLE releases(
  space_id TEXT NOT NULL REFERENCES spaces(id), num INTEGER NOT NULL, digest TEXT NOT NULL,
  manifest_digest TEXT NOT NULL, unit_count INTEGER NOT NULL, ref TEXT NOT NULL,
  PRIMARY KEY(space_id, num));
"""

UNIT = "inference-workloads-sandbox", "chat"  # linked and resolved: more than one revision


def first_schema_copy(hub_db: Path, old_db: Path) -> None:
    """`old_db` in the first schema, holding the same rows as the hub at `hub_db`."""
    new = sqlite3.connect(hub_db)
    old = sqlite3.connect(old_db)
    old.executescript(V1_SCHEMA)
    old.execute("INSERT INTO meta VALUES('schema_version', '1')")
    for table in ("spaces", "targets", "triggers", "links", "releases"):
        rows = new.execute(f"SELECT * FROM {table}").fetchall()
        for row in rows:
            old.execute(f"INSERT INTO {table} VALUES({','.join('?' * len(row))})", row)
    for row in new.execute(
        "SELECT u.id, u.space_id, u.slug, u.target_id, u.head, b.data, u.data_hash, u.placeholders,"
        " u.validation_errors, (SELECT data FROM blobs WHERE hash=u.upload_base_hash),"
        " u.upstream_unit_id, u.upstream_revision, u.last_released, u.labels"
        " FROM units u JOIN blobs b ON b.hash=u.data_hash"
    ):
        old.execute("INSERT INTO units VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)", row)
    for row in new.execute(
        "SELECT v.unit_id, v.num, v.description, b.data, v.data_hash FROM revisions v "
        "JOIN blobs b ON b.hash=v.data_hash"
    ):
        old.execute("INSERT INTO revisions VALUES(?,?,?,?,?)", row)
    old.commit()
    assert old.execute("PRAGMA user_version").fetchone()[0] == 0  # as the first schema left it
    old.close()
    new.close()


def revisions(db_path: Path) -> dict[tuple[str, str, int], tuple[str, str]]:
    """(space, unit, revision) -> (description, text), read with SQL from either schema."""
    db = sqlite3.connect(db_path)
    columns = {r[1] for r in db.execute("PRAGMA table_info(revisions)")}
    text = "v.data" if "data" in columns else "(SELECT data FROM blobs WHERE hash=v.data_hash)"
    rows = db.execute(
        f"SELECT s.slug, u.slug, v.num, v.description, {text} FROM revisions v "
        "JOIN units u ON u.id=v.unit_id JOIN spaces s ON s.id=u.space_id"
    ).fetchall()
    db.close()
    return {(s, u, n): (d, t) for s, u, n, d, t in rows}


def upload_bases(db_path: Path) -> dict[tuple[str, str], str | None]:
    """(space, unit) -> the text its last upload merged against, from either schema."""
    db = sqlite3.connect(db_path)
    columns = {r[1] for r in db.execute("PRAGMA table_info(units)")}
    base = (
        "u.upload_base"
        if "upload_base" in columns
        else "(SELECT data FROM blobs WHERE hash=u.upload_base_hash)"
    )
    rows = db.execute(
        f"SELECT s.slug, u.slug, {base} FROM units u JOIN spaces s ON s.id=u.space_id"
    ).fetchall()
    db.close()
    return {(s, u): b for s, u, b in rows}


def schema_of(db_path: Path) -> list[tuple[str, str]]:
    db = sqlite3.connect(db_path)
    rows = db.execute(
        "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name"
    ).fetchall()
    db.close()
    return rows


@pytest.fixture
def sandbox(stack_dir: Path, eksinf) -> Path:
    """A stack with a sandbox up, and a restore on top, so a unit has three revisions."""
    assert eksinf("sandbox", "up", cwd=stack_dir).code == 0
    assert eksinf("hub", "restore", *UNIT, "--revision", "1", cwd=stack_dir).code == 0
    return stack_dir


def test_a_hub_in_the_first_schema_is_carried_forward_with_its_history(sandbox, eksinf, tmp_path):
    hub_db = sandbox / ".eksinf" / "hub.db"
    views = {
        "units": ("hub", "units"),
        "history": ("hub", "history", *UNIT),
        "diff": ("hub", "diff", *UNIT, "--from", "1", "--to", "2"),
        "show": ("hub", "show", *UNIT, "--revision", "2"),
    }
    before = {name: eksinf(*args, cwd=sandbox) for name, args in views.items()}
    assert all(r.code == 0 for r in before.values()), before
    assert "+          value: Qwen/" in before["diff"].out  # the link resolved in revision 2
    with LocalHub(hub_db) as hub:
        units_before = hub.list_units()
        history_before = {(u.space, u.slug): hub.history(u.space, u.slug) for u in units_before}
    texts_before = revisions(hub_db)
    bases_before = upload_bases(hub_db)
    assert sum(b is not None for b in bases_before.values()) > 10  # the bases' uploads
    assert max(n for _, _, n in texts_before) == 3

    old = tmp_path / "old.db"
    first_schema_copy(hub_db, old)
    assert revisions(old) == texts_before
    assert upload_bases(old) == bases_before
    for side in ("", "-wal", "-shm"):
        Path(f"{hub_db}{side}").unlink(missing_ok=True)
    os.replace(old, hub_db)

    after = {name: eksinf(*args, cwd=sandbox) for name, args in views.items()}  # migrates
    assert {n: (r.code, r.out) for n, r in after.items()} == {
        n: (r.code, r.out) for n, r in before.items()
    }
    assert revisions(hub_db) == texts_before
    assert upload_bases(hub_db) == bases_before
    with LocalHub(hub_db) as hub:
        assert hub.list_units() == units_before  # heads, hashes, targets, upstreams, gates
        assert {(u.space, u.slug): hub.history(u.space, u.slug) for u in units_before} == (
            history_before
        )
        for (space, slug, num), (_, text) in texts_before.items():
            assert hub.unit_data(space, slug, num) == text
        assert hub.check() == []
        distinct = {text for _, text in texts_before.values()}
        assert hub._db.execute("SELECT count(*) FROM blobs").fetchone()[0] >= len(distinct)
    db = sqlite3.connect(hub_db)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert db.execute("SELECT value FROM meta").fetchone()[0] == str(SCHEMA_VERSION)
    assert "data" not in {r[1] for r in db.execute("PRAGMA table_info(units)")}
    db.close()
    # the carried-forward file has the very tables a new hub gets
    LocalHub(tmp_path / "fresh.db").close()
    assert schema_of(hub_db) == schema_of(tmp_path / "fresh.db")
    # and the hub goes on working: upload merges against the carried upload bases, a second
    # sandbox clones from the carried units
    assert eksinf("sandbox", "up", cwd=sandbox).code == 0
    assert eksinf("sandbox", "up", "--name", "two", cwd=sandbox).code == 0
    with LocalHub(hub_db) as hub:
        assert hub.check() == []
        # the restore to revision 1 brought the placeholder back; sandbox up resolved it again
        history = hub.history(*UNIT)
        assert history[:3] == history_before[UNIT]
        assert [(r.description, r.data_hash) for r in history[3:]] == [
            ("resolve links", history[1].data_hash)
        ]


def test_a_migration_cut_short_leaves_the_last_finished_version_and_resumes(tmp_path):
    hub_db = tmp_path / "hub.db"
    db = sqlite3.connect(hub_db)
    db.executescript(V1_SCHEMA)
    db.execute("INSERT INTO meta VALUES('schema_version', '1')")
    db.execute("INSERT INTO spaces VALUES('s1', 'app-base', '{}', '{}', NULL)")
    db.execute(
        "INSERT INTO units VALUES('u1', 's1', 'web', NULL, 2, 'b: 2\n', ?, '[]', '[]', 'b: 1\n',"
        " NULL, NULL, 0, '{}')",
        (sha256_hex("b: 2\n"),),
    )
    for num, text in ((1, "b: 1\n"), (2, "b: 2\n")):
        db.execute(
            "INSERT INTO revisions VALUES('u1', ?, 'edit', ?, ?)", (num, text, sha256_hex(text))
        )
    db.commit()
    db.close()
    open_hub = f"from eksinf.hub.local import LocalHub; LocalHub({str(hub_db)!r}).close()"
    env = {**os.environ, "EKSINF_FAULT": "hub.migrate-2"}
    died = subprocess.run([sys.executable, "-c", open_hub], env=env, capture_output=True)
    assert died.returncode == 137  # killed inside step 2's transaction
    assert revisions(hub_db)[("app-base", "web", 2)] == ("edit", "b: 2\n")  # still version 1
    assert sqlite3.connect(hub_db).execute("PRAGMA user_version").fetchone()[0] == 0
    with LocalHub(hub_db) as hub:
        assert hub.migrated == [2]
        assert [r.num for r in hub.history("app-base", "web")] == [1, 2]
        assert hub.unit_data("app-base", "web", 1) == "b: 1\n"
        assert hub.unit_data("app-base", "web") == "b: 2\n"
        assert hub.check() == []
    with LocalHub(hub_db) as hub:
        assert hub.migrated == []  # current: opening it writes nothing


def test_steps_are_numbered_one_by_one_and_a_new_hub_runs_them_all(tmp_path):
    assert sorted(STEPS) == list(range(1, SCHEMA_VERSION + 1))
    with LocalHub(tmp_path / "hub.db") as hub:
        assert hub.migrated == list(range(1, SCHEMA_VERSION + 1))


def test_each_distinct_text_is_stored_once(local_hub):
    local_hub.create_space("app-base")
    text = "kind: ConfigMap\nmetadata:\n  name: web\n"
    local_hub.create_unit("app-base", "web", text)
    local_hub.create_unit("app-base", "same", text)
    local_hub.update_unit("app-base", "web", text.replace("web", "api"), "rename")
    local_hub.restore("app-base", "web", 1)  # back to the first text: no new blob
    db = local_hub._db
    assert db.execute("SELECT count(*) FROM blobs").fetchone()[0] == 2
    assert db.execute("SELECT count(*) FROM revisions").fetchone()[0] == 4
    assert local_hub.unit_data("app-base", "web", 2) == text.replace("web", "api")
    local_hub.delete_space("app-base", recursive=True)
    assert db.execute("SELECT count(*) FROM blobs").fetchone()[0] == 0  # none left unreferenced


def test_listings_never_read_a_body(local_hub):
    local_hub.create_space("app-base", {"Component": "app"})
    local_hub.create_unit("app-base", "web", "kind: ConfigMap\nmetadata:\n  name: web\n")
    local_hub.update_unit("app-base", "web", "kind: Secret\nmetadata:\n  name: web\n", "edit")

    def no_blobs(action: int, table: str | None, *_: object) -> int:
        return sqlite3.SQLITE_DENY if table == "blobs" else sqlite3.SQLITE_OK

    local_hub._db.set_authorizer(no_blobs)
    try:
        assert [u.slug for u in local_hub.list_units()] == ["web"]
        assert [u.slug for u in local_hub.list_units("app-base", "Slug = 'web'")] == ["web"]
        assert local_hub.get_unit("app-base", "web").head_revision == 2
        assert [r.num for r in local_hub.history("app-base", "web")] == [1, 2]
        assert [s.slug for s in local_hub.list_spaces()] == ["app-base"]
        with pytest.raises(HubError):  # the denial is real: reading a body is refused
            local_hub.unit_data("app-base", "web")
    finally:
        local_hub._db.set_authorizer(None)
    assert "Secret" in local_hub.unit_data("app-base", "web")
