"""The deploy path: install bases, deploy planes, link to the profile. Talks only to `Hub`.

Every step is idempotent: a rerun after a crash (or a second run) finds what exists, checks it
is what it should be, and does only what is missing. Fault points (`faults.checkpoint`) sit
between steps so tests can prove that.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eksinf import links
from eksinf.core import inside
from eksinf.core.faults import checkpoint
from eksinf.core.outdir import MARKER
from eksinf.core.types import Doc
from eksinf.core.yamldump import dump_docs
from eksinf.core.yamlio import load_docs, load_input_docs
from eksinf.model.stack import Stack
from eksinf.publish import bundle

from ..errors import CONTRACT, USAGE, EksinfError, shell_command
from ..hub.protocol import (
    AlreadyExists,
    GateBlocked,
    Hub,
    Link,
    NoChanges,
    NotFound,
    PromoteReport,
    UploadReport,
    UploadSource,
)
from ..hub.variants import holds_secret
from ..links import Binding, engine
from ..model.digest import oci_digest
from ..model.jsonkeys import camel_fields
from ..model.names import (
    BASE,
    MANAGED_BY,
    PROFILE_COMPONENT,
    PROFILE_KIND,
    PROFILE_UNIT,
    base_space,
    profile_space,
    variant_space,
)
from ..model.placeholder import PLACEHOLDER
from ..model.targets import TargetKind, cluster_by_name, kind_of

if TYPE_CHECKING:
    from eksinf.build.validate.release import ReleaseGate

GATE_TRIGGER = "no-placeholders"
GATE_DESCRIPTION = f"Blocks publishing a release that still holds a {PLACEHOLDER} value."

Say = Callable[[str], None]


def quiet(_msg: str) -> None:
    return None


# ---- sources ----------------------------------------------------------------------------


def _dir_files(path: Path) -> dict[str, bytes]:
    # an earlier pull's ownership marker is not a unit
    return {
        p.name: inside.read_bytes(p, path)
        for p in inside.files_under(path, recursive=False)
        if p.name != MARKER
    }


def unpacked_files(blob: bytes) -> dict[str, bytes]:
    with tempfile.TemporaryDirectory(prefix="eksinf-upload-") as tmp:
        out = Path(tmp) / "unit-files"
        bundle.safe_unpack(blob, out)
        return {
            p.relative_to(out).as_posix(): p.read_bytes()
            for p in sorted(out.rglob("*"))
            if p.is_file() and p != out / MARKER
        }


def read_source(ref: str) -> UploadSource:
    """One component's upload source: a directory of unit files, a bundle file (.tar.gz), or an
    OCI reference (`host:port/repo[:tag]`, `oci-layout:DIR[:tag]`, `oci://` tolerated)."""
    path = Path(ref)
    if path.is_dir():
        return UploadSource(ref, _dir_files(path))
    if path.is_file() or path.is_symlink():
        blob = inside.read_bytes(path, path.parent)  # a linked bundle is refused
        return UploadSource(ref, unpacked_files(blob), oci_digest(blob))
    from eksinf.publish import oci  # requests loads only to pull

    pulled = oci.pull(ref.removeprefix("oci://"))
    return UploadSource(ref, unpacked_files(pulled.blob), pulled.manifest_digest)


def source_for(component: str, where: str | None, stack: Stack) -> UploadSource | None:
    """The upload source of one component. `where` is a configs-like directory (one subfolder
    per component), a directory of `<component>.tar.gz` bundles, or an OCI prefix
    (`host:port/prefix` or `oci-layout:DIR`, the component is appended). None: the stack's
    configs/. Returns None when a directory source has nothing for the component."""
    if where is None:
        if not (stack.configs_dir / component).is_dir():
            return None
        return UploadSource(f"configs/{component}", bundle.component_files(stack, component))
    path = Path(where)
    if path.is_dir():
        if (path / component).is_dir():
            return read_source(str(path / component))
        archive = path / f"{component}{bundle.BUNDLE_SUFFIX}"
        return read_source(str(archive)) if archive.is_file() else None
    if path.is_file():
        raise EksinfError(
            f"--from {where}: a single file; name a directory of bundles or a registry prefix",
            "To load one component from one bundle: eksinf hub upload COMPONENT FILE.",
            USAGE,
        )
    return read_source(f"{where.removeprefix('oci://').rstrip('/')}/{component}")


# ---- install ----------------------------------------------------------------------------


@dataclass
class InstallReport:
    uploads: list[UploadReport] = field(default_factory=list)
    recreated: list[str] = field(default_factory=list)
    dry_run: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.recreated) or any(u.changed for u in self.uploads)

    def to_json(self) -> dict[str, Any]:
        return {
            "dryRun": self.dry_run,
            "recreated": self.recreated,
            "bases": [u.to_json() for u in self.uploads],
        }


def install(
    hub: Hub,
    stack: Stack,
    *,
    source: str | None = None,
    dry_run: bool = False,
    prune: bool = False,
    recreate: bool = False,
    sources: dict[str, UploadSource] | None = None,
    say: Say = quiet,
) -> InstallReport:
    """Create or refresh `<component>-base` for every component (all planes)."""
    report = InstallReport(dry_run=dry_run)
    if recreate:  # refuse before deleting anything, naming every variant in the way
        variants = [v for comp in stack.components for v in hub.variants_of(comp.name)]
        if variants:
            raise EksinfError(
                f"--recreate refused: the bases have downstream variants: {', '.join(variants)}",
                "Re-created units get new IDs that variants and links cannot follow. Remove "
                "the variants first (eksinf sandbox down / eksinf hub delete), or drop "
                "--recreate: a plain install merges and keeps IDs.",
                CONTRACT,
            )
    chosen: dict[str, UploadSource] = {}
    for comp in stack.components:  # every source is read and checked before the first upload
        src = (sources or {}).get(comp.name) or source_for(comp.name, source, stack)
        if src is None:
            raise NotFound(
                f"no units for component {comp.name} in {source or 'configs/'}",
                "Render first (`eksinf render`) or name a source that holds every component.",
                CONTRACT,
            )
        chosen[comp.name] = src
    for src in chosen.values():  # a unit that does not parse stops the install before any upload
        for name, data in sorted(src.files.items()):
            if name.endswith((".yaml", ".yml")):
                holds_secret(data, f"{src.ref}/{name}")
    if PROFILE_COMPONENT in chosen:
        _check_profile_source(chosen[PROFILE_COMPONENT])
    for comp in stack.components:
        src = chosen[comp.name]
        base = base_space(comp.name)
        if recreate and hub.space_exists(base):
            if dry_run:
                say(f"would DELETE {base} and rebuild it from {src.ref}")
            else:
                hub.delete_space(base, recursive=True)
                report.recreated.append(base)
        up = hub.variant_upload(
            comp.name, BASE, src, labels=MANAGED_BY, prune=prune, dry_run=dry_run
        )
        report.uploads.append(up)
        checkpoint("install.uploaded")
    return report


# ---- link-profile -----------------------------------------------------------------------


@dataclass
class LinkResult:
    space: str
    unit: str
    paths: int
    setters: int
    link_changed: bool
    resolved: bool

    def to_json(self) -> dict[str, Any]:
        return camel_fields(self.__dict__)


# key: (path, mtime ns, size) of each binding file that exists
_BINDINGS_CACHE: dict[tuple[tuple[str, int, int], ...], list[Binding]] = {}


def load_bindings(stack: Stack) -> list[Binding]:
    """links.load_bindings, parsed once per content of the binding files: the strict parse
    (with line numbers) costs ~0.1 s a file and deploy asks once per plane."""
    key = tuple(
        (str(p), st.st_mtime_ns, st.st_size)
        for p in (links.bindings_path(stack, c.name) for c in stack.components)
        if p.is_file() and (st := p.stat())
    )
    if key not in _BINDINGS_CACHE:
        _BINDINGS_CACHE.clear()
        _BINDINGS_CACHE[key] = links.load_bindings(stack)
    return _BINDINGS_CACHE[key]


def _checked_profile(doc: Doc, where: str) -> Doc:
    """The profile document, after the same checks lint runs (exit 3 naming field and fix)."""
    from eksinf.model.profile import (
        check_profile,  # jsonschema: loaded only by the flows reading a profile
    )

    check_profile(doc, where)
    return doc


def _check_profile_source(src: UploadSource) -> None:
    """The profile an install would load into the hub must pass lint's profile checks."""
    for name, data in sorted(src.files.items()):
        for doc in load_input_docs(data, f"{src.ref}/{name}"):
            if isinstance(doc, dict) and doc.get("kind") == PROFILE_KIND:
                _checked_profile(doc, f"{src.ref}/{name}")


