"""CubHub: the `Hub` protocol over the `cub` CLI, for teams whose hub is a hosted ConfigHub.

Every call goes through one runner (`CONFIGHUB_AGENT=1`, `-o json` for reads, JSON bodies on
stdin: cub silently drops YAML link bodies). Failures are mapped onto the typed errors by
recognised text; absence is reported only for a recognised not-found answer, and anything
unrecognised is `Unavailable`, never "empty".

The command lines and output shapes follow cub's own source (github.com/confighub/sdk,
`cmd/cub/*.go`); tests/fixtures/cub/README.md names the file and commit of each. Limit: no hosted
ConfigHub is reachable from where this was built, so the tests run a fake `cub` that answers in
those shapes, not a live session.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eksinf.core.types import Doc, Docs
from eksinf.core.yamlio import MAX_TEXT
from eksinf.publish import argo

from ..errors import CONTRACT
from ..model.names import (
    OWNER,
    STATE_DIR,
    apps_space,
    base_space,
    owner_labels,
    variant_space,
)
from .protocol import (
    APPS_SPACE_ANNOTATION,
    AlreadyExists,
    Closing,
    FunctionResult,
    GateBlocked,
    HubError,
    Link,
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

TIMEOUT = 300
# Re-upload into a populated space arrived in cub v0.2.14; older cub fails with "already exists".
MIN_VERSION = (0, 2, 14)
STAGING_DIR = Path(STATE_DIR) / "cub-upload"
_NOT_FOUND = ("not found", "does not exist", "no such")
_GATE_LINE = re.compile(r"(?:Apply Gates|Validation Errors|ApplyGates|ValidationErrors):\s*(\S+)")
# The lines `cub variant upload` prints (cmd/cub/variant_upload_reconcile.go).
_REUPLOADED = re.compile(r"^Re-uploaded (\S+): (\d+) created, (\d+) updated, (\d+) emptied$")
_DRY_RUN_LINE = re.compile(r"^  ([+~-]) (\S+) \((create|update|empty)\)$")
_FIRST_UPLOAD_LINE = re.compile(r"^  \+ (\S+)$")
_NOT_IN_INPUT = re.compile(r"^Note: \d+ Unit\(s\) are in the Space but not in this input")
MAX_OUTPUT = MAX_TEXT
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class CubResult:
    code: int
    stdout: str
    stderr: str


Runner = Callable[[list[str], str | None], CubResult]


def run_cub(args: list[str], stdin: str | None = None) -> CubResult:
    """The one place a `cub` process is started."""
    binary = shutil.which("cub")
    if binary is None:
        raise Unavailable(
            "cub is not installed (needed by --hub cub)",
            "Install the ConfigHub CLI and run `cub auth login`, or use the embedded hub "
            "(--hub local).",
        )
    # Without a body cub gets an empty stdin, never the user's terminal.
    feed: dict[str, Any] = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
    try:
        done = subprocess.run(
            [binary, *args],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env={**os.environ, "CONFIGHUB_AGENT": "1"},
            **feed,
        )
    except subprocess.TimeoutExpired as exc:
        raise Unavailable(f"cub {' '.join(args[:3])} timed out after {TIMEOUT}s") from exc
    return CubResult(done.returncode, done.stdout, done.stderr)


def parse_version(text: str) -> tuple[int, int, int] | None:
    """The client version in `cub version` output, or None for a build without one ("dev").

    cub prints a `Client Version:` block; newer builds carry `Version: vX.Y.Z` in it, older
    ones put the release tag on the `Commit:` line (cmd/cub/version.go)."""
    in_client = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.endswith(":") and not raw.startswith(" "):
            in_client = line == "Client Version:"
            continue
        key, _, value = line.partition(":")
        if in_client and key in ("Version", "Commit"):
            match = _VERSION.match(value.strip())
            if match:
                return (int(match.group(1)), int(match.group(2)), int(match.group(3)))
    return None


def _first_line(result: CubResult) -> str:
    for text in (result.stderr, result.stdout):
        for line in text.splitlines():
            if line.strip():
                return line.strip()
    return f"exit status {result.code}"


def _pick(row: Doc, *names: str, default: Any = None) -> Any:
    """The first present field: servers renamed some (ApplyGates -> ValidationErrors)."""
    for name in names:
        if name in row and row[name] is not None:
            return row[name]
    return default


def _slugs(lines: list[str], pattern: re.Pattern[str], kind: str | None = None) -> tuple[str, ...]:
    found = []
    for line in lines:
        match = pattern.match(line)
        if match and (kind is None or match.group(3) == kind):
            found.append(match.group(2) if kind else match.group(1))
    return tuple(sorted(found))


def _not_in_input(lines: list[str]) -> tuple[str, ...]:
    """The `  - <slug>` list under cub's "Note: N Unit(s) are in the Space but not in this
    input" (units left alone without --prune)."""
    out: list[str] = []
    for i, line in enumerate(lines):
        if _NOT_IN_INPUT.match(line):
            for item in lines[i + 2 :]:  # the note is two lines, then the list
                if not item.startswith("  - "):
                    break
                out.append(item[4:].strip())
    return tuple(sorted(out))


