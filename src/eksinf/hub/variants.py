"""The local hub's variants: per-file upload into a base (re-upload merges), cloning a space
into a variant bound to a target, and promoting upstream changes into it.

A clone names the same text as its upstream unit (one blob, two units); only what a variant
changes adds text to the hub.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field

from eksinf.core import cache
from eksinf.core.faults import checkpoint
from eksinf.core.types import Docs
from eksinf.core.yamlio import load_input_docs
from eksinf.publish import argo

from ..errors import CONTRACT, shell_command
from ..model.names import OWNER, OWNER_LABEL, variant_space
from . import merge
from .protocol import (
    UPSTREAM_SPACE_ANNOTATION,
    AlreadyExists,
    HubError,
    MergeConflict,
    PromoteReport,
    Space,
    UploadReport,
    UploadSource,
)
from .store import EMPTY_HASH, Store, _hash, _Rollback, unit_slug

UPLOADABLE = "a unit file reads as Kubernetes objects within the reader's bounds, no Secret"


def holds_secret(data: bytes, label: str) -> bool:
    """Whether a unit file to upload holds a Secret (never uploaded); an input error (exit 3,
    `label:line:col`) when it does not read as Kubernetes objects within the reader's bounds, so
    an alias bomb is refused before it is stored. A file that passed before (by its bytes and
    eksinf's code, recorded in the derived-data cache's `checks`, HMAC-checked) is not parsed
    again: the check is a pure function of them, and a rerun uploads the same files."""
    inputs = (cache.code_digest().encode(), data)
    if cache.passed(UPLOADABLE, *inputs):
        return False
    if any(d.get("kind") == "Secret" for d in load_input_docs(data, label)):
        return True
    cache.record_pass(UPLOADABLE, *inputs)
    return False


@dataclass
class _UploadTally:
    """What a re-upload did to each unit, in the order it did it."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    emptied: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    reverts: list[str] = field(default_factory=list)


def _check_granularity(space: str, row: sqlite3.Row) -> None:
    """A space uploaded with another granularity cannot take a per-file upload."""
    previous = json.loads(json.loads(row["annotations"]).get("confighub.com/external-source", "[]"))
    if previous and previous[0].get("granularity") not in (None, "per-file"):
        raise HubError(
            f'Space "{space}" was uploaded with --granularity {previous[0]["granularity"]}, '
            "but this upload specifies per-file.",
            "Re-create the base with `eksinf install --recreate`.",
            CONTRACT,
        )