def checked_profile_doc(hub: Hub, variant: str) -> Doc:
    space = profile_space(variant)
    if not hub.space_exists(space):
        raise NotFound(
            f"no profile variant {space}",
            "Create it with: "
            + shell_command(
                "eksinf", "hub", "create-variant", variant, base_space(PROFILE_COMPONENT)
            )
            + " (publishing would otherwise be refused by vet-placeholders).",
            CONTRACT,
        )
    for doc in load_docs(hub.unit_data(space, PROFILE_UNIT), f"{space}/{PROFILE_UNIT}"):
        if isinstance(doc, dict) and doc.get("kind") == PROFILE_KIND:
            return _checked_profile(doc, f"hub unit {space}/{PROFILE_UNIT}")
    raise EksinfError(f"{space}/{PROFILE_UNIT} holds no {PROFILE_KIND}", exit_code=CONTRACT)


def link_unit(
    hub: Hub, space: str, unit: str, bindings: list[Binding], profile_doc: Doc, variant: str
) -> LinkResult:
    """Link one unit to the profile variant (one TransformPaths link, built by the link engine)
    and let the hub resolve it."""
    body = engine.link_body(
        bindings, load_docs(hub.unit_data(space, unit)), profile_doc, f"{space}/{unit}"
    )
    current = [
        lk
        for lk in hub.list_links(space)
        if lk.from_unit == unit and lk.to_space == profile_space(variant)
    ]
    changed = not current or current[0].bindings != body
    if changed:
        hub.set_link(space, unit, profile_space(variant), PROFILE_UNIT, body)
    checkpoint("link.linked")
    resolved = hub.resolve(space, unit)
    return LinkResult(
        space,
        unit,
        len(body["DownstreamPaths"]),
        len(body["DownstreamSetters"]),
        changed,
        resolved,
    )