class CubHub(Closing):
    name = "cub"

    def __init__(self, root: Path, runner: Runner = run_cub) -> None:
        self._staging = root / STAGING_DIR
        self._runner = runner
        self._version_checked = False
        self._target_refs: dict[str, str] = {}

    # ---- plumbing ---------------------------------------------------------------------------

    def _run(self, args: list[str], stdin: str | None = None) -> str:
        result = self._runner(args, stdin)
        if result.code == 0:
            return result.stdout
        raise self._error(args, result)

    def _json(self, args: list[str]) -> Any:
        out = self._run([*args, "-o", "json"])
        if len(out) > MAX_OUTPUT:  # bounded like every YAML eksinf reads (yamlio.MAX_TEXT)
            raise Unavailable(f"cub {' '.join(args[:2])}: output is over {MAX_OUTPUT} characters")
        try:
            return json.loads(out) if out.strip() else None
        except (json.JSONDecodeError, RecursionError) as exc:  # RecursionError: nested too deep
            raise Unavailable(f"cub {' '.join(args[:2])}: output is not JSON ({exc})") from exc

    def _rows(self, args: list[str]) -> Docs:
        """A list read with every field: without `--select`, cub selects only its table
        columns (cmd/cub/release_list.go, target_list.go build the select from them)."""
        return self._json([*args, "--select", "*"]) or []

    def _error(self, args: list[str], result: CubResult) -> HubError:
        text = f"{result.stderr}\n{result.stdout}"
        first = _first_line(result)
        lowered = text.lower()
        what = f"cub {' '.join(args[:2])}"
        space = args[2] if len(args) > 2 else "?"
        if "no changes were made" in lowered:
            return NoChanges(space)
        if "outstanding applygates" in lowered or "outstanding validationerrors" in lowered:
            gates = sorted(set(_GATE_LINE.findall(text)))
            return GateBlocked(space, gates, self._gated_units(space))
        if "was uploaded with --granularity" in lowered:
            return HubError(first, "Re-create the base with `eksinf install --recreate`.", CONTRACT)
        if "already exists" in lowered:
            return AlreadyExists(f"{what}: {first}")
        if args[:2] == ["space", "delete"] and (
            "referenc" in lowered or "still" in lowered or "bridgeworker" in lowered
        ):
            return ReferencedElsewhere(space, [first])
        if any(marker in lowered for marker in _NOT_FOUND):
            return NotFound(f"{what}: {first}")
        if "auth login" in lowered or "not authenticated" in lowered or "401" in first:
            return Unavailable(f"{what}: {first}", "Log in with `cub auth login`.")
        return Unavailable(f"{what}: {first}")

    def _gated_units(self, space: str) -> list[str]:
        try:
            return [u.slug for u in self.list_units(space) if u.validation_errors]
        except HubError:
            return []

    def require_version(self) -> None:
        """Refuse a cub older than MIN_VERSION (once per hub): re-upload needs it. A build
        that reports no release version (a local "dev" build) is let through."""
        if self._version_checked:
            return
        version = parse_version(self._run(["version"]))
        if version is not None and version < MIN_VERSION:
            floor = "v{}.{}.{}".format(*MIN_VERSION)
            raise Unavailable(
                f"cub v{version[0]}.{version[1]}.{version[2]} is too old: re-uploading into an "
                f"existing base needs cub {floor} or newer",
                'Upgrade the ConfigHub CLI (older cub refuses the upload with "already '
                'exists"), or rebuild the bases with `eksinf install --recreate`.',
            )
        self._version_checked = True

    # ---- records ----------------------------------------------------------------------------

    def _target_ref(self, target_id: str) -> str:
        """`<space>/<target>` of a TargetID: spaces name their release target by ID only."""
        if target_id not in self._target_refs:
            rows = self._rows(
                ["target", "list", "--space", "*", "--where", f"TargetID = '{target_id}'"]
            )
            row = next(iter(rows), None)
            if row is None:
                raise NotFound(f"release target {target_id} is not listed by `cub target list`")
            target = row.get("Target", row)
            space = target.get("SpaceSlug") or (row.get("Space") or {}).get("Slug", "")
            self._target_refs[target_id] = f"{space}/{target['Slug']}"
        return self._target_refs[target_id]

    def _space(self, row: Doc) -> Space:
        space = row.get("Space", row)
        target_id = space.get("ReleaseTargetID")
        return Space(
            space["SpaceID"],
            space["Slug"],
            space.get("Labels") or {},
            space.get("Annotations") or {},
            self._target_ref(target_id) if target_id else None,
        )

    @staticmethod
    def _unit(row: Doc) -> Unit:
        unit = row.get("Unit", row)
        space = row.get("Space") or {}
        target = row.get("Target") or {}
        target_ref = (
            f"{target.get('SpaceSlug', space.get('Slug', ''))}/{target['Slug']}"
            if target.get("Slug")
            else None
        )
        return Unit(
            unit["UnitID"],
            space.get("Slug", ""),
            unit["Slug"],
            unit.get("HeadRevisionNum", 0),
            _pick(unit, "DataHash", "ContentHash", default=""),
            target_ref,
            _pick(unit, "LastReleasedRevisionNum", "LastAppliedRevisionNum", default=0),
            unit.get("UpstreamUnitID"),
            unit.get("UpstreamRevisionNum"),
            tuple(sorted(_pick(unit, "ValidationErrors", "ApplyGates", default={}) or {})),
            (),
            unit.get("Labels") or {},
        )

    # ---- spaces -----------------------------------------------------------------------------

    def list_spaces(self, where: str | None = None) -> list[Space]:
        rows = self._rows(["space", "list", *(["--where", where] if where else [])])
        return [self._space(r) for r in rows]

    def get_space(self, slug: str) -> Space:
        return self._space(self._json(["space", "get", slug]))

    def space_exists(self, slug: str) -> bool:
        try:
            self._json(["space", "get", slug])
        except NotFound:  # absence only on a recognised not-found answer
            return False
        return True

    def create_space(
        self, slug: str, labels: dict[str, str] | None = None, *, allow_exists: bool = False
    ) -> Space:
        args = ["space", "create", slug]
        for key, value in sorted((labels or {}).items()):
            args += ["--label", f"{key}={value}"]
        self._run(args + (["--allow-exists"] if allow_exists else []))
        return self.get_space(slug)

    def label_space(self, slug: str, labels: dict[str, str]) -> Space:
        args = ["space", "update", slug, "--patch"]
        for key, value in sorted(labels.items()):
            args += ["--label", f"{key}={value}"]
        self._run(args)
        return self.get_space(slug)

    def delete_space(self, slug: str, *, recursive: bool = False) -> None:
        # never --recursive-force: it would override delete gates
        self._run(["space", "delete", slug, *(["--recursive"] if recursive else [])])

    # ---- units ------------------------------------------------------------------------------

    def list_units(self, space: str | None = None, where: str | None = None) -> list[Unit]:
        args = ["unit", "list", "--space", space or "*"]
        rows = self._rows(args + (["--where", where] if where else []))
        return [self._unit(r) for r in rows]

    def get_unit(self, space: str, slug: str) -> Unit:
        row = self._json(["unit", "get", slug, "--space", space])
        return self._unit({**row, "Space": row.get("Space") or {"Slug": space}})

    def unit_data(self, space: str, slug: str, revision: int | None = None) -> str:
        if revision:  # cmd/cub/revision_data.go: `cub revision data <unit> <revision-num>`
            return self._run(["revision", "data", "--space", space, slug, str(revision)])
        return self._run(["unit", "data", slug, "--space", space])

    def create_unit(self, space: str, slug: str, data: str, *, target: str | None = None) -> Unit:
        args = ["unit", "create", "--space", space, slug, "-"]
        self._run(args + (["--target", target] if target else []), data)
        return self.get_unit(space, slug)

    def update_unit(self, space: str, slug: str, data: str, description: str) -> Unit:
        self._run(
            ["unit", "update", "--space", space, slug, "-", "--change-desc", description], data
        )
        return self.get_unit(space, slug)

    def history(self, space: str, slug: str) -> list[Revision]:
        rows = self._rows(["revision", "list", slug, "--space", space])
        revisions = [r.get("Revision", r) for r in rows]
        return sorted(
            (
                Revision(
                    r["RevisionNum"],
                    r.get("Description", ""),
                    _pick(r, "DataHash", "ContentHash", default=""),
                )
                for r in revisions
            ),
            key=lambda r: r.num,
        )

    def restore(self, space: str, slug: str, revision: int) -> Unit:
        self._run(["unit", "update", "--space", space, slug, "--patch", "--restore", str(revision)])
        return self.get_unit(space, slug)

    # ---- variants ---------------------------------------------------------------------------

    def _stage(self, space: str, source: UploadSource) -> Path:
        """Write the unit files to `<stack>/.eksinf/cub-upload/<space>/`: a fixed path, so the
        space's recorded input is the same on every upload. The folder is eksinf's own
        (outdir's marker; cub reads only the .yaml/.yml files)."""
        from eksinf.core import outdir

        files = {}
        for name, data in sorted(source.files.items()):
            try:
                files[name] = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise HubError(
                    f"{source.ref}: {name} is not UTF-8 (byte {exc.start})",
                    "Unit files are YAML text; re-render or re-bundle the component.",
                    CONTRACT,
                ) from exc
        folder = outdir.claim(self._staging / space)
        outdir.write_tree(folder, files)
        return folder.path

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
        """`cub variant upload` of the files eksinf already read. eksinf pulls OCI sources itself,
        with its registry credentials, because cub pulls anonymously (public bundles only); the
        fixed `--source-description` is the units' external-source identity, so every upload of
        a component merges against the previous one and edits made in ConfigHub survive."""
        space = variant_space(component, variant)
        existed = self.space_exists(space)
        if existed and not dry_run:
            self.require_version()
        args = [
            "variant", "upload", "--component", component, "--variant", variant,
            "--granularity", "per-file", "--owner", OWNER,
            "--source-description", f"eksinf {component}",
        ]  # fmt: skip
        for key, value in sorted((labels or {}).items()):  # --label would label the units
            args += ["--space-label", f"{key}={value}"]
        if source.digest:
            args += ["--change-desc", f"{source.ref}@{source.digest}"]
        args += ["--dry-run"] if dry_run else []
        args += ["--prune"] if prune else []
        out = self._run([*args, str(self._stage(space, source))])
        lines = out.splitlines()
        if dry_run:
            return self._dry_run_report(space, lines)
        if not existed:
            return UploadReport(space, True)
        revert = next(
            (ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("Revert with:")), ""
        )
        counts = next((m for m in map(_REUPLOADED.match, lines) if m), None)
        if counts is None:  # "Already up to date", or wording we do not know: nothing claimed
            return UploadReport(space, False, missing=_not_in_input(lines), revert_hint=revert)
        created, updated, emptied = (int(counts.group(i)) for i in (2, 3, 4))
        # cub reports counts, not unit names: entries stand in as "#1", "#2", ...
        return UploadReport(
            space,
            False,
            created=tuple(f"#{i + 1}" for i in range(created)),
            updated=tuple(f"#{i + 1}" for i in range(updated)),
            emptied=tuple(f"#{i + 1}" for i in range(emptied)),
            missing=_not_in_input(lines),
            revert_hint=revert,
        )

    @staticmethod
    def _dry_run_report(space: str, lines: list[str]) -> UploadReport:
        """The names cub's `--dry-run` prints: `  + slug` for a first upload, else
        `  + slug (create)`, `  ~ slug (update)`, `  - slug (empty)`."""
        if any(ln.startswith(f"Space {space} does not exist yet") for ln in lines):
            return UploadReport(space, True, created=_slugs(lines, _FIRST_UPLOAD_LINE))
        return UploadReport(
            space,
            False,
            created=_slugs(lines, _DRY_RUN_LINE, "create"),
            updated=_slugs(lines, _DRY_RUN_LINE, "update"),
            emptied=_slugs(lines, _DRY_RUN_LINE, "empty"),
            missing=_not_in_input(lines),
        )

    def variants_of(self, component: str) -> list[str]:
        return sorted(
            s.slug
            for s in self.list_spaces(f"Labels.Component = '{component}'")
            if s.slug != base_space(component)
        )

    def variant_create(
        self, variant: str, upstream_space: str, *, target: str | None = None
    ) -> Space:
        upstream = self.get_space(upstream_space)
        component = upstream.labels.get("Component") or upstream_space.rsplit("-", 1)[0]
        space = variant_space(component, variant)
        if self.space_exists(space):
            raise AlreadyExists(f"space {space} already exists")
        self._run(
            [
                "variant",
                "create",
                variant,
                upstream_space,
                *(["--target", target] if target else []),
            ]
        )
        return self.get_space(space)

    def variant_promote(self, space: str) -> PromoteReport:
        """`cub variant promote`, reported from the unit heads before and after (ConfigHub's
        own merge decides; its conflicts come back as a cub error)."""
        before = {u.slug: u.head_revision for u in self.list_units(space)}
        self._run(["variant", "promote", space])
        after = {u.slug: u.head_revision for u in self.list_units(space)}
        return PromoteReport(
            space,
            tuple(sorted(s for s in after if s in before and before[s] != after[s])),
            tuple(sorted(s for s in after if s not in before)),
        )

    # ---- links ------------------------------------------------------------------------------

    @staticmethod
    def _link(row: Doc) -> Link:
        link = row.get("Link", row)
        return Link(
            link["LinkID"],
            link["Slug"],
            (row.get("Space") or {}).get("Slug", ""),
            (row.get("FromUnit") or {}).get("Slug", ""),
            (row.get("ToSpace") or {}).get("Slug", ""),
            (row.get("ToUnit") or {}).get("Slug", ""),
            link.get("UpdateType", ""),
            {
                k: link.get(k) or []
                for k in ("UpstreamPaths", "DownstreamPaths", "DownstreamSetters")
                if k in link
            },
        )

    def list_links(self, space: str) -> list[Link]:
        return [self._link(r) for r in self._rows(["link", "list", "--space", space])]

    def set_link(
        self, space: str, unit: str, to_space: str, to_unit: str, bindings: dict[str, Any]
    ) -> Link:
        body = json.dumps(bindings, sort_keys=True)
        existing = [
            lk
            for lk in self.list_links(space)
            if lk.from_unit == unit and lk.to_space == to_space and lk.to_unit == to_unit
        ]
        if existing:
            # `--allow-exists` would keep stale bindings: re-assert them with a patch
            self._run(
                ["link", "update", existing[0].slug, "--space", space, "--patch", "--from-stdin"],
                body,
            )
        else:
            self._run(
                [
                    "link", "create", "--space", space, "-", unit, to_unit, to_space,
                    "--update-type", "TransformPaths", "--auto-update", "--from-stdin",
                ],
                body,
            )  # fmt: skip
        for lk in self.list_links(space):
            if lk.from_unit == unit and lk.to_space == to_space and lk.to_unit == to_unit:
                return lk
        raise Unavailable(f"cub link create {space}/{unit}: the link is not listed afterwards")

    def delete_link(self, space: str, slug: str) -> None:
        self._run(["link", "delete", "--space", space, slug])

    def resolve(self, space: str, unit: str) -> bool:
        before = self.get_unit(space, unit).head_revision
        self._run(["unit", "update", "--space", space, "--patch", "--resolve", "Link:*", unit])
        return self.get_unit(space, unit).head_revision != before

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
        before = {u.slug: u.head_revision for u in self.list_units(space)}
        cmd = ["function", "do", "--quiet", "--space", space]
        cmd += ["--unit", unit] if unit else []
        cmd += ["--where", where] if where else []
        self._run([*cmd, function, *args])
        after = {u.slug: u.head_revision for u in self.list_units(space)}
        looked_at = [unit] if unit else sorted(after)
        changed = tuple(s for s in looked_at if after.get(s) != before.get(s))
        return FunctionResult(function, changed, tuple(s for s in looked_at if s not in changed))

    # ---- targets, triggers, releases --------------------------------------------------------

    def registry(self) -> str:
        """ConfigHub's OCI registry: `oci.<api host>:443` for https servers."""
        context = self._json(["context", "get"]) or {}
        server = ((context.get("coordinate") or {}).get("serverURL")) or ""
        match = re.match(r"^https://([^/:]+)", server)
        if not match:
            raise Unavailable(
                f"cannot derive the OCI registry from server URL {server!r}",
                "Only https ConfigHub servers advertise oci.<host>:443.",
            )
        return f"oci.{match.group(1)}:443"

    def create_target(self, space: str, slug: str, registry: str) -> Target:
        """ConfigHub serves releases from its own registry: `registry` is not used here."""
        apps = apps_space(space)
        self._run(
            ["worker", "create", "worker", "--space", space, "--is-server-worker", "--allow-exists"]
        )
        self._run(
            [
                "target", "create", slug, "{}", "worker", "--space", space, "-p", "OCI", "-t", "Any",
                "--annotation", f"{APPS_SPACE_ANNOTATION}={apps}", "--allow-exists",
            ]
        )  # fmt: skip
        self.create_space(apps, owner_labels(), allow_exists=True)
        self._run(["space", "update", apps, "--patch", "--release-target", f"{space}/{slug}"])
        root = argo.root_application(apps, self.registry())
        try:
            self.get_unit(apps, "root")
            self.update_unit(apps, "root", root, "root application")
        except NotFound:
            self.create_unit(apps, "root", root, target=f"{space}/{slug}")
        return self.get_target(f"{space}/{slug}")

    def get_target(self, ref: str) -> Target:
        space, _, slug = ref.partition("/")
        row = self._json(["target", "get", slug, "--space", space])
        target = row.get("Target", row)
        annotations = target.get("Annotations") or {}
        return Target(
            target["TargetID"],
            space,
            slug,
            "confighub",
            annotations.get(APPS_SPACE_ANNOTATION),
            space,
        )

    def create_trigger(self, space: str, slug: str, function: str, description: str) -> None:
        self._run(
            [
                "trigger", "create", slug, "Mutation", "Kubernetes/YAML", function,
                "--space", space, "--allow-exists", "--description", description,
            ]
        )  # fmt: skip
        space_id = self.get_space(space).space_id
        for row in self._rows(["target", "list", "--space", space]):
            target = row.get("Target", row)
            self._run(
                [
                    "target",
                    "update",
                    "--space",
                    space,
                    target["Slug"],
                    "--where-trigger",
                    f"SpaceID = '{space_id}'",
                ]
            )

    def publish(self, space: str) -> Release:
        # cmd/cub/release_publish.go prints the created Release itself, not an envelope
        return self._release(space, self._json(["release", "publish", space]))

    @staticmethod
    def _release(space: str, row: Doc) -> Release:
        release = row.get("Release", row)
        return Release(
            space,
            release.get("ReleaseNum", 0),
            release.get("Digest", ""),
            release.get("ManifestDigest", ""),
            None,  # cub's Release carries no unit count
            f"space/{space}",
        )

    def list_releases(self, space: str) -> list[Release]:
        """The space's releases Argo CD can still pull: a withdrawn one keeps its record with
        `Published` false (cub release withdraw) and is left out, as the original's list did."""
        rows = self._rows(["release", "list", "--space", space])
        published = [r for r in rows if r.get("Release", r).get("Published") is not False]
        return sorted((self._release(space, r) for r in published), key=lambda r: r.release_num)

    def close(self) -> None:
        return None
