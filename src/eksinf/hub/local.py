"""LocalHub: the embedded hub, one SQLite file.

Every public operation runs in one `BEGIN IMMEDIATE ... COMMIT` transaction, so a crash at any
point leaves the hub as it was before the operation or after it, never in between. The database
runs in WAL mode and carries a schema version; an unknown version is refused, not guessed at.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eksinf.core.faults import checkpoint
from eksinf.core.yamlio import dump_docs, load_docs, load_input_docs
from eksinf.publish import argo

from ..errors import CONTRACT, FAILURE, USAGE, EksinfError, shell_command
from ..links import engine
from ..model import placeholder
from ..model.digest import oci_digest, sha256_hex
from ..model.names import OWNER, OWNER_LABEL, apps_space, check_space_name, variant_space
from . import dbfile, functions, merge, where
from .protocol import (
    APPS_SPACE_ANNOTATION,
    PLACEHOLDER_GATE_FUNCTION,
    UPSTREAM_SPACE_ANNOTATION,
    AlreadyExists,
    Closing,
    FunctionResult,
    GateBlocked,
    HubError,
    Link,
    MergeConflict,
    NoChanges,
    NotFound,
    PromoteReport,
    ReferencedElsewhere,
    Release,
    Revision,
    Space,
    Target,
    Unavailable,
    Unit,
    UploadReport,
    UploadSource,
)

SCHEMA_VERSION = 1
DEFAULT_PATH = Path(".eksinf") / "hub.db"
_SLUG_BAD = re.compile(r"[^a-z0-9_.-]+")

_SCHEMA = """
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


def _hash(text: str) -> str:
    return sha256_hex(text)


def unit_slug(filename: str) -> str:
    """The unit slug of a per-file upload: the file stem, normalised like ConfigHub does."""
    stem = filename.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower()
    return _SLUG_BAD.sub("-", stem).strip("-") or "unit"


def release_ref(registry: str, space: str) -> str:
    """Where a space's releases go: `<registry>/space/<space>`, ConfigHub's layout."""
    if registry.startswith("oci-layout:"):
        return f"{registry}/space/{space}"
    return f"{registry.removeprefix('oci://')}/space/{space}"


RELEASE_TAG = "release-"  # + the release number: each release's immutable tag


def highest_release(tags: list[str]) -> int:
    """The highest N among `release-N` tags (0: none)."""
    cut = len(RELEASE_TAG)
    numbers = [int(t[cut:]) for t in tags if t.startswith(RELEASE_TAG) and t[cut:].isdigit()]
    return max(numbers, default=0)


def _placeholders(text: str) -> list[str]:
    if not placeholder.text_may_hold(text):
        return []
    found = []
    for doc in load_docs(text):
        meta = doc.get("metadata") or {} if isinstance(doc, dict) else {}
        rid = f"{doc.get('kind')}/{meta.get('namespace') or ''}/{meta.get('name')}"
        found += [f"{rid}:{p}" for p in placeholder.scan(doc)]
    return found


class _Rollback(Exception):
    """Raised inside a transaction to discard it (dry runs)."""