def link_profile(
    hub: Hub,
    stack: Stack,
    variant: str,
    *,
    components: list[str] | None = None,
    say: Say = quiet,
) -> list[LinkResult]:
    """One TransformPaths link per (unit, profile) pair, then resolve each linked unit."""
    profile_doc = checked_profile_doc(hub, variant)
    groups: dict[tuple[str, str], list[Binding]] = {}
    for b in load_bindings(stack):
        if components is None or b.component in components:
            groups.setdefault((b.component, b.unit), []).append(b)
    results = []
    for (component, unit), bindings in sorted(groups.items()):
        space = variant_space(component, variant)
        if not hub.space_exists(space):
            say(f"SKIP {space} (not deployed)")
            continue
        result = link_unit(hub, space, unit, bindings, profile_doc, variant)
        results.append(result)
        say(
            f"{space}/{unit}: {result.paths} path(s), {result.setters} setter(s)"
            + ("" if result.link_changed or result.resolved else " (unchanged)")
        )
    return results


def profile_links(hub: Hub, stack: Stack, variant: str) -> list[Link]:
    """The profile links that exist in the variant's deployed spaces."""
    found: list[Link] = []
    for comp in stack.components:
        space = variant_space(comp.name, variant)
        if comp.plane != "hub" and hub.space_exists(space):
            found += [lk for lk in hub.list_links(space) if lk.to_space == profile_space(variant)]
    return found


