"""The `Hub` protocol: what install, deploy, link-profile and sandbox may ask of a config hub.

Two backends implement it: `LocalHub` (SQLite, the default) and `CubHub` (drives the `cub` CLI).
Records mirror ConfigHub's entities (see docs/hub.md) so both backends return the same shapes.
Errors are typed, so callers branch on the class, never on message text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Self

from ..errors import CONTRACT, ENVIRONMENT, FAILURE, EksinfError
from ..model.placeholder import PLACEHOLDER

PLACEHOLDER_GATE_FUNCTION = "vet-placeholders"
APPS_SPACE_ANNOTATION = "confighub.com/argo-apps-space"
UPSTREAM_SPACE_ANNOTATION = "UpstreamSpaceID"


# ---- errors ---------------------------------------------------------------------------------


class HubError(EksinfError):
    """Base of every hub error."""


class NotFound(HubError):
    """The named entity does not exist. Exit 1 by default; callers for whom absence breaks a
    stated rule (deploy without a base) pass CONTRACT."""

    def __init__(self, message: str, hint: str = "", exit_code: int = FAILURE) -> None:
        super().__init__(message, hint, exit_code)


class AlreadyExists(HubError):
    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message, hint, CONTRACT)


class GateBlocked(HubError):
    """Publishing refused: units still fail a validating trigger (gates are
    `<trigger-space>/<trigger>/<function>` keys)."""

    def __init__(self, space: str, gates: list[str], units: list[str]) -> None:
        self.space = space
        self.gates = sorted(gates)
        self.units = sorted(units)
        super().__init__(
            f"cannot publish {space}: gate {', '.join(self.gates)} blocks unit(s) "
            f"{', '.join(self.units)}",
            f"Fill the remaining {PLACEHOLDER} values (link the units to the profile with "
            "`eksinf link-profile`, or set them with `eksinf fn`), then publish again.",
            CONTRACT,
        )


class NoChanges(HubError):
    """Publishing content identical to the latest release: a no-op, reported as such."""

    def __init__(self, space: str, release: Release | None = None) -> None:
        self.space = space
        self.release = release
        super().__init__(f"{space}: no changes since the latest release", exit_code=0)


class ReferencedElsewhere(HubError):
    """A delete refused because other spaces still point into this one."""

    def __init__(self, space: str, referrers: list[str], hint: str = "") -> None:
        self.space = space
        self.referrers = sorted(referrers)
        super().__init__(
            f"cannot delete space {space}: referenced by {', '.join(self.referrers)}",
            hint
            or "Delete the referring spaces first (variants, then apps spaces, then the "
            "profile, then target spaces), or unlink them.",
            CONTRACT,
        )


class MergeConflict(HubError):
    """Upstream changes that collide with a variant's own edits: nothing was written."""

    def __init__(self, space: str, conflicts: list[str]) -> None:
        self.space = space
        self.conflicts = sorted(conflicts)
        super().__init__(
            f"{space}: {len(self.conflicts)} upstream change(s) collide with edits made on the "
            "variant (unit: field): " + "; ".join(self.conflicts),
            "Nothing was merged. Resolve each field on the variant (set it to the upstream "
            "value, or undo the upstream change), then run again.",
            CONTRACT,
        )


