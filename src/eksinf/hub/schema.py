"""The local hub's schema, and the numbered steps that carry a hub.db forward to it.

`PRAGMA user_version` is the version a file is at. Each step is a small registered function
that takes the database from version N-1 to N; the runner applies the missing ones in order,
each in its own `BEGIN IMMEDIATE ... COMMIT` transaction with the new version written in the
same transaction, so a crash (or a full disk) mid-way leaves the file at the last finished
version, and the next run continues from there. A new hub runs every step from 0; an existing
one runs only those it lacks, so both end with the same tables. A file newer than this eksinf
knows is refused, never guessed at; a file is never moved aside.

Version 1 is the first released schema, kept verbatim: unit text in `units.data` and again in
every `revisions.data`. Before `user_version` was used it was recorded only in
`meta.schema_version` (user_version 0); such a file counts as version 1. Version 2 stores each
distinct text once, in `blobs`, keyed by its sha256; units and revisions name it by hash.
`meta.schema_version` follows user_version, so an eksinf that reads only `meta` refuses a newer
file instead of misreading it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

from eksinf.core.faults import checkpoint

from .protocol import Unavailable

Step = Callable[[sqlite3.Connection], None]
STEPS: dict[int, Step] = {}  # version reached -> the step that reaches it from the one before


def step(version: int) -> Callable[[Step], Step]:
    """Register the step that brings a database from `version - 1` to `version`."""

    def register(fn: Step) -> Step:
        assert version not in STEPS and version == len(STEPS) + 1, f"step {version} out of order"
        STEPS[version] = fn
        return fn

    return register


def _run(db: sqlite3.Connection, ddl: str) -> None:
    for statement in ddl.split(";"):
        if statement.strip():
            db.execute(statement)


V1 = """
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
INSERT INTO meta VALUES('schema_version', '1');
"""


@step(1)
def _first_schema(db: sqlite3.Connection) -> None:
    _run(db, V1)


@step(2)
def _content_addressed(db: sqlite3.Connection) -> None:
    """Each distinct text once, in `blobs`; units and revisions keep only its hash (the hashes
    version 1 already stored are the same sha256 of the same text, so they are kept as they
    are). `units.upload_base` (text) becomes `upload_base_hash`."""
    _run(
        db,
        """
        CREATE TABLE blobs(hash TEXT PRIMARY KEY, size INTEGER NOT NULL, data TEXT NOT NULL);
        INSERT OR IGNORE INTO blobs SELECT data_hash, length(CAST(data AS BLOB)), data
          FROM revisions;
        INSERT OR IGNORE INTO blobs SELECT data_hash, length(CAST(data AS BLOB)), data FROM units;
        ALTER TABLE units ADD COLUMN upload_base_hash TEXT REFERENCES blobs(hash);
        CREATE INDEX revisions_blob ON revisions(data_hash);
        CREATE INDEX units_upstream ON units(upstream_unit_id)
        """,
    )
    from eksinf.model.digest import sha256_hex  # one hash function for every text

    bases = db.execute("SELECT DISTINCT upload_base FROM units WHERE upload_base IS NOT NULL")
    for (text,) in bases.fetchall():
        digest = sha256_hex(text)
        db.execute("INSERT OR IGNORE INTO blobs VALUES(?,?,?)", (digest, len(text.encode()), text))
        db.execute("UPDATE units SET upload_base_hash=? WHERE upload_base=?", (digest, text))
    _run(
        db,
        """
        ALTER TABLE units DROP COLUMN upload_base;
        ALTER TABLE units DROP COLUMN data;
        ALTER TABLE revisions DROP COLUMN data
        """,
    )


SCHEMA_VERSION = max(STEPS)


def _version(db: sqlite3.Connection) -> int:
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if (
        version == 0
        and db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
    ):
        row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = int(row[0]) if row else 1  # before user_version: version 1 said so in meta
    return version


def _too_new(path: Path, version: int) -> Unavailable:
    return Unavailable(
        f"hub database {path} has schema version {version}, newer than this eksinf reads "
        f"(up to {SCHEMA_VERSION})",
        "Upgrade eksinf to the version that wrote it (`eksinf version` shows yours). The file is "
        "left as it is.",
    )


def migrate(db: sqlite3.Connection, path: Path) -> list[int]:
    """Bring the database to SCHEMA_VERSION; the steps it ran (none: it was current). `db` is
    in autocommit mode (isolation_level None)."""
    version = _version(db)
    if version == SCHEMA_VERSION:  # the common case: no write transaction just to open it
        return []
    if version > SCHEMA_VERSION:
        raise _too_new(path, version)
    ran: list[int] = []
    while True:
        db.execute("BEGIN IMMEDIATE")
        try:
            version = _version(db)  # another process may have moved it on meanwhile
            if version > SCHEMA_VERSION:
                raise _too_new(path, version)
            if version == SCHEMA_VERSION:
                db.execute("COMMIT")
                break
            STEPS[version + 1](db)
            version += 1
            db.execute(f"PRAGMA user_version={version}")
            db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(version),))
            checkpoint(f"hub.migrate-{version}")
            db.execute("COMMIT")
            ran.append(version)
        except BaseException:
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    sqlite3.Connection.execute(db, "ROLLBACK")
            raise
    if len(ran) and ran[0] > 1:
        # A carried-forward file: give back the pages the dropped text columns held. VACUUM is
        # atomic; when it cannot run (a full disk, another reader) the hub is just larger.
        with contextlib.suppress(sqlite3.Error):
            sqlite3.Connection.execute(db, "VACUUM")
    return ran