def unlink_profile(hub: Hub, stack: Stack, variant: str, *, say: Say = quiet) -> list[str]:
    removed = []
    for comp in stack.components:
        space = variant_space(comp.name, variant)
        if comp.plane == "hub" or not hub.space_exists(space):
            continue
        for lk in hub.list_links(space):
            if lk.to_space == profile_space(variant):
                hub.delete_link(space, lk.slug)
                removed.append(f"{space}/{lk.slug}")
                say(f"unlinked {space}/{lk.slug}")
    return removed


# ---- deploy -----------------------------------------------------------------------------


@dataclass
class DeployReport:
    plane: str
    target: str
    variant: str
    created: list[str] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)
    promoted: list[PromoteReport] = field(default_factory=list)  # base changes carried in
    links: list[LinkResult] = field(default_factory=list)
    published: list[str] = field(default_factory=list)
    current: list[str] = field(default_factory=list)
    kind: str = ""  # the target's kind (model/targets.py): it chose the components
    by_name: list[str] = field(default_factory=list)  # units switched to clusterName
    dry_run: bool = False

    @property
    def changed(self) -> bool:
        return bool(
            self.created
            or self.by_name
            or self.published
            or any(p.changed for p in self.promoted)
            or any(lk.link_changed or lk.resolved for lk in self.links)
        )

    def to_json(self) -> dict[str, Any]:
        out = camel_fields(
            {k: v for k, v in self.__dict__.items() if k not in ("links", "promoted")}
        )
        out["promoted"] = [p.to_json() for p in self.promoted if p.changed]
        out["links"] = [lk.to_json() for lk in self.links]
        return out


def admit(hub: Hub, stack: Stack, space: str, gate: ReleaseGate | None = None) -> None:
    """Refuse (exit 3) to publish a space whose units the API server would not admit
    (validate.release). Units still holding placeholders are left to the hub's own gate, which
    names the missing links. `gate`: shared by the releases one command publishes."""
    if gate is None:
        from eksinf.build.validate.release import ReleaseGate  # the validators load only to publish

        gate = ReleaseGate(stack)
    members = hub.list_units(space)
    if any(u.placeholders for u in members):
        return
    texts = {u.slug: hub.unit_data(space, u.slug) for u in members}
    # every verdict cached (a release that did not change): no YAML parsed, nothing checked
    report = gate.check_texts(space, texts)
    if report is None:
        units = {
            slug: [d for d in load_docs(text) if isinstance(d, dict)]
            for slug, text in texts.items()
        }
        report = gate.check(space, units)
        gate.remember(texts, units)
    if not report.ok:
        bad = [f for f in report.findings if f.status == "invalid"]
        raise EksinfError(
            f"release of {space} refused: {len(bad)} field(s) the API server would not admit; "
            f"first: {bad[0].line()}",
            hint="Fix the units (eksinf validate lists every finding on the stack), then publish again.",
            exit_code=CONTRACT,
        )


def _publish(
    hub: Hub, stack: Stack, gate: ReleaseGate, space: str, report: DeployReport, say: Say
) -> None:
    admit(hub, stack, space, gate)
    try:
        release = hub.publish(space)
    except NoChanges:
        report.current.append(space)
        say(f"{space}: release already current")
        return
    report.published.append(space)
    say(f"{space}: published release {release.release_num} ({release.digest[:19]})")