class Unavailable(HubError):
    """The hub could not be reached or answered with something we do not recognise."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message, hint, ENVIRONMENT)


# ---- records --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Space:
    space_id: str
    slug: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    release_target: str | None = None  # "<space>/<target>" of the OCI target releases go to

    def to_json(self) -> dict[str, Any]:
        return {
            "spaceId": self.space_id,
            "slug": self.slug,
            "labels": self.labels,
            "annotations": self.annotations,
            "releaseTarget": self.release_target,
        }


@dataclass(frozen=True)
class Unit:
    unit_id: str
    space: str
    slug: str
    head_revision: int
    data_hash: str
    target: str | None = None  # "<space>/<target>"
    last_released_revision: int = 0
    upstream_unit_id: str | None = None
    upstream_revision: int | None = None
    validation_errors: tuple[str, ...] = ()
    placeholders: tuple[str, ...] = ()  # "<Kind>/<ns>/<name>:<path>" still holding a placeholder
    labels: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "unitId": self.unit_id,
            "space": self.space,
            "slug": self.slug,
            "headRevisionNum": self.head_revision,
            "dataHash": self.data_hash,
            "target": self.target,
            "lastReleasedRevisionNum": self.last_released_revision,
            "upstreamUnitId": self.upstream_unit_id,
            "upstreamRevisionNum": self.upstream_revision,
            "validationErrors": list(self.validation_errors),
            "placeholders": list(self.placeholders),
            "labels": self.labels,
        }


@dataclass(frozen=True)
class Revision:
    num: int
    description: str
    data_hash: str

    def to_json(self) -> dict[str, Any]:
        return {
            "revisionNum": self.num,
            "description": self.description,
            "dataHash": self.data_hash,
        }


@dataclass(frozen=True)
class Link:
    link_id: str
    slug: str
    space: str
    from_unit: str
    to_space: str
    to_unit: str
    update_type: str
    bindings: dict[str, Any] = field(default_factory=dict)  # TransformPaths JSON body

    def to_json(self) -> dict[str, Any]:
        return {
            "linkId": self.link_id,
            "slug": self.slug,
            "space": self.space,
            "fromUnit": self.from_unit,
            "toSpace": self.to_space,
            "toUnit": self.to_unit,
            "updateType": self.update_type,
            **self.bindings,
        }


@dataclass(frozen=True)
class Target:
    target_id: str
    space: str
    slug: str
    registry: str  # `host:port/prefix` or `oci-layout:DIR`
    apps_space: str | None = None
    trigger_space: str | None = None

    @property
    def ref(self) -> str:
        return f"{self.space}/{self.slug}"

    def to_json(self) -> dict[str, Any]:
        return {
            "targetId": self.target_id,
            "space": self.space,
            "slug": self.slug,
            "providerType": "OCI",
            "registry": self.registry,
            "appsSpace": self.apps_space,
            "triggerSpace": self.trigger_space,
        }


@dataclass(frozen=True)
class Release:
    space: str
    release_num: int
    digest: str  # sha256 of the gzip'd tar bundle
    manifest_digest: str
    unit_count: int | None  # None: the hub does not report it (cub's Release has no count)
    ref: str  # where it was pushed

    def to_json(self) -> dict[str, Any]:
        return {
            "space": self.space,
            "releaseNum": self.release_num,
            "digest": self.digest,
            "manifestDigest": self.manifest_digest,
            "unitCount": self.unit_count,
            "ref": self.ref,
        }


@dataclass(frozen=True)
class UploadSource:
    """What `variant_upload` reads: a description for the record, and the per-file content."""

    ref: str  # oci ref, bundle path or directory, as the user named it
    files: dict[str, bytes]  # file name -> bytes; the stem is the unit slug
    digest: str | None = None  # manifest digest for OCI sources


@dataclass(frozen=True)
class UploadReport:
    space: str
    space_created: bool
    created: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    emptied: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()  # units whose file vanished, left alone without prune
    conflicts: tuple[str, ...] = ()  # "unit: path" kept downstream during the merge
    revert_hint: str = ""

    @property
    def changed(self) -> bool:
        return bool(self.space_created or self.created or self.updated or self.emptied)

    def to_json(self) -> dict[str, Any]:
        return {
            "space": self.space,
            "spaceCreated": self.space_created,
            "created": list(self.created),
            "updated": list(self.updated),
            "unchanged": list(self.unchanged),
            "emptied": list(self.emptied),
            "missing": list(self.missing),
            "conflicts": list(self.conflicts),
            "revertHint": self.revert_hint,
        }


@dataclass(frozen=True)
class PromoteReport:
    """What a promote carried from the upstream space into a variant."""

    space: str
    updated: tuple[str, ...] = ()  # merged: upstream changes in, the variant's edits kept
    added: tuple[str, ...] = ()  # new upstream units, cloned
    emptied: tuple[str, ...] = ()  # units upstream emptied (their file was deleted)

    @property
    def changed(self) -> bool:
        return bool(self.updated or self.added or self.emptied)

    def to_json(self) -> dict[str, Any]:
        return {
            "space": self.space,
            "updated": list(self.updated),
            "added": list(self.added),
            "emptied": list(self.emptied),
        }


@dataclass(frozen=True)
class FunctionResult:
    function: str
    changed: tuple[str, ...]  # unit slugs that got a new revision
    unchanged: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "changed": list(self.changed),
            "unchanged": list(self.unchanged),
        }


# ---- the protocol ---------------------------------------------------------------------------


class Closing:
    """A hub's lifetime: `with open_hub(root) as hub:` closes it on every path out."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Hub(Protocol):
    """Every operation is atomic: it either happens completely or not at all. Open one with
    `with open_hub(...) as hub:`; the context closes it (a LocalHub holds an SQLite connection)."""

    name: str

    # lifetime
    def close(self) -> None: ...
    def __enter__(self) -> Hub: ...
    def __exit__(self, *exc: object) -> None: ...

    # spaces
    def list_spaces(self, where: str | None = None) -> list[Space]: ...
    def get_space(self, slug: str) -> Space: ...
    def space_exists(self, slug: str) -> bool: ...
    def create_space(
        self, slug: str, labels: dict[str, str] | None = None, *, allow_exists: bool = False
    ) -> Space: ...
    def label_space(self, slug: str, labels: dict[str, str]) -> Space: ...
    def delete_space(self, slug: str, *, recursive: bool = False) -> None: ...

    # units
    def list_units(self, space: str | None = None, where: str | None = None) -> list[Unit]: ...
    def get_unit(self, space: str, slug: str) -> Unit: ...
    def unit_data(self, space: str, slug: str, revision: int | None = None) -> str: ...
    def create_unit(
        self, space: str, slug: str, data: str, *, target: str | None = None
    ) -> Unit: ...
    def update_unit(self, space: str, slug: str, data: str, description: str) -> Unit: ...
    def history(self, space: str, slug: str) -> list[Revision]: ...
    def restore(self, space: str, slug: str, revision: int) -> Unit: ...

    # variants
    def variant_upload(
        self,
        component: str,
        variant: str,
        source: UploadSource,
        *,
        labels: dict[str, str] | None = None,
        prune: bool = False,
        dry_run: bool = False,
    ) -> UploadReport: ...
    def variants_of(self, component: str) -> list[str]: ...
    def variant_create(
        self, variant: str, upstream_space: str, *, target: str | None = None
    ) -> Space: ...
    def variant_promote(self, space: str) -> PromoteReport: ...

    # links
    def set_link(
        self, space: str, unit: str, to_space: str, to_unit: str, bindings: dict[str, Any]
    ) -> Link: ...
    def list_links(self, space: str) -> list[Link]: ...
    def delete_link(self, space: str, slug: str) -> None: ...
    def resolve(self, space: str, unit: str) -> bool: ...

    # functions
    def invoke(
        self,
        space: str,
        function: str,
        args: list[str],
        *,
        unit: str | None = None,
        where: str | None = None,
    ) -> FunctionResult: ...

    # targets, triggers, releases
    def create_target(self, space: str, slug: str, registry: str) -> Target: ...
    def get_target(self, ref: str) -> Target: ...
    def create_trigger(self, space: str, slug: str, function: str, description: str) -> None: ...
    def publish(self, space: str) -> Release: ...
    def list_releases(self, space: str) -> list[Release]: ...