class Variants(Store):
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
            # bounded (an alias bomb is refused before it is stored and walked by every later
            # link and function)
            if holds_secret(source.files[name], f"{source.ref}/{name}"):
                skipped_secrets.append(name)
                continue
            text = source.files[name].decode("utf-8")
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
        record: Docs,
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
            return self._upload_new_space(space, space_labels, planned, record, description)
        row = self._space_row(space)
        sid = row["id"]
        _check_granularity(space, row)
        self._annotate(sid, {"confighub.com/external-source": json.dumps(record, sort_keys=True)})
        existing = {
            r["slug"]: r for r in db.execute("SELECT * FROM units WHERE space_id=?", (sid,))
        }
        tally = _UploadTally()
        self._merge_planned(db, sid, space, existing, planned, description, tally)
        self._empty_vanished(db, space, existing, planned, prune, description, tally)
        return UploadReport(
            space,
            False,
            tuple(tally.created),
            tuple(tally.updated),
            tuple(tally.unchanged),
            tuple(tally.emptied),
            tuple(tally.missing),
            tuple(tally.conflicts),
            "; ".join(tally.reverts),
        )

    def _upload_new_space(
        self,
        space: str,
        space_labels: dict[str, str],
        planned: dict[str, str],
        record: Docs,
        description: str,
    ) -> UploadReport:
        """A first upload: create the space, record the source, insert every unit."""
        self.create_space(space, space_labels)
        sid = self._space_row(space)["id"]
        self._annotate(sid, {"confighub.com/external-source": json.dumps(record, sort_keys=True)})
        for slug, text in planned.items():
            self._insert_unit(sid, slug, text, description, upload_base=text)
        return UploadReport(space, True, created=tuple(planned))

    def _merge_planned(
        self,
        db: sqlite3.Connection,
        sid: str,
        space: str,
        existing: dict[str, sqlite3.Row],
        planned: dict[str, str],
        description: str,
        tally: _UploadTally,
    ) -> None:
        """Insert new units; three-way merge changed files into the units that exist."""
        for slug, text in planned.items():
            unit = existing.get(slug)
            if unit is None:
                self._insert_unit(sid, slug, text, description, upload_base=text)
                tally.created.append(slug)
                continue
            base_hash = unit["upload_base_hash"] or unit["data_hash"]
            if _hash(text) == base_hash and unit["data_hash"] != EMPTY_HASH:
                tally.unchanged.append(slug)
                continue
            result = merge.merge_text(self._text(base_hash), text, self._text(unit["data_hash"]))
            tally.conflicts += [f"{slug}: {c}" for c in result.conflicts]
            head_before = unit["head"]
            if self._write(unit, result.text, description):
                tally.updated.append(slug)
                tally.reverts.append(
                    shell_command(
                        "eksinf", "hub", "restore", space, slug, "--revision", head_before
                    )
                )
            else:
                tally.unchanged.append(slug)
            db.execute(
                "UPDATE units SET upload_base_hash=? WHERE id=?", (self._put_text(text), unit["id"])
            )

    def _empty_vanished(
        self,
        db: sqlite3.Connection,
        space: str,
        existing: dict[str, sqlite3.Row],
        planned: dict[str, str],
        prune: bool,
        description: str,
        tally: _UploadTally,
    ) -> None:
        """Units whose file is gone: emptied with prune, else reported as missing."""
        for slug, unit in sorted(existing.items()):
            if slug in planned or unit["data_hash"] == EMPTY_HASH:
                continue
            if prune:
                tally.reverts.append(
                    shell_command(
                        "eksinf", "hub", "restore", space, slug, "--revision", unit["head"]
                    )
                )
                self._write(unit, "", f"{description}: emptied (file gone)")
                db.execute(
                    "UPDATE units SET upload_base_hash=? WHERE id=?",
                    (self._put_text(""), unit["id"]),
                )
                tally.emptied.append(slug)
            else:
                tally.missing.append(slug)

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
                text = self._text(unit["data_hash"])
                clone_id = self._insert_unit(
                    sid,
                    unit["slug"],
                    text,
                    f"clone of {upstream_space}/{unit['slug']} revision {unit['head']}",
                    target_id=target_id,
                    upstream=(unit["id"], unit["head"]),
                    placeholders=json.loads(unit["placeholders"]),
                )
                clones[unit["id"]] = clone_id
                self._insert_link(sid, clone_id, unit["id"], "UpgradeUnit", {})
                if target_row and target_row["apps_space"]:
                    ships_namespace |= "kind: Namespace" in text
                    for ns in re.findall(r"^  namespace: (\S+)$", text, re.MULTILINE):
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
                    "SELECT data_hash FROM revisions WHERE unit_id=? AND num=?",
                    (up["id"], unit["upstream_revision"]),
                ).fetchone()["data_hash"]
                result = merge.merge_text(
                    self._text(base), self._text(up["data_hash"]), self._text(unit["data_hash"])
                )
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
                    if new["id"] in cloned or new["data_hash"] == EMPTY_HASH:
                        continue
                    clone_id = self._insert_unit(
                        sid,
                        new["slug"],
                        self._text(new["data_hash"]),
                        f"clone of upstream unit {new['slug']} revision {new['head']}",
                        target_id=target_id,
                        upstream=(new["id"], new["head"]),
                        placeholders=json.loads(new["placeholders"]),
                    )
                    self._insert_link(sid, clone_id, new["id"], "UpgradeUnit", {})
                    added.append(new["slug"])
            return PromoteReport(space, tuple(updated), tuple(added), tuple(emptied))
