"""LocalHub: the embedded hub, one SQLite file.

The store (connection, transactions, spaces, units and their content-addressed revisions) is in
`store`, variants (upload, clone, promote) in `variants`, the schema and its migration steps in
`schema`; this module adds links, functions, targets, triggers, releases and the consistency
check, and is the class the rest of eksinf opens.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from typing import Any

from eksinf.core.roundtrip import edit_text
from eksinf.core.yamlio import load_docs
from eksinf.publish import argo

from ..errors import CONTRACT, FAILURE, USAGE, EksinfError
from ..links import engine
from ..model.digest import oci_digest
from ..model.names import OWNER, OWNER_LABEL, apps_space
from . import functions
from .protocol import (
    APPS_SPACE_ANNOTATION,
    PLACEHOLDER_GATE_FUNCTION,
    AlreadyExists,
    FunctionResult,
    GateBlocked,
    HubError,
    Link,
    NoChanges,
    NotFound,
    Release,
    Target,
)
from .schema import SCHEMA_VERSION
from .store import (
    DEFAULT_PATH,
    RELEASE_TAG,
    UNIT_LISTING,
    highest_release,
    release_ref,
    unit_slug,
    where_select,
)
from .variants import Variants

__all__ = [
    "DEFAULT_PATH",
    "RELEASE_TAG",
    "SCHEMA_VERSION",
    "LocalHub",
    "highest_release",
    "release_ref",
    "unit_slug",
]


class LocalHub(Variants):
    # ---- links ------------------------------------------------------------------------------

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
                "SELECT l.*, t.data_hash AS up_hash, t.slug AS up_slug FROM links l "
                "JOIN units t ON t.id=l.to_unit_id WHERE l.from_unit_id=? AND "
                "l.update_type='TransformPaths' ORDER BY l.slug",
                (row["id"],),
            ).fetchall()
            if not links:
                return False
            bodies = [(f"link {space}/{link['slug']}", json.loads(link["body"])) for link in links]
            params = [
                engine.upstream_params(load_docs(self._text(link["up_hash"])), body, what)
                for link, (what, body) in zip(links, bodies, strict=True)
            ]

            def resolve_all(docs: list[Any]) -> bool:
                changed = False
                for (what, body), values in zip(bodies, params, strict=True):
                    changed |= engine.apply_link(docs, body, values, what)
                return changed

            # the unit keeps its comments, quoting and key order: only the linked values change
            text = edit_text(self._text(row["data_hash"]), resolve_all, f"{space}/{unit}")
            if text is None:
                return False
            return self._write(row, text, "resolve links")

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
                    UNIT_LISTING + " WHERE u.space_id=? ORDER BY u.slug", (sid,)
                ).fetchall()
                rows = where_select(rows, where, self._row_attribute)
            changed, unchanged = [], []
            for row in rows:
                # the unit keeps its comments, quoting and key order: only the edit shows in a diff
                text = edit_text(
                    self._text(row["data_hash"]),
                    lambda docs: fn(docs, list(args)),
                    f"{space}/{row['slug']}",
                )
                if text is not None and self._write(row, text, f"{function} {' '.join(args)}"):
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
            target, members = self._releasable_units(db, space, row)
            texts = {u["slug"]: self._text(u["data_hash"]) for u in members}
            files = {f"{slug}.yaml": text.encode("utf-8") for slug, text in texts.items() if text}
            latest = db.execute(
                "SELECT * FROM releases WHERE space_id=? ORDER BY num DESC LIMIT 1", (row["id"],)
            ).fetchone()
            if latest is not None and latest["digest"] == bundle.bundle_digest(files):
                raise NoChanges(space, self._release(space, latest))
            blob = bundle.bundle_bytes(files)
            digest = oci_digest(blob)
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
        return self._record_release(
            space, row["id"], num, digest, pushed.manifest_digest, len(files), ref, heads
        )

    def _releasable_units(
        self, db: sqlite3.Connection, space: str, row: sqlite3.Row
    ) -> tuple[sqlite3.Row, list[sqlite3.Row]]:
        """The space's release target and its units, refused while any unit is gated."""
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
        return target, members

    def _record_release(
        self,
        space: str,
        space_id: str,
        num: int,
        digest: str,
        manifest_digest: str,
        file_count: int,
        ref: str,
        heads: dict[str, str],
    ) -> Release:
        """Record what was pushed: the units as they were read before the push. A unit edited
        during the push keeps its newer head unreleased; a concurrent publish that took this
        number with other content is refused (its push already failed on the immutable tag, or
        won)."""
        with self._tx() as db:
            taken = db.execute(
                "SELECT * FROM releases WHERE space_id=? AND num=?", (space_id, num)
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
                    (space_id, num, digest, manifest_digest, file_count, ref),
                )
                for unit_id, head in heads.items():
                    db.execute("UPDATE units SET last_released=? WHERE id=?", (head, unit_id))
            return self._release(
                space,
                db.execute(
                    "SELECT * FROM releases WHERE space_id=? AND num=?", (space_id, num)
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
        problems += [
            f"revision {r[0]}#{r[1]}: no text for hash {r[2]}"
            for r in self._db.execute(
                "SELECT v.unit_id, v.num, v.data_hash FROM revisions v LEFT JOIN blobs b "
                "ON b.hash=v.data_hash WHERE b.hash IS NULL"
            )
        ]
        problems += [
            f"unit {r[0]}: head text {r[1]} is not its head revision's"
            for r in self._db.execute(
                "SELECT u.slug, u.data_hash FROM units u JOIN revisions v ON v.unit_id=u.id "
                "AND v.num=u.head WHERE v.data_hash != u.data_hash"
            )
        ]
        return problems