def deploy(
    hub: Hub,
    stack: Stack,
    *,
    plane: str,
    target: str,
    variant: str = "dev",
    dry_run: bool = False,
    say: Say = quiet,
    gate: ReleaseGate | None = None,
) -> DeployReport:
    """Deploy one plane's components to `target` as `variant` spaces, link and publish them.
    `gate`: the release admission to share with the other planes a command deploys (it reads
    the committed CRDs once); default: one for this plane."""
    if plane == "hub":
        raise EksinfError(
            "the hub plane is never deployed: the platform profile is linked, not applied",
            "Create its variant with: "
            + shell_command(
                "eksinf", "hub", "create-variant", variant, base_space(PROFILE_COMPONENT)
            ),
            USAGE,
        )
    if "/" not in target:
        raise EksinfError("--target must be <space>/<target>", exit_code=USAGE)
    hub.get_target(target)  # NotFound when the target does not exist
    kind = kind_of(hub.get_space(target.split("/", 1)[0]).labels)
    components = stack.select(plane=plane, kind=kind.name)
    report = DeployReport(plane, target, variant, kind=kind.name, dry_run=dry_run)
    missing = [base_space(c.name) for c in components if not hub.space_exists(base_space(c.name))]
    if missing:
        raise NotFound(
            f"missing base space(s): {', '.join(missing)}",
            "Load the bases first: eksinf install",
            CONTRACT,
        )
    for comp in components:
        space = variant_space(comp.name, variant)
        if hub.space_exists(space):
            bound = hub.get_space(space).release_target
            if bound != target:
                raise EksinfError(
                    f"{space} already exists bound to {bound or 'no target'}, not {target}",
                    f"Deploy to {bound} or pick another --variant.",
                    CONTRACT,
                )
            report.existing.append(space)
    # fail before creating anything the gate would then block
    profile = checked_profile_doc(hub, variant)
    if dry_run:
        for comp in components:
            space = variant_space(comp.name, variant)
            if space not in report.existing:
                say(f"would create {space} from {base_space(comp.name)} bound to {target}")
        say("(dry run; nothing changed)")
        return report
    _promote_existing(hub, report, say)
    try:
        _bind_link_publish(
            hub, stack, components, variant, target, kind, profile, report, gate, say
        )
    except BaseException:
        # A failure partway (an unreachable registry, a refused release) must not leave
        # variants bound to the target: they would block `target remove`, and a re-added target
        # could not take them. What this run created goes; what existed before stays.
        roll_back(hub, report.created, target, say)
        raise
    return report


def _promote_existing(hub: Hub, report: DeployReport, say: Say) -> None:
    """Existing variants take the bases' changes first (new and emptied units too): a conflict
    with a variant's own edit stops here, exit 3, before anything of this plane is written."""
    for space in report.existing:
        promoted = hub.variant_promote(space)
        report.promoted.append(promoted)
        if promoted.changed:
            say(
                f"{space}: base changes carried in: "
                + ", ".join(
                    f"{what} {', '.join(names)}"
                    for what, names in (
                        ("updated", promoted.updated),
                        ("added", promoted.added),
                        ("emptied", promoted.emptied),
                    )
                    if names
                )
            )
        checkpoint("deploy.promoted")