class LocalHub(Closing):
    name = "local"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        created = not os.path.lexists(self.path)
        self._db = dbfile.connect(self.path)  # failures are exit 4 naming the file
        try:
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._depth = 0
            self._migrate()
        except BaseException:
            self._db.close()
            if created:
                # A hub this call created and could not set up (a full disk) holds nothing:
                # left behind, it would be an empty file the next run refuses as not a hub.
                for leftover in ("", "-wal", "-shm"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(f"{self.path}{leftover}")
            raise

    def close(self) -> None:
        self._db.close()

    # ---- plumbing ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        if self._depth:
            self._depth += 1
            try:
                yield self._db
            finally:
                self._depth -= 1
            return
        self._db.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield self._db
            checkpoint("hub.before-commit")
            self._db.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        finally:
            self._depth = 0

    def _rollback(self) -> None:
        """End a failed transaction. SQLite rolls some back itself (a full disk, an I/O error:
        then ROLLBACK would fail with "no transaction is active"), and a COMMIT that fails
        leaves it open; either way the error that got here is the one to report."""
        if self._db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                sqlite3.Connection.execute(self._db, "ROLLBACK")

    def _migrate(self) -> None:
        has_meta = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
        ).fetchone()
        if has_meta:  # the common case: no write transaction just to open the hub
            self._check_version()
            return
        with self._tx() as db:
            has_meta = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
            ).fetchone()
            if not has_meta:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute("INSERT INTO meta VALUES('schema_version', ?)", (str(SCHEMA_VERSION),))
                return
        self._check_version()

    def _check_version(self) -> None:
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = int(row[0])
        if version != SCHEMA_VERSION:
            raise Unavailable(
                f"hub database {self.path} has schema version {version}; "
                f"this eksinf reads version {SCHEMA_VERSION}",
                "Upgrade eksinf, or move the file aside and rebuild with `eksinf sandbox up`.",
            )

    def _space_row(self, slug: str) -> sqlite3.Row:
        row = self._db.execute("SELECT * FROM spaces WHERE slug=?", (slug,)).fetchone()
        if row is None:
            raise NotFound(f"space {slug} not found", "List spaces with `eksinf hub spaces`.")
        return row

    def _unit_row(self, space: str, slug: str) -> sqlite3.Row:
        sid = self._space_row(space)["id"]
        row = self._db.execute(
            "SELECT * FROM units WHERE space_id=? AND slug=?", (sid, slug)
        ).fetchone()
        if row is None:
            raise NotFound(
                f"unit {space}/{slug} not found",
                f"List units with `{shell_command('eksinf', 'hub', 'units', '--space', space)}`.",
            )
        return row

    def _target_row(self, ref: str) -> sqlite3.Row:
        space, _, slug = ref.partition("/")
        if not slug:
            raise EksinfError(
                f"target {ref!r} is not SPACE/TARGET", "Name a target as <space>/<target>.", USAGE
            )
        row = self._db.execute(
            "SELECT t.* FROM targets t JOIN spaces s ON s.id=t.space_id WHERE s.slug=? AND t.slug=?",
            (space, slug),
        ).fetchone()
        if row is None:
            raise NotFound(
                f"target {ref} not found", "Create it with `eksinf sandbox up` or enroll."
            )
        return row

    def _target_ref(self, target_id: str | None) -> str | None:
        if target_id is None:
            return None
        row = self._db.execute(
            "SELECT s.slug || '/' || t.slug FROM targets t JOIN spaces s ON s.id=t.space_id "
            "WHERE t.id=?",
            (target_id,),
        ).fetchone()
        return row[0]

    def _space(self, row: sqlite3.Row) -> Space:
        return Space(
            row["id"],
            row["slug"],
            json.loads(row["labels"]),
            json.loads(row["annotations"]),
            self._target_ref(row["release_target_id"]),
        )

    def _unit(self, row: sqlite3.Row, space_slug: str | None = None) -> Unit:
        if space_slug is None:
            space_slug = self._db.execute(
                "SELECT slug FROM spaces WHERE id=?", (row["space_id"],)
            ).fetchone()[0]
        return Unit(
            row["id"],
            space_slug,
            row["slug"],
            row["head"],
            row["data_hash"],
            self._target_ref(row["target_id"]),
            row["last_released"],
            row["upstream_unit_id"],
            row["upstream_revision"],
            tuple(json.loads(row["validation_errors"])),
            tuple(json.loads(row["placeholders"])),
            json.loads(row["labels"]),
        )

    def _gates(self, target_id: str | None, placeholders: list[str]) -> list[str]:
        """Validation errors of a unit bound to `target_id`: the target's trigger space's
        vet-placeholders triggers fail while any placeholder remains. Unbound units are never
        gated (bases and the profile hold placeholders on purpose)."""
        if target_id is None or not placeholders:
            return []
        rows = self._db.execute(
            "SELECT s.slug AS space, g.slug AS slug, g.function AS function FROM targets t "
            "JOIN triggers g ON g.space_id=t.trigger_space_id JOIN spaces s ON s.id=g.space_id "
            "WHERE t.id=? AND g.function=?",
            (target_id, PLACEHOLDER_GATE_FUNCTION),
        ).fetchall()
        return sorted(f"{r['space']}/{r['slug']}/{r['function']}" for r in rows)

    def _insert_unit(
        self,
        space_id: str,
        slug: str,
        data: str,
        description: str,
        *,
        target_id: str | None = None,
        upload_base: str | None = None,
        upstream: tuple[str, int] | None = None,
        placeholders: list[str] | None = None,
    ) -> str:
        unit_id = str(uuid.uuid4())
        found = _placeholders(data) if placeholders is None else placeholders
        digest = _hash(data)
        self._db.execute(
            "INSERT INTO units(id, space_id, slug, target_id, head, data, data_hash, placeholders,"
            " validation_errors, upload_base, upstream_unit_id, upstream_revision, labels)"
            " VALUES(?,?,?,?,1,?,?,?,?,?,?,?,'{}')",
            (
                unit_id,
                space_id,
                slug,
                target_id,
                data,
                digest,
                json.dumps(found),
                json.dumps(self._gates(target_id, found)),
                upload_base,
                upstream[0] if upstream else None,
                upstream[1] if upstream else None,
            ),
        )
        self._db.execute(
            "INSERT INTO revisions VALUES(?,?,?,?,?)", (unit_id, 1, description, data, digest)
        )
        return unit_id

    def _write(self, row: sqlite3.Row, data: str, description: str) -> bool:
        """Append a revision when the content changed; an unchanged write does nothing."""
        if data == row["data"]:
            return False
        head = row["head"] + 1
        found = _placeholders(data)
        digest = _hash(data)
        self._db.execute(
            "UPDATE units SET head=?, data=?, data_hash=?, placeholders=?, validation_errors=?"
            " WHERE id=?",
            (
                head,
                data,
                digest,
                json.dumps(found),
                json.dumps(self._gates(row["target_id"], found)),
                row["id"],
            ),
        )
        self._db.execute(
            "INSERT INTO revisions VALUES(?,?,?,?,?)", (row["id"], head, description, data, digest)
        )
        return True

    def _refresh_row(self, unit_id: str) -> sqlite3.Row:
        return self._db.execute("SELECT * FROM units WHERE id=?", (unit_id,)).fetchone()

    # ---- spaces -----------------------------------------------------------------------------

    def list_spaces(self, where: str | None = None) -> list[Space]:
        spaces = [self._space(r) for r in self._db.execute("SELECT * FROM spaces ORDER BY slug")]

        def attribute(space: Space, name: str) -> list[str]:
            if name == "Slug":
                return [space.slug]
            if name.startswith("Labels."):
                value = space.labels.get(name.removeprefix("Labels."))
                return [] if value is None else [value]
            return []

        return where_select(spaces, where, attribute)

    def get_space(self, slug: str) -> Space:
        return self._space(self._space_row(slug))

    def space_exists(self, slug: str) -> bool:
        return self._db.execute("SELECT 1 FROM spaces WHERE slug=?", (slug,)).fetchone() is not None

    def create_space(
        self, slug: str, labels: dict[str, str] | None = None, *, allow_exists: bool = False
    ) -> Space:
        check_space_name(slug)
        with self._tx() as db:
            if self.space_exists(slug):
                if not allow_exists:
                    raise AlreadyExists(f"space {slug} already exists")
                return self.label_space(slug, labels or {})
            db.execute(
                "INSERT INTO spaces(id, slug, labels, annotations) VALUES(?,?,?,'{}')",
                (str(uuid.uuid4()), slug, json.dumps(labels or {}, sort_keys=True)),
            )
            return self.get_space(slug)

    def label_space(self, slug: str, labels: dict[str, str]) -> Space:
        with self._tx() as db:
            row = self._space_row(slug)
            merged = {**json.loads(row["labels"]), **labels}
            db.execute(
                "UPDATE spaces SET labels=? WHERE id=?",
                (json.dumps(merged, sort_keys=True), row["id"]),
            )
            return self.get_space(slug)

    def _set_release_target(self, space_id: str, target_id: str | None) -> None:
        self._db.execute("UPDATE spaces SET release_target_id=? WHERE id=?", (target_id, space_id))

    def referrers(self, slug: str) -> list[str]:
        """What outside this space points into it: inbound links, release targets and unit
        bindings aimed at its targets, targets whose triggers live here."""
        sid = self._space_row(slug)["id"]
        rows = self._db.execute(
            """
            SELECT fs.slug || '/' || fu.slug || ' (link to ' || tu.slug || ')' FROM links l
              JOIN units tu ON tu.id=l.to_unit_id JOIN units fu ON fu.id=l.from_unit_id
              JOIN spaces fs ON fs.id=fu.space_id
             WHERE tu.space_id=:s AND fu.space_id!=:s
            UNION
            SELECT o.slug || ' (release target)' FROM spaces o JOIN targets t
              ON t.id=o.release_target_id WHERE t.space_id=:s AND o.id!=:s
            UNION
            SELECT os.slug || '/' || u.slug || ' (bound to target)' FROM units u
              JOIN targets t ON t.id=u.target_id JOIN spaces os ON os.id=u.space_id
             WHERE t.space_id=:s AND u.space_id!=:s
            UNION
            SELECT ts.slug || '/' || t.slug || ' (trigger space)' FROM targets t
              JOIN spaces ts ON ts.id=t.space_id WHERE t.trigger_space_id=:s AND t.space_id!=:s
            """,
            {"s": sid},
        ).fetchall()
        return sorted(r[0] for r in rows)

    def delete_space(self, slug: str, *, recursive: bool = False) -> None:
        with self._tx() as db:
            sid = self._space_row(slug)["id"]
            referrers = self.referrers(slug)
            if referrers:
                raise ReferencedElsewhere(slug, referrers)
            counts = {
                table: db.execute(
                    f"SELECT count(*) FROM {table} WHERE space_id=?", (sid,)
                ).fetchone()[0]
                for table in ("units", "links", "targets", "triggers", "releases")
            }
            if any(counts.values()) and not recursive:
                held = ", ".join(f"{n} {t}" for t, n in counts.items() if n)
                raise HubError(
                    f"space {slug} is not empty ({held})",
                    "Delete it with its contents: `--recursive` ("
                    + shell_command("eksinf", "hub", "delete", slug, "--recursive", "--yes")
                    + ").",
                    CONTRACT,
                )
            # Contents first, in foreign-key order: nothing ever points at a deleted row.
            db.execute("DELETE FROM releases WHERE space_id=?", (sid,))
            db.execute(
                "DELETE FROM links WHERE space_id=? OR to_unit_id IN "
                "(SELECT id FROM units WHERE space_id=?)",
                (sid, sid),
            )
            db.execute(
                "DELETE FROM revisions WHERE unit_id IN (SELECT id FROM units WHERE space_id=?)",
                (sid,),
            )
            db.execute("UPDATE spaces SET release_target_id=NULL WHERE id=?", (sid,))
            db.execute("DELETE FROM units WHERE space_id=?", (sid,))
            db.execute("DELETE FROM triggers WHERE space_id=?", (sid,))
            db.execute("UPDATE targets SET trigger_space_id=NULL WHERE space_id=?", (sid,))
            db.execute("DELETE FROM targets WHERE space_id=?", (sid,))
            db.execute("DELETE FROM spaces WHERE id=?", (sid,))

    # ---- units ------------------------------------------------------------------------------

    def list_units(self, space: str | None = None, where: str | None = None) -> list[Unit]:
        if space is None:
            rows = self._db.execute(
                "SELECT u.*, s.slug AS space_slug FROM units u JOIN spaces s ON s.id=u.space_id "
                "ORDER BY s.slug, u.slug"
            ).fetchall()
        else:
            sid = self._space_row(space)["id"]
            rows = self._db.execute(
                "SELECT u.*, s.slug AS space_slug FROM units u JOIN spaces s ON s.id=u.space_id "
                "WHERE u.space_id=? ORDER BY u.slug",
                (sid,),
            ).fetchall()
        selected = where_select(rows, where, self._row_attribute)
        return [self._unit(r, r["space_slug"]) for r in selected]

    def _row_attribute(self, row: sqlite3.Row, name: str) -> list[str]:
        if name == "Slug":
            return [row["slug"]]
        if name == "Space":
            return [row["space_slug"]]
        if name == "Target":
            ref = self._target_ref(row["target_id"])
            return [ref] if ref else []
        if name == "Kind":
            return [d.get("kind", "") for d in load_docs(row["data"]) if isinstance(d, dict)]
        if name.startswith("Labels."):
            value = json.loads(row["labels"]).get(name.removeprefix("Labels."))
            return [] if value is None else [value]
        return []

    def get_unit(self, space: str, slug: str) -> Unit:
        return self._unit(self._unit_row(space, slug), space)

    def unit_data(self, space: str, slug: str, revision: int | None = None) -> str:
        row = self._unit_row(space, slug)
        if revision is None:
            return row["data"]
        rev = self._db.execute(
            "SELECT data FROM revisions WHERE unit_id=? AND num=?", (row["id"], revision)
        ).fetchone()
        if rev is None:
            raise NotFound(f"unit {space}/{slug} has no revision {revision} (head {row['head']})")
        return rev["data"]

    def create_unit(self, space: str, slug: str, data: str, *, target: str | None = None) -> Unit:
        with self._tx():
            sid = self._space_row(space)["id"]
            if self._db.execute(
                "SELECT 1 FROM units WHERE space_id=? AND slug=?", (sid, slug)
            ).fetchone():
                raise AlreadyExists(f"unit {space}/{slug} already exists")
            target_id = self._target_row(target)["id"] if target else None
            self._insert_unit(sid, slug, data, "create", target_id=target_id)
            return self.get_unit(space, slug)

    def update_unit(self, space: str, slug: str, data: str, description: str) -> Unit:
        with self._tx():
            self._write(self._unit_row(space, slug), data, description)
            return self.get_unit(space, slug)

    def history(self, space: str, slug: str) -> list[Revision]:
        row = self._unit_row(space, slug)
        return [
            Revision(r["num"], r["description"], r["data_hash"])
            for r in self._db.execute(
                "SELECT num, description, data_hash FROM revisions WHERE unit_id=? ORDER BY num",
                (row["id"],),
            )
        ]

    def restore(self, space: str, slug: str, revision: int) -> Unit:
        with self._tx():
            data = self.unit_data(space, slug, revision)
            self._write(self._unit_row(space, slug), data, f"restore revision {revision}")
            return self.get_unit(space, slug)

    # ---- variants ---------------------------------------------------------------------------

    def variant_upload(
        self,
        component: str,
        variant: str,
        source: UploadSource,
        *,
        labels: dict[str, str] | None = None,
        prune: bool = False,
        dry_run: bool = False,
    ) -> UploadReport:
        planned: dict[str, str] = {}
        skipped_secrets = []
        for name in sorted(source.files):
            if not name.endswith((".yaml", ".yml")):
                continue
            # parsed once here, bounded (an alias bomb is refused before it is stored and
            # walked by every later link and function)
            docs = load_input_docs(source.files[name], f"{source.ref}/{name}")
            text = source.files[name].decode("utf-8")
            if any(d.get("kind") == "Secret" for d in docs):
                skipped_secrets.append(name)
                continue
            slug = unit_slug(name)
            n = 2
            while slug in planned:  # duplicate stems get -2, -3 (ConfigHub's rule)
                slug = f"{unit_slug(name)}-{n}"
                n += 1
            planned[slug] = text
        space = variant_space(component, variant)
        record = [{"ref": source.ref, "digest": source.digest, "granularity": "per-file"}]
        report: UploadReport | None = None
        try:
            with self._tx() as db:
                report = self._upload(db, space, component, variant, planned, record, labels, prune)
                if dry_run:
                    raise _Rollback
        except _Rollback:
            pass
        assert report is not None
        return report

    def _upload(
        self,
        db: sqlite3.Connection,
        space: str,
        component: str,
        variant: str,
        planned: dict[str, str],
        record: list[dict],
        labels: dict[str, str] | None,
        prune: bool,
    ) -> UploadReport:
        description = f"upload from {record[0]['ref']}"
        if not self.space_exists(space):
            space_labels = {
                "Component": component,
                "Variant": variant,
                OWNER_LABEL: OWNER,
                **(labels or {}),
            }
            self.create_space(space, space_labels)
            sid = self._space_row(space)["id"]
            self._annotate(
                sid, {"confighub.com/external-source": json.dumps(record, sort_keys=True)}
            )
            for slug, text in planned.items():
                self._insert_unit(sid, slug, text, description, upload_base=text)
            return UploadReport(space, True, created=tuple(planned))
        row = self._space_row(space)
        sid = row["id"]
        previous = json.loads(
            json.loads(row["annotations"]).get("confighub.com/external-source", "[]")
        )
        if previous and previous[0].get("granularity") not in (None, "per-file"):
            raise HubError(
                f'Space "{space}" was uploaded with --granularity {previous[0]["granularity"]}, '
                "but this upload specifies per-file.",
                "Re-create the base with `eksinf install --recreate`.",
                CONTRACT,
            )
        self._annotate(sid, {"confighub.com/external-source": json.dumps(record, sort_keys=True)})
        existing = {
            r["slug"]: r for r in db.execute("SELECT * FROM units WHERE space_id=?", (sid,))
        }
        created, updated, unchanged, emptied, missing, conflicts, reverts = (
            [],
            [],
            [],
            [],
            [],
            [],
            [],
        )
        for slug, text in planned.items():
            unit = existing.get(slug)
            if unit is None:
                self._insert_unit(sid, slug, text, description, upload_base=text)
                created.append(slug)
                continue
            base = unit["upload_base"] if unit["upload_base"] is not None else unit["data"]
            if text == base and unit["data"] != "":
                unchanged.append(slug)
                continue
            result = merge.merge_text(base, text, unit["data"])
            conflicts += [f"{slug}: {c}" for c in result.conflicts]
            head_before = unit["head"]
            if self._write(unit, result.text, description):
                updated.append(slug)
                reverts.append(
                    shell_command(
                        "eksinf", "hub", "restore", space, slug, "--revision", head_before
                    )
                )
            else:
                unchanged.append(slug)
            db.execute("UPDATE units SET upload_base=? WHERE id=?", (text, unit["id"]))
        for slug, unit in sorted(existing.items()):
            if slug in planned or unit["data"] == "":
                continue
            if prune:
                reverts.append(
                    shell_command(
                        "eksinf", "hub", "restore", space, slug, "--revision", unit["head"]
                    )
                )
                self._write(unit, "", f"{description}: emptied (file gone)")
                db.execute("UPDATE units SET upload_base='' WHERE id=?", (unit["id"],))
                emptied.append(slug)
            else:
                missing.append(slug)
        return UploadReport(
            space,
            False,
            tuple(created),
            tuple(updated),
            tuple(unchanged),
            tuple(emptied),
            tuple(missing),
            tuple(conflicts),
            "; ".join(reverts),
        )

    def _annotate(self, space_id: str, annotations: dict[str, str]) -> None:
        row = self._db.execute("SELECT annotations FROM spaces WHERE id=?", (space_id,)).fetchone()
        merged = {**json.loads(row[0]), **annotations}
        self._db.execute(
            "UPDATE spaces SET annotations=? WHERE id=?",
            (json.dumps(merged, sort_keys=True), space_id),
        )

    def variants_of(self, component: str) -> list[str]:
        return sorted(
            s.slug
            for s in self.list_spaces(f"Labels.Component = '{component}'")
            if s.labels.get("Variant") != "base"
        )

    def variant_create(
        self, variant: str, upstream_space: str, *, target: str | None = None
    ) -> Space:
        with self._tx() as db:
            up = self._space_row(upstream_space)
            up_labels = json.loads(up["labels"])
            component = up_labels.get("Component") or upstream_space.rsplit("-", 1)[0]
            slug = variant_space(component, variant)
            if self.space_exists(slug):
                raise AlreadyExists(f"space {slug} already exists")
            target_row = self._target_row(target) if target else None
            target_id = target_row["id"] if target_row else None
            self.create_space(slug, {**up_labels, "Variant": variant})
            sid = self._space_row(slug)["id"]
            self._annotate(sid, {UPSTREAM_SPACE_ANNOTATION: up["id"]})
            if target_id:
                self._set_release_target(sid, target_id)
            ships_namespace = False
            namespaces: dict[str, int] = {}
            clones: dict[str, str] = {}  # upstream unit id -> clone id
            for unit in db.execute(
                "SELECT * FROM units WHERE space_id=? ORDER BY slug", (up["id"],)
            ).fetchall():
                clone_id = self._insert_unit(
                    sid,
                    unit["slug"],
                    unit["data"],
                    f"clone of {upstream_space}/{unit['slug']} revision {unit['head']}",
                    target_id=target_id,
                    upstream=(unit["id"], unit["head"]),
                    placeholders=json.loads(unit["placeholders"]),
                )
                clones[unit["id"]] = clone_id
                self._insert_link(sid, clone_id, unit["id"], "UpgradeUnit", {})
                if target_row and target_row["apps_space"]:
                    ships_namespace |= "kind: Namespace" in unit["data"]
                    for ns in re.findall(r"^  namespace: (\S+)$", unit["data"], re.MULTILINE):
                        namespaces[ns] = namespaces.get(ns, 0) + 1
            # Links between the upstream's own units are copied onto the clones; links leaving
            # the space (to the profile) are not: the variant gets its own.
            for link in db.execute(
                "SELECT * FROM links WHERE space_id=? AND update_type!='UpgradeUnit' ORDER BY slug",
                (up["id"],),
            ).fetchall():
                if link["from_unit_id"] in clones and link["to_unit_id"] in clones:
                    self._insert_link(
                        sid,
                        clones[link["from_unit_id"]],
                        clones[link["to_unit_id"]],
                        link["update_type"],
                        json.loads(link["body"]),
                    )
            if target_row and target_row["apps_space"]:
                namespace = (
                    max(sorted(namespaces), key=lambda n: namespaces[n])
                    if namespaces
                    else "default"
                )
                app = argo.child_application(
                    slug,
                    target_row["registry"],
                    namespace=namespace,
                    ships_namespace=ships_namespace,
                )
                self._put_unit(target_row["apps_space"], slug, app, target_id)
            checkpoint("hub.variant-create")
            return self.get_space(slug)

    def _put_unit(self, space: str, slug: str, data: str, target_id: str | None) -> None:
        sid = self._space_row(space)["id"]
        row = self._db.execute(
            "SELECT * FROM units WHERE space_id=? AND slug=?", (sid, slug)
        ).fetchone()
        if row is None:
            self._insert_unit(sid, slug, data, "generated", target_id=target_id)
        else:
            self._write(row, data, "regenerated")

    def variant_promote(self, space: str) -> PromoteReport:
        """Bring upstream changes into a variant: a 3-way merge of each unit against the
        upstream revision it was last merged from, so the variant's own edits survive; units new
        upstream are cloned in, units upstream emptied are emptied. A field changed on both sides
        is a conflict: all of them are reported (unit: field) and nothing is written."""
        with self._tx() as db:
            row = self._space_row(space)
            sid = row["id"]
            up_id = json.loads(row["annotations"]).get(UPSTREAM_SPACE_ANNOTATION)
            units = db.execute(
                "SELECT * FROM units WHERE space_id=? AND upstream_unit_id IS NOT NULL ORDER BY slug",
                (sid,),
            ).fetchall()
            writes, conflicts = [], []
            for unit in units:
                up = db.execute(
                    "SELECT * FROM units WHERE id=?", (unit["upstream_unit_id"],)
                ).fetchone()
                if up is None:
                    raise HubError(
                        f"{space}/{unit['slug']}: its upstream unit no longer exists "
                        "(the base was re-created with new IDs)",
                        "Delete this variant and create it again from the new base.",
                        CONTRACT,
                    )
                if up["head"] == unit["upstream_revision"]:
                    continue
                base = db.execute(
                    "SELECT data FROM revisions WHERE unit_id=? AND num=?",
                    (up["id"], unit["upstream_revision"]),
                ).fetchone()["data"]
                result = merge.merge_text(base, up["data"], unit["data"])
                conflicts += [f"{unit['slug']}: {c}" for c in result.conflicts]
                writes.append((unit, up, result.text))
            if conflicts:
                raise MergeConflict(space, conflicts)
            updated: list[str] = []
            emptied: list[str] = []
            for unit, up, text in writes:
                if self._write(unit, text, f"promote from revision {up['head']}"):
                    (emptied if text == "" else updated).append(unit["slug"])
                db.execute(
                    "UPDATE units SET upstream_revision=? WHERE id=?", (up["head"], unit["id"])
                )
            added = []
            if up_id is not None:
                cloned = {u["upstream_unit_id"] for u in units}
                target_id = row["release_target_id"]
                for new in db.execute(
                    "SELECT * FROM units WHERE space_id=? ORDER BY slug", (up_id,)
                ).fetchall():
                    if new["id"] in cloned or new["data"] == "":
                        continue
                    clone_id = self._insert_unit(
                        sid,
                        new["slug"],
                        new["data"],
                        f"clone of upstream unit {new['slug']} revision {new['head']}",
                        target_id=target_id,
                        upstream=(new["id"], new["head"]),
                        placeholders=json.loads(new["placeholders"]),
                    )
                    self._insert_link(sid, clone_id, new["id"], "UpgradeUnit", {})
                    added.append(new["slug"])
            return PromoteReport(space, tuple(updated), tuple(added), tuple(emptied))

    # ---- links ------------------------------------------------------------------------------

    def _insert_link(
        self, space_id: str, from_id: str, to_id: str, update_type: str, body: dict[str, Any]
    ) -> str:
        names = self._db.execute(
            "SELECT f.slug, t.slug FROM units f, units t WHERE f.id=? AND t.id=?", (from_id, to_id)
        ).fetchone()
        digest = sha256_hex(f"{from_id}->{to_id}")[:8]
        link_id = str(uuid.uuid4())
        self._db.execute(
            "INSERT INTO links VALUES(?,?,?,?,?,?,?)",
            (
                link_id,
                f"{names[0]}-to-{names[1]}-{digest}",
                space_id,
                from_id,
                to_id,
                update_type,
                json.dumps(body, sort_keys=True),
            ),
        )
        return link_id

    def _link(self, row: sqlite3.Row) -> Link:
        names = self._db.execute(
            "SELECT fs.slug, f.slug, ts.slug, t.slug FROM units f JOIN spaces fs ON fs.id=f.space_id,"
            " units t JOIN spaces ts ON ts.id=t.space_id WHERE f.id=? AND t.id=?",
            (row["from_unit_id"], row["to_unit_id"]),
        ).fetchone()
        return Link(
            row["id"],
            row["slug"],
            names[0],
            names[1],
            names[2],
            names[3],
            row["update_type"],
            json.loads(row["body"]),
        )

    def set_link(
        self, space: str, unit: str, to_space: str, to_unit: str, bindings: dict[str, Any]
    ) -> Link:
        """Create the one TransformPaths link of a unit pair, or replace its bindings."""
        with self._tx() as db:
            from_row = self._unit_row(space, unit)
            to_row = self._unit_row(to_space, to_unit)
            row = db.execute(
                "SELECT * FROM links WHERE from_unit_id=? AND to_unit_id=?",
                (from_row["id"], to_row["id"]),
            ).fetchone()
            body = json.dumps(bindings, sort_keys=True)
            if row is None:
                link_id = self._insert_link(
                    from_row["space_id"], from_row["id"], to_row["id"], "TransformPaths", bindings
                )
            else:
                link_id = row["id"]
                if row["body"] != body:
                    db.execute("UPDATE links SET body=? WHERE id=?", (body, link_id))
            return self._link(db.execute("SELECT * FROM links WHERE id=?", (link_id,)).fetchone())

    def list_links(self, space: str) -> list[Link]:
        sid = self._space_row(space)["id"]
        return [
            self._link(r)
            for r in self._db.execute("SELECT * FROM links WHERE space_id=? ORDER BY slug", (sid,))
        ]

    def delete_link(self, space: str, slug: str) -> None:
        with self._tx() as db:
            sid = self._space_row(space)["id"]
            if (
                db.execute("DELETE FROM links WHERE space_id=? AND slug=?", (sid, slug)).rowcount
                == 0
            ):
                raise NotFound(f"link {space}/{slug} not found")

    def resolve(self, space: str, unit: str) -> bool:
        """Apply every outgoing TransformPaths link of the unit: one new revision if anything
        changed."""
        with self._tx() as db:
            row = self._unit_row(space, unit)
            links = db.execute(
                "SELECT l.*, t.data AS up_data, t.slug AS up_slug FROM links l "
                "JOIN units t ON t.id=l.to_unit_id WHERE l.from_unit_id=? AND "
                "l.update_type='TransformPaths' ORDER BY l.slug",
                (row["id"],),
            ).fetchall()
            if not links:
                return False
            docs = load_docs(row["data"])
            changed = False
            for link in links:
                what = f"link {space}/{link['slug']}"
                body = json.loads(link["body"])
                params = engine.upstream_params(load_docs(link["up_data"]), body, what)
                changed |= engine.apply_link(docs, body, params, what)
            if not changed:
                return False
            return self._write(row, dump_docs(docs), "resolve links")

    # ---- functions --------------------------------------------------------------------------

    def invoke(
        self,
        space: str,
        function: str,
        args: list[str],
        *,
        unit: str | None = None,
        where: str | None = None,
    ) -> FunctionResult:
        fn = functions.function_for(function)
        with self._tx():
            if unit:
                rows = [self._unit_row(space, unit)]
            else:
                sid = self._space_row(space)["id"]
                rows = self._db.execute(
                    "SELECT u.*, s.slug AS space_slug FROM units u JOIN spaces s ON s.id=u.space_id"
                    " WHERE u.space_id=? ORDER BY u.slug",
                    (sid,),
                ).fetchall()
                rows = where_select(rows, where, self._row_attribute)
            changed, unchanged = [], []
            for row in rows:
                docs = load_docs(row["data"])
                if fn(docs, list(args)) and self._write(
                    row, dump_docs(docs), f"{function} {' '.join(args)}"
                ):
                    changed.append(row["slug"])
                else:
                    unchanged.append(row["slug"])
            return FunctionResult(function, tuple(changed), tuple(unchanged))

    # ---- targets, triggers, releases --------------------------------------------------------

    def create_target(self, space: str, slug: str, registry: str) -> Target:
        """An OCI target, its apps space (`<space>-argo-apps`, releasing to this target) and the
        root Application. Idempotent for the same registry."""
        with self._tx() as db:
            sid = self._space_row(space)["id"]
            apps = apps_space(space)
            row = db.execute(
                "SELECT * FROM targets WHERE space_id=? AND slug=?", (sid, slug)
            ).fetchone()
            if row is not None and row["registry"] != registry:
                raise AlreadyExists(
                    f"target {space}/{slug} already exists with registry {row['registry']}",
                )
            if row is None:
                target_id = str(uuid.uuid4())
                db.execute(
                    "INSERT INTO targets VALUES(?,?,?,?,?,?)",
                    (target_id, sid, slug, registry, apps, sid),
                )
                self._annotate(sid, {APPS_SPACE_ANNOTATION: apps})
            else:
                target_id = row["id"]
            labels = json.loads(self._space_row(space)["labels"])
            self.create_space(
                apps, {OWNER_LABEL: labels.get(OWNER_LABEL, OWNER)}, allow_exists=True
            )
            self._set_release_target(self._space_row(apps)["id"], target_id)
            self._put_unit(apps, "root", argo.root_application(apps, registry), target_id)
            return self.get_target(f"{space}/{slug}")

    def get_target(self, ref: str) -> Target:
        row = self._target_row(ref)
        trigger_space = None
        if row["trigger_space_id"]:
            trigger_space = self._db.execute(
                "SELECT slug FROM spaces WHERE id=?", (row["trigger_space_id"],)
            ).fetchone()[0]
        space, _, slug = ref.partition("/")
        return Target(row["id"], space, slug, row["registry"], row["apps_space"], trigger_space)

    def create_trigger(self, space: str, slug: str, function: str, description: str) -> None:
        if function != PLACEHOLDER_GATE_FUNCTION:
            raise EksinfError(
                f"trigger function {function!r} is not supported by the local hub",
                f"The local hub gates with {PLACEHOLDER_GATE_FUNCTION}.",
                USAGE,
            )
        with self._tx() as db:
            sid = self._space_row(space)["id"]
            if db.execute(
                "SELECT 1 FROM triggers WHERE space_id=? AND slug=?", (sid, slug)
            ).fetchone():
                return
            db.execute(
                "INSERT INTO triggers VALUES(?,?,?,?,?)",
                (str(uuid.uuid4()), sid, slug, function, description),
            )
            # Units already bound to targets gated by this space are re-evaluated now.
            for row in db.execute(
                "SELECT u.* FROM units u JOIN targets t ON t.id=u.target_id "
                "WHERE t.trigger_space_id=?",
                (sid,),
            ).fetchall():
                gates = self._gates(row["target_id"], json.loads(row["placeholders"]))
                db.execute(
                    "UPDATE units SET validation_errors=? WHERE id=?",
                    (json.dumps(gates), row["id"]),
                )

    def publish(self, space: str) -> Release:
        from eksinf.publish import bundle

        with self._tx() as db:
            row = self._space_row(space)
            if row["release_target_id"] is None:
                raise HubError(
                    f"space {space} has no release target",
                    "Create it as a variant bound to a target (eksinf deploy --target ...).",
                    CONTRACT,
                )
            target = db.execute(
                "SELECT * FROM targets WHERE id=?", (row["release_target_id"],)
            ).fetchone()
            members = db.execute(
                "SELECT * FROM units WHERE space_id=? AND target_id=? ORDER BY slug",
                (row["id"], target["id"]),
            ).fetchall()
            gates: set[str] = set()
            blocked = []
            for unit in members:
                found = self._gates(unit["target_id"], json.loads(unit["placeholders"]))
                if found:
                    gates.update(found)
                    blocked.append(unit["slug"])
            if blocked:
                raise GateBlocked(space, sorted(gates), blocked)
            files = {f"{u['slug']}.yaml": u["data"].encode("utf-8") for u in members if u["data"]}
            blob = bundle.bundle_bytes(files)
            digest = oci_digest(blob)
            latest = db.execute(
                "SELECT * FROM releases WHERE space_id=? ORDER BY num DESC LIMIT 1", (row["id"],)
            ).fetchone()
            if latest is not None and latest["digest"] == digest:
                raise NoChanges(space, self._release(space, latest))
            num = (latest["num"] if latest else 0) + 1
            ref = release_ref(target["registry"], space)
            target_ref = self._target_ref(target["id"])
            heads = {u["id"]: u["head"] for u in members}
        from eksinf.publish import oci  # requests loads only when there is a release to push

        # Release numbers continue past every release-N tag the registry already holds: a space
        # deleted and made again (sandbox down, then up) starts with no releases in the hub, but
        # its repository keeps the earlier life's immutable tags, which other content may not take.
        num = max(num, highest_release(oci.list_tags(ref, missing_ok=True)) + 1)
        # The push is registry I/O: it runs outside the write transaction, so no other writer
        # waits on a registry, and a failed push leaves the hub as it was.
        pushed = oci.push(
            ref,
            blob,
            title=f"{space}.tar.gz",
            annotations={
                "com.confighub.target": target_ref or "",
                "com.confighub.space": space,
                bundle.KIND_ANNOTATION: bundle.RELEASE,
            },
            tags=["latest", f"{RELEASE_TAG}{num}"],
        )
        # Record what was pushed: the units as they were read above. A unit edited during the
        # push keeps its newer head unreleased; a concurrent publish that took this number with
        # other content is refused (its push already failed on the immutable tag, or won).
        with self._tx() as db:
            taken = db.execute(
                "SELECT * FROM releases WHERE space_id=? AND num=?", (row["id"], num)
            ).fetchone()
            if taken is not None and taken["digest"] != digest:
                raise HubError(
                    f"release {num} of {space} was published concurrently with other content",
                    "Publish again: the next release is built from the units as they are then.",
                    FAILURE,
                )
            if taken is None:
                db.execute(
                    "INSERT INTO releases VALUES(?,?,?,?,?,?)",
                    (row["id"], num, digest, pushed.manifest_digest, len(files), ref),
                )
                for unit_id, head in heads.items():
                    db.execute("UPDATE units SET last_released=? WHERE id=?", (head, unit_id))
            return self._release(
                space,
                db.execute(
                    "SELECT * FROM releases WHERE space_id=? AND num=?", (row["id"], num)
                ).fetchone(),
            )

    @staticmethod
    def _release(space: str, row: sqlite3.Row) -> Release:
        return Release(
            space, row["num"], row["digest"], row["manifest_digest"], row["unit_count"], row["ref"]
        )

    def list_releases(self, space: str) -> list[Release]:
        sid = self._space_row(space)["id"]
        return [
            self._release(space, r)
            for r in self._db.execute(
                "SELECT * FROM releases WHERE space_id=? ORDER BY num", (sid,)
            )
        ]

    # ---- consistency ------------------------------------------------------------------------

    def check(self) -> list[str]:
        """Integrity problems (empty when consistent): SQLite's own checks plus ours."""
        problems = [r[0] for r in self._db.execute("PRAGMA integrity_check") if r[0] != "ok"]
        problems += [
            f"foreign key {r[0]}.{r[3]}" for r in self._db.execute("PRAGMA foreign_key_check")
        ]
        problems += [
            f"unit {r[0]}: head {r[1]} but {r[2]} revisions"
            for r in self._db.execute(
                "SELECT u.slug, u.head, (SELECT count(*) FROM revisions v WHERE v.unit_id=u.id) c "
                "FROM units u WHERE u.head != c"
            )
        ]
        return problems


def where_select(items: list[Any], clause: str | None, attribute: Any) -> list[Any]:
    return where.select(items, clause, attribute)
