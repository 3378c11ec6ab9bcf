"""The local hub's store: the SQLite connection, its transactions, and spaces, units and their
revisions over content-addressed text.

Every public operation runs in one `BEGIN IMMEDIATE ... COMMIT` transaction, so a crash at any
point leaves the hub as it was before the operation or after it, never in between. The database
runs in WAL mode; `schema.migrate` brings an older file forward when it is opened.

Unit text lives once per distinct content in `blobs`, keyed by its sha256: a unit's head, each
of its revisions and its upload base name a blob by hash. Listings read only the metadata
columns of `units`; a body is read (`_text`) only by what needs the text itself.
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
from typing import Any, cast

from eksinf.core.faults import checkpoint
from eksinf.core.yamlio import load_docs

from ..errors import CONTRACT, USAGE, EksinfError, shell_command
from ..model import placeholder
from ..model.digest import sha256_hex
from ..model.names import check_space_name
from . import dbfile, schema, where
from .protocol import (
    PLACEHOLDER_GATE_FUNCTION,
    AlreadyExists,
    Closing,
    HubError,
    Link,
    NotFound,
    ReferencedElsewhere,
    Revision,
    Space,
    Unit,
)

DEFAULT_PATH = Path(".eksinf") / "hub.db"
_SLUG_BAD = re.compile(r"[^a-z0-9_.-]+")


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


EMPTY_HASH = sha256_hex("")
# Units with their space's slug and their target's ref, in one query: `units` holds only
# metadata (no text), so a listing never reads a body.
UNIT_LISTING = (
    "SELECT u.id, u.slug, u.head, u.data_hash, u.target_id, u.last_released, u.upstream_unit_id,"
    " u.upstream_revision, u.validation_errors, u.placeholders, u.labels,"
    " s.slug AS space_slug, ts.slug || '/' || t.slug AS target_ref FROM units u "
    "JOIN spaces s ON s.id=u.space_id LEFT JOIN targets t ON t.id=u.target_id "
    "LEFT JOIN spaces ts ON ts.id=t.space_id"
)


class _Rollback(Exception):
    """Raised inside a transaction to discard it (dry runs)."""


def _json_list(text: str) -> tuple[str, ...]:
    return () if text == "[]" else tuple(json.loads(text))  # most units: nothing to parse


def where_select(items: list[Any], clause: str | None, attribute: Any) -> list[Any]:
    return where.select(items, clause, attribute)


class Store(Closing):
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
            self.migrated = schema.migrate(self._db, self.path)
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

    # ---- content-addressed text -------------------------------------------------------------

    def _put_text(self, text: str) -> str:
        """Store `text` once (a text already held is not written again); its hash."""
        digest = _hash(text)
        self._db.execute(
            "INSERT OR IGNORE INTO blobs(hash, size, data) VALUES(?,?,?)",
            (digest, len(text.encode("utf-8")), text),
        )
        return digest

    def _text(self, digest: str) -> str:
        """The text a hash names (every hash a unit or revision holds has its blob)."""
        if digest == EMPTY_HASH:
            return ""
        row = self._db.execute("SELECT data FROM blobs WHERE hash=?", (digest,)).fetchone()
        if row is None:
            raise HubError(
                f"hub database {self.path} has no text for hash {digest}",
                "It was changed outside eksinf: restore it from a backup.",
                CONTRACT,
            )
        return str(row[0])

    def _drop_unreferenced_text(self) -> None:
        """Delete blobs no revision and no upload base names any more."""
        self._db.execute(
            "DELETE FROM blobs WHERE hash NOT IN (SELECT data_hash FROM revisions) AND hash NOT "
            "IN (SELECT upload_base_hash FROM units WHERE upload_base_hash IS NOT NULL)"
        )

    def _space_row(self, slug: str) -> sqlite3.Row:
        row: sqlite3.Row | None = self._db.execute(
            "SELECT * FROM spaces WHERE slug=?", (slug,)
        ).fetchone()
        if row is None:
            raise NotFound(f"space {slug} not found", "List spaces with `eksinf hub spaces`.")
        return row

    def _unit_row(self, space: str, slug: str) -> sqlite3.Row:
        sid = self._space_row(space)["id"]
        row: sqlite3.Row | None = self._db.execute(
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
        row: sqlite3.Row | None = self._db.execute(
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
        row: sqlite3.Row = self._db.execute(
            "SELECT s.slug || '/' || t.slug FROM targets t JOIN spaces s ON s.id=t.space_id "
            "WHERE t.id=?",
            (target_id,),
        ).fetchone()
        return cast(str, row[0])  # the concatenation of two NOT NULL slugs

    def _space(self, row: sqlite3.Row) -> Space:
        return Space(
            row["id"],
            row["slug"],
            json.loads(row["labels"]),
            json.loads(row["annotations"]),
            self._target_ref(row["release_target_id"]),
        )

    def _unit(self, row: sqlite3.Row, space_slug: str | None = None) -> Unit:
        """A unit from its row (metadata only: a unit row holds no text). A listing row
        carries its space's slug and its target's ref (`UNIT_LISTING`)."""
        if "target_ref" in row.keys():  # noqa: SIM118 (a Row iterates its values)
            space_slug, target_ref = row["space_slug"], row["target_ref"]
        else:
            target_ref = self._target_ref(row["target_id"])
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
            target_ref,
            row["last_released"],
            row["upstream_unit_id"],
            row["upstream_revision"],
            _json_list(row["validation_errors"]),
            _json_list(row["placeholders"]),
            {} if row["labels"] == "{}" else json.loads(row["labels"]),
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
        digest = self._put_text(data)
        self._db.execute(
            "INSERT INTO units(id, space_id, slug, target_id, head, data_hash, placeholders,"
            " validation_errors, upload_base_hash, upstream_unit_id, upstream_revision, labels)"
            " VALUES(?,?,?,?,1,?,?,?,?,?,?,'{}')",
            (
                unit_id,
                space_id,
                slug,
                target_id,
                digest,
                json.dumps(found),
                json.dumps(self._gates(target_id, found)),
                None if upload_base is None else self._put_text(upload_base),
                upstream[0] if upstream else None,
                upstream[1] if upstream else None,
            ),
        )
        self._db.execute(
            "INSERT INTO revisions(unit_id, num, description, data_hash) VALUES(?,?,?,?)",
            (unit_id, 1, description, digest),
        )
        return unit_id

    def _write(self, row: sqlite3.Row, data: str, description: str) -> bool:
        """Append a revision when the content changed; an unchanged write does nothing."""
        digest = _hash(data)
        if digest == row["data_hash"]:
            return False
        head = row["head"] + 1
        found = _placeholders(data)
        self._put_text(data)
        self._db.execute(
            "UPDATE units SET head=?, data_hash=?, placeholders=?, validation_errors=? WHERE id=?",
            (
                head,
                digest,
                json.dumps(found),
                json.dumps(self._gates(row["target_id"], found)),
                row["id"],
            ),
        )
        self._db.execute(
            "INSERT INTO revisions(unit_id, num, description, data_hash) VALUES(?,?,?,?)",
            (row["id"], head, description, digest),
        )
        return True

    def _refresh_row(self, unit_id: str) -> sqlite3.Row:
        row: sqlite3.Row = self._db.execute("SELECT * FROM units WHERE id=?", (unit_id,)).fetchone()
        return row

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
            current = json.loads(row["labels"])
            merged = {**current, **labels}
            if merged != current:  # a rerun's labels are the same: nothing written
                db.execute(
                    "UPDATE spaces SET labels=? WHERE id=?",
                    (json.dumps(merged, sort_keys=True), row["id"]),
                )
            return self.get_space(slug)

    def _set_release_target(self, space_id: str, target_id: str | None) -> None:
        self._db.execute(
            "UPDATE spaces SET release_target_id=? WHERE id=? AND release_target_id IS NOT ?",
            (target_id, space_id, target_id),
        )

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
            self._drop_unreferenced_text()

    # ---- units ------------------------------------------------------------------------------

    def list_units(self, space: str | None = None, where: str | None = None) -> list[Unit]:
        if space is None:
            rows = self._db.execute(UNIT_LISTING + " ORDER BY s.slug, u.slug").fetchall()
        else:
            sid = self._space_row(space)["id"]
            rows = self._db.execute(
                UNIT_LISTING + " WHERE u.space_id=? ORDER BY u.slug", (sid,)
            ).fetchall()
        selected = where_select(rows, where, self._row_attribute)
        return [self._unit(r) for r in selected]

    def _row_attribute(self, row: sqlite3.Row, name: str) -> list[str]:
        if name == "Slug":
            return [row["slug"]]
        if name == "Space":
            return [row["space_slug"]]
        if name == "Target":
            ref = self._target_ref(row["target_id"])
            return [ref] if ref else []
        if name == "Kind":  # the one attribute in the text: read only when a clause asks
            docs = load_docs(self._text(row["data_hash"]))
            return [d.get("kind", "") for d in docs if isinstance(d, dict)]
        if name.startswith("Labels."):
            value = json.loads(row["labels"]).get(name.removeprefix("Labels."))
            return [] if value is None else [value]
        return []

    def get_unit(self, space: str, slug: str) -> Unit:
        return self._unit(self._unit_row(space, slug), space)

    def unit_data(self, space: str, slug: str, revision: int | None = None) -> str:
        row = self._unit_row(space, slug)
        if revision is None:
            return self._text(row["data_hash"])
        rev = self._db.execute(
            "SELECT data_hash FROM revisions WHERE unit_id=? AND num=?", (row["id"], revision)
        ).fetchone()
        if rev is None:
            raise NotFound(f"unit {space}/{slug} has no revision {revision} (head {row['head']})")
        return self._text(rev["data_hash"])

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

    def _annotate(self, space_id: str, annotations: dict[str, str]) -> None:
        row = self._db.execute("SELECT annotations FROM spaces WHERE id=?", (space_id,)).fetchone()
        current = json.loads(row[0])
        merged = {**current, **annotations}
        if merged != current:  # a re-upload of the same source: nothing written
            self._db.execute(
                "UPDATE spaces SET annotations=? WHERE id=?",
                (json.dumps(merged, sort_keys=True), space_id),
            )

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