def _bind_link_publish(
    hub: Hub,
    stack: Stack,
    components: list[Any],
    variant: str,
    target: str,
    kind: TargetKind,
    profile: Doc,
    report: DeployReport,
    gate: ReleaseGate | None,
    say: Say,
) -> None:
    """Create the missing variants bound to `target`, link and publish. Appends to `report`
    as it goes: `report.created` is what a failure must roll back."""
    for comp in components:
        space = variant_space(comp.name, variant)
        if space in report.existing:
            continue
        try:
            hub.variant_create(variant, base_space(comp.name), target=target)
        except AlreadyExists:  # a concurrent or interrupted run created it: checked above
            report.existing.append(space)
            continue
        report.created.append(space)
        say(f"created {space} bound to {target}")
        checkpoint("deploy.variant-created")
    if kind.cluster_by_name:
        spaces = [variant_space(c.name, variant) for c in components]
        report.by_name = name_the_cluster(hub, spaces, profile["spec"]["clusterName"], kind)
        for item in report.by_name:
            say(f"{item}: names the cluster by clusterName (target kind {kind.name})")
    apps = hub.get_target(target).apps_space
    if apps:
        for comp in components:
            app = variant_space(comp.name, variant)
            if any(u.slug == app for u in hub.list_units(apps)):
                hub.invoke(
                    apps,
                    "set-bool-path",
                    ["argoproj.io/v1alpha1/Application", "spec.syncPolicy.automated.prune", "true"],
                    unit=app,
                )
    report.links = link_profile(
        hub, stack, variant, components=[c.name for c in components], say=say
    )
    checkpoint("deploy.linked")
    if gate is None:
        from eksinf.build.validate.release import ReleaseGate

        gate = ReleaseGate(stack)  # one read of the committed CRDs for every release
    for comp in components:
        _publish(hub, stack, gate, variant_space(comp.name, variant), report, say)
        checkpoint("deploy.published-one")
    if apps:
        _publish(hub, stack, gate, apps, report, say)


def roll_back(hub: Hub, created: list[str], target: str, say: Say) -> list[str]:
    """Delete the variant spaces a failed deploy created, and empty their child Applications
    in the target's apps space (a later publish of it must not point at a missing release).
    Best effort: what cannot be undone is said, and the original error is the one raised."""
    apps = None
    try:
        apps = hub.get_target(target).apps_space
        members = {u.slug for u in hub.list_units(apps)} if apps else set()
    except Exception:  # noqa: BLE001 - the hub itself may be what failed
        members = set()
    undone = []
    for space in reversed(created):
        try:
            if apps and space in members:
                hub.update_unit(apps, space, "", f"deploy of {space} failed: rolled back")
            hub.delete_space(space, recursive=True)
        except Exception as exc:  # noqa: BLE001
            say(f"rollback: could not delete {space} ({exc}); delete it with `eksinf hub delete`")
            continue
        undone.append(space)
        say(f"rollback: deleted {space} (created by this failed deploy)")
    return undone


def name_the_cluster(hub: Hub, spaces: list[str], cluster: str, kind: TargetKind) -> list[str]:
    """For a target whose cluster this stack did not create: every unit of `spaces` that
    references the ACK `Cluster` (`clusterRef`) names the cluster instead (`clusterName`, the
    profile's value). Idempotent: a unit already in that form is left alone. Returns the
    `space/unit`s changed."""
    changed = []
    for space in spaces:
        for unit in hub.list_units(space):
            text = hub.unit_data(space, unit.slug)
            docs = load_docs(text, f"{space}/{unit.slug}")
            named = cluster_by_name(docs, cluster)
            if named != docs:
                hub.update_unit(
                    space,
                    unit.slug,
                    dump_docs(named),
                    f"target kind {kind.name}: the cluster by name ({cluster}), not clusterRef",
                )
                changed.append(f"{space}/{unit.slug}")
    return changed


def ensure_target_space(hub: Hub, space: str, registry: str, labels: dict[str, str]) -> bool:
    """The hub half of enrolling a cluster: space, OCI target (with its apps space and root
    Application) and the placeholder gate. Returns whether the space was new."""
    created = not hub.space_exists(space)
    made = hub.create_space(space, labels, allow_exists=True)
    if any(made.labels.get(k) != v for k, v in labels.items()):
        hub.label_space(space, labels)  # re-enrolled with another kind: the latest one holds
    hub.create_target(space, "target", registry)
    hub.create_trigger(space, GATE_TRIGGER, "vet-placeholders", GATE_DESCRIPTION)
    return created


def publish(hub: Hub, space: str) -> tuple[str, Any]:
    """`release publish` (after `admit`): ("published", Release) or ("current", Release|None)."""
    try:
        return "published", hub.publish(space)
    except NoChanges as exc:
        return "current", exc.release


__all__ = ["GateBlocked", "install", "deploy", "link_profile", "publish"]
