"""The sandbox: the whole configuration on stand-in targets (an OCI layout under .eksinf/),
installed, linked, resolved and published through the same deploy path a real target uses."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from eksinf.core import cache
from eksinf.core.faults import checkpoint
from eksinf.model.stack import Stack
from eksinf.publish import bundle

from ..errors import CONTRACT, EksinfError, shell_command
from ..hub.protocol import Hub, UploadSource
from ..model.digest import oci_digest
from ..model.names import (
    OWNER,
    OWNER_LABEL,
    PROFILE_COMPONENT,
    STATE_DIR,
    apps_space,
    base_space,
    check_space_name,
    owner_labels,
    profile_space,
    sandbox_spaces,
    variant_space,
)
from ..model.targets import DEFAULT_KIND, kind_labels, kind_of, target_kind
from .context import StackContext
from .deploy import (
    DeployReport,
    InstallReport,
    Say,
    checked_profile_doc,
    deploy,
    ensure_target_space,
    install,
    quiet,
    unpacked_files,
)


def sandbox_registry(stack: Stack) -> str:
    return f"oci-layout:{stack.root / STATE_DIR / 'oci'}"


UNPACKED = "a bundle unpacks to exactly the files it was made of"  # a cache.passed check


def bundled_sources(stack: Stack) -> dict[str, UploadSource]:
    """Each component's committed units, bundled exactly as `eksinf bundle` would, then read
    back through the same safe unpack an installed bundle goes through. A bundle whose exact
    bytes (named by their digest) were made from exactly these files and unpacked back to them
    before (recorded in the derived-data cache's `checks`, HMAC-checked) is neither built nor
    unpacked again: the unpack is a pure function of the bytes."""
    sources = {}
    for comp in stack.components:
        files = bundle.component_files(stack, comp.name)
        if not files:
            continue
        digest = bundle.bundle_digest(files)
        names = [part for name in sorted(files) for part in (name.encode(), files[name])]
        if cache.passed(UNPACKED, digest.encode(), *names):  # in the unpack's order (sorted paths)
            unpacked = {
                p.as_posix(): files[p.as_posix()] for p in sorted(map(PurePosixPath, files))
            }
        else:
            blob = bundle.bundle_bytes(files)
            digest = oci_digest(blob)
            unpacked = unpacked_files(blob)
            if unpacked == files:
                cache.record_pass(UNPACKED, digest.encode(), *names)
        sources[comp.name] = UploadSource(
            f"bundle {comp.name}{bundle.BUNDLE_SUFFIX}", unpacked, digest
        )
    return sources


@dataclass
class SandboxReport:
    install: InstallReport
    spaces_created: list[str]
    planes: list[DeployReport]

    @property
    def changed(self) -> bool:
        return (
            self.install.changed or bool(self.spaces_created) or any(p.changed for p in self.planes)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "changed": self.changed,
            "install": self.install.to_json(),
            "spacesCreated": self.spaces_created,
            "planes": [p.to_json() for p in self.planes],
        }


def render_configs(stack: Stack, mirror: Path | None, say: Say) -> None:
    """Render configs/ (a fresh clone has none until `eksinf render`), guarded as render is."""
    from eksinf.build import charts, guard
    from eksinf.build.render import render_stack
    from eksinf.build.write import write_configs

    say(f"{stack.configs_dir} is missing: rendering it")
    result = render_stack(stack, charts.mirror_dir(mirror, stack.root), progress=say)
    report = guard.check(result)
    if not report.ok:
        raise EksinfError(
            "the render has hazards the guard refuses; configs/ was not written",
            "Run `eksinf render` to see them.",
            CONTRACT,
        )
    write_configs(result)


def sandbox_planned_spaces(stack: Stack, name: str, variant: str) -> list[str]:
    """Every space `sandbox up` may create: both targets and their Argo CD apps spaces, the
    profile variant and each deployed component's variant."""
    targets = sandbox_spaces(name)
    variants = [variant_space(c.name, variant) for c in stack.components if c.plane != "hub"]
    return [*targets, *(apps_space(t) for t in targets), profile_space(variant), *variants]


def sandbox_up(
    hub: Hub,
    stack: Stack,
    *,
    name: str = "sandbox",
    variant: str = "sandbox",
    mirror: Path | None = None,
    kind: str = DEFAULT_KIND,
    say: Say = quiet,
) -> SandboxReport:
    """`kind`: the target kind both stand-in targets record (model/targets.py), which picks each
    plane's components, as on a real target of that kind."""
    from eksinf.model.profile import load_profile

    chosen = target_kind(kind)
    for space in sandbox_planned_spaces(stack, name, variant):  # every name, before any change
        check_space_name(
            space,
            hint=f"--name {name!r} / --variant {variant!r} would make space {space!r}; pick "
            "shorter plain names, e.g. dev or team-a.",
        )
    for space in sandbox_spaces(name):  # refuse before anything changes
        if hub.space_exists(space) and kind_of(hub.get_space(space).labels) != chosen:
            raise EksinfError(
                f"sandbox {name} exists as kind {kind_of(hub.get_space(space).labels).name}, "
                f"not {chosen.name}",
                "Take it down first ("
                + shell_command("eksinf", "sandbox", "down", "--name", name, "--yes")
                + "), or use another --name for this kind.",
                CONTRACT,
            )
    load_profile(stack)  # lint's profile checks, before anything is rendered or installed
    if hub.space_exists(profile_space(variant)):
        checked_profile_doc(hub, variant)
    if not stack.configs_dir.is_dir():
        render_configs(stack, mirror, say)
    sources = bundled_sources(stack)
    # The bases mirror configs/ exactly: a unit whose file is gone is emptied (prune), so the
    # deletion reaches the variants like any other change.
    installed = install(hub, stack, sources=sources, prune=True, say=say)
    checkpoint("sandbox.installed")
    created = []
    registry = sandbox_registry(stack)
    # The target spaces first: a bad --name is refused before the profile variant (named after
    # the sandbox by default) exists.
    for space in sandbox_spaces(name):
        if ensure_target_space(
            hub, space, registry, owner_labels(Mode="sandbox", **kind_labels(chosen))
        ):
            created.append(space)
    if not hub.space_exists(profile_space(variant)):
        hub.variant_create(variant, base_space(PROFILE_COMPONENT))
        created.append(profile_space(variant))
    checkpoint("sandbox.targets")
    from eksinf.build.validate.release import ReleaseGate

    gate = ReleaseGate(stack)  # both planes' releases share one read of the committed CRDs
    planes = []
    for plane, space in zip(("mgmt", "workload"), sandbox_spaces(name), strict=True):
        target = f"{space}/target"
        planes.append(
            deploy(hub, stack, plane=plane, target=target, variant=variant, say=say, gate=gate)
        )
    return SandboxReport(installed, created, planes)


@dataclass(frozen=True)
class DownPlan:
    """What `sandbox down` deletes, in order, and what would stop it: `--yes` deletes all of
    `delete` or, while `blocked` names anything, nothing."""

    delete: list[str]
    blocked: list[str]  # outside the plan, pointing into it: "<what> -> <space>"

    def to_json(self) -> dict[str, Any]:
        return {"wouldDelete": self.delete, "blockedBy": self.blocked}


def _on_targets(hub: Hub, target_spaces: set[str], skip: set[str]) -> list[str]:
    """Spaces (outside `skip`) deployed on the given target spaces: their release target, or a
    unit bound to one of their targets, is there."""

    def there(ref: str | None) -> bool:
        return ref is not None and ref.split("/", 1)[0] in target_spaces

    found = {s.slug for s in hub.list_spaces() if there(s.release_target)}
    found |= {u.space for u in hub.list_units() if there(u.target)}
    return sorted(found - skip - target_spaces)


def sandbox_down_plan(
    hub: Hub,
    stack: Stack,
    *,
    name: str = "sandbox",
    variant: str = "sandbox",
    keep_bases: bool = False,
) -> DownPlan:
    """Spaces to delete, in an order the hub accepts: every space deployed on the sandbox's
    targets (its component variants, and those of any other variant deployed there, if eksinf
    made them), apps spaces, the profile variant, target spaces, then the bases `sandbox up`
    installed, except a base that a variant outside this sandbox (say `dev`) still builds on,
    or all of them with keep_bases. A space deployed there that eksinf did not make, and
    whatever else outside the plan points into it, is named in `blocked`."""
    mgmt, workload = sandbox_spaces(name)
    order = [variant_space(c.name, variant) for c in reversed(stack.components) if c.plane != "hub"]
    order += [apps_space(mgmt), apps_space(workload), profile_space(variant), mgmt, workload]
    own = [s for s in order if hub.space_exists(s)]
    targets = {s for s in (mgmt, workload) if s in own}
    blocked = []
    deployed_there = []
    for space in _on_targets(hub, targets, set(own)):
        if hub.get_space(space).labels.get(OWNER_LABEL) == OWNER:
            deployed_there.append(space)
        else:
            blocked.append(f"{space} (deployed on the sandbox's targets; eksinf did not make it)")
    plan = [*deployed_there, *own]
    blocked += [
        f"{who} -> {space}"
        for space in plan
        for who in _referrers(hub, space)
        if who.split("/", 1)[0].split(" ", 1)[0] not in plan
    ]
    if not keep_bases:
        for comp in reversed(stack.components):
            base = base_space(comp.name)
            in_use = [v for v in hub.variants_of(comp.name) if v not in plan]
            if hub.space_exists(base) and not in_use:
                plan.append(base)
    return DownPlan(plan, sorted(set(blocked)))


def _referrers(hub: Hub, space: str) -> list[str]:
    """What points into `space` (links, release targets, bindings) as the hub names it
    ("<space>/<unit> (why)" or "<space> (why)"); a hub that cannot say names nothing, and its
    own refusal of a delete then stops the run."""
    referrers = getattr(hub, "referrers", None)
    return list(referrers(space)) if referrers is not None else []


def sandbox_down(hub: Hub, plan: DownPlan, *, say: Say = quiet) -> list[str]:
    """Delete the plan's spaces, or nothing at all while anything blocks it."""
    if plan.blocked:
        raise EksinfError(
            f"sandbox down: {len(plan.blocked)} thing(s) outside the sandbox point into it; "
            "nothing was deleted: " + "; ".join(plan.blocked),
            "Delete or re-target them first (`eksinf hub spaces`), then run sandbox down again.",
            CONTRACT,
        )
    deleted = []
    for space in plan.delete:
        hub.delete_space(space, recursive=True)
        deleted.append(space)
        say(f"deleted {space}")
    return deleted


# ---- the sandbox commands' flows ----------------------------------------------------------


def up(ctx: StackContext, name: str, variant: str, mirror: Path | None, kind: str) -> SandboxReport:
    """`sandbox up` on the stack's hub."""
    with ctx.open_hub() as hub:
        return sandbox_up(
            hub, ctx.stack, name=name, variant=variant, mirror=mirror, kind=kind, say=ctx.say
        )


def down_plan(ctx: StackContext, name: str, variant: str, keep_bases: bool) -> DownPlan:
    """What `sandbox down` would delete, and what blocks it."""
    with ctx.open_hub() as hub:
        return sandbox_down_plan(hub, ctx.stack, name=name, variant=variant, keep_bases=keep_bases)


def down(ctx: StackContext, plan: DownPlan) -> list[str]:
    """Delete what the plan names, in an order the hub accepts."""
    with ctx.open_hub() as hub:
        return sandbox_down(hub, plan, say=ctx.say)
