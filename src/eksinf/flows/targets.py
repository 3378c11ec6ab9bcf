"""Targets from a kubeconfig: a hub target space for a cluster eksinf did not create, and the
management cluster `mgmt up` creates with kind.

A target is the hub half enroll makes (space `<name>`, OCI target `<name>/target`, its apps space
and placeholder gate), labelled with its plane, plus the cluster's kubeconfig kept at
`.eksinf/clusters/<name>.kubeconfig`: one context only, certificate and key files inlined (a token
file and an exec plugin stay references, made absolute), mode 0600, so it means the same from
any working directory and names no other cluster.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import CONTRACT, ENVIRONMENT, USAGE, EksinfError
from ..model.names import apps_space, kubeconfig_path, owner_labels
from ..model.targets import (
    DEFAULT_KIND,
    KINDS,
    TARGET_PLANES,
    TargetKind,
    kind_labels,
    kind_of,
    target_kind,
)
from .context import StackContext

PLANE_LABEL = "Plane"
MODE_LABEL = "Mode"
TARGET_MODE = "target"


def check_plane(plane: str) -> None:
    if plane not in TARGET_PLANES:
        raise EksinfError(
            f"unknown plane {plane!r}",
            hint="Use --plane mgmt or --plane workload.",
            exit_code=USAGE,
        )


def load_kubeconfig(kubeconfig: Path | None, context: str | None) -> dict[str, Any]:
    """The kubeconfig reduced to one context (default: the current one), its cluster and user,
    certificates inlined (kube.kubeconfig.one_context). With no `kubeconfig`: the files
    KUBECONFIG lists, merged as kubectl merges them, else ~/.kube/config. A missing file, a
    context that is not there, or one naming an absent cluster or user is a usage error."""
    from ..kube import kubeconfig as kc

    if kubeconfig is not None and not kubeconfig.is_file():
        raise EksinfError(f"no kubeconfig at {kubeconfig}", exit_code=USAGE)
    merged, label = kc.load(kubeconfig)
    return kc.one_context(merged, context, label)


@dataclass(frozen=True)
class TargetInfo:
    name: str
    plane: str
    target: str
    kubeconfig: str | None
    apps_space: str
    kind: str = DEFAULT_KIND
    argocd: dict[str, Any] | None = None  # what add did about Argo CD (None: not asked)
    applied: tuple[str, ...] = ()  # the cluster half applied by add

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "plane": self.plane,
            "target": self.target,
            "kubeconfig": self.kubeconfig,
            "appsSpace": self.apps_space,
            "kind": self.kind,
            "argocd": self.argocd,
            "applied": list(self.applied),
        }


def add(hub: Any, ctx: StackContext, opts: AddOptions, kind: TargetKind) -> TargetInfo:
    """Wire the cluster as enroll does (Argo CD installed when absent and allowed, the root
    Application applied), then keep its kubeconfig, then create the hub half. Idempotent; the
    cluster first, so a refused apply leaves nothing in the hub."""
    from ..aws import argocd
    from ..aws.enroll import apply_wiring, wiring_docs
    from ..kube.client import KubeClient, parse_kubeconfig, write_kubeconfig
    from .deploy import ensure_target_space

    name, plane, kubeconfig = opts.name, opts.plane, opts.kubeconfig
    stack_root, say = ctx.stack.root, ctx.say
    registry = registry_of(ctx.stack, opts.oci_registry)
    check_plane(plane)
    reduced = load_kubeconfig(kubeconfig, opts.context)
    kube = KubeClient.from_auth(
        parse_kubeconfig(reduced, Path.cwd(), str(kubeconfig or "KUBECONFIG"))
    )
    if hub.space_exists(name):
        labels = hub.get_space(name).labels
        if labels.get(MODE_LABEL) != TARGET_MODE or labels.get(PLANE_LABEL) != plane:
            raise EksinfError(
                f"space {name} already exists and is not a {plane} target "
                f"(labels {labels.get(MODE_LABEL)}/{labels.get(PLANE_LABEL)})",
                hint="Pick another NAME, or remove that target first.",
                exit_code=CONTRACT,
            )
    kube.version()  # reachable, or exit 4 before anything is written
    argocd_namespace = opts.argocd_namespace
    if opts.install_argocd:
        outcome = argocd.ensure(
            kube, stack_root / "configs", argocd_namespace, timeout=opts.argocd_timeout, say=say
        )
    else:
        image = argocd.server_image(kube, argocd_namespace)
        if image is None:
            raise EksinfError(
                f"no Argo CD in {argocd_namespace} on {kube.server} and --no-argocd given",
                hint="Install Argo CD 3.1+ there, or drop --no-argocd to install the pinned one.",
                exit_code=CONTRACT,
            )
        outcome = argocd.ArgoOutcome("present", image, "left alone (--no-argocd)")
    docs, _skipped = wiring_docs(name, registry, argocd_namespace, oci_credentials())
    applied = apply_wiring(kube, docs)
    labels = {MODE_LABEL: TARGET_MODE, PLANE_LABEL: plane, **kind_labels(kind)}
    new_space = not hub.space_exists(name)
    try:
        ensure_target_space(hub, name, registry, owner_labels(**labels))
        write_kubeconfig(kubeconfig_path(stack_root, name), reduced)
    except BaseException:
        # The hub half is whole or absent: a new target space left without its target, gate or
        # kubeconfig would refuse the next `target add` (it exists) and mean nothing.
        if new_space:
            for space in (apps_space(name), name):
                if hub.space_exists(space):
                    hub.delete_space(space, recursive=True)
        raise
    return replace(info(hub, stack_root, name), argocd=outcome.as_json(), applied=tuple(applied))


def info(hub: Any, stack_root: Path, name: str) -> TargetInfo:
    space = hub.get_space(name)
    path = kubeconfig_path(stack_root, name)
    return TargetInfo(
        name=name,
        plane=space.labels.get(PLANE_LABEL, ""),
        target=f"{name}/target",
        kubeconfig=str(path) if path.is_file() else None,
        apps_space=apps_space(name),
        kind=kind_of(space.labels).name,
    )


def list_targets(hub: Any, stack_root: Path) -> list[TargetInfo]:
    spaces = hub.list_spaces(f"Labels.{MODE_LABEL} = '{TARGET_MODE}'")
    return [info(hub, stack_root, s.slug) for s in sorted(spaces, key=lambda s: s.slug)]


def remove(hub: Any, stack_root: Path, name: str) -> list[str]:
    """Delete the apps space, then the target space (refused while variants are bound to it),
    then the kept kubeconfig. Returns what was removed."""
    target = info(hub, stack_root, name)
    if not target.plane:
        raise EksinfError(f"{name} is not a target made by `target add`", exit_code=USAGE)
    gone = []
    for space in (apps_space(name), name):
        if hub.space_exists(space):
            hub.delete_space(space, recursive=True)
            gone.append(f"space {space}")
    path = kubeconfig_path(stack_root, name)
    if path.is_file():
        path.unlink()
        gone.append(str(path))
    return gone


# ---- mgmt up ------------------------------------------------------------------------------------

CONTAINER_RUNTIMES = ("docker", "podman", "nerdctl")


def missing_tools(which: Any = shutil.which) -> list[str]:
    """What `mgmt up` needs on PATH and does not find: kind, and one container runtime."""
    missing = [] if which("kind") else ["kind"]
    if not any(which(r) for r in CONTAINER_RUNTIMES):
        missing.append(f"a container runtime ({' or '.join(CONTAINER_RUNTIMES)})")
    return missing


# ---- apply straight to the cluster (deploy --apply) ------------------------------------------


def target_kubeconfig(stack_root: Path, target: str) -> Path:
    """The kept kubeconfig of `target` (`<space>/<target>`); usage error when there is none."""
    space = target.split("/", 1)[0]
    path = kubeconfig_path(stack_root, space)
    if not path.is_file():
        raise EksinfError(
            f"target {target} has no kept kubeconfig ({path}): nothing to apply to",
            hint="Add the cluster with `eksinf target add NAME --plane P --kubeconfig FILE`, "
            "or drop --apply and let Argo CD pull the release.",
            exit_code=USAGE,
        )
    return path


def apply_plane(
    hub: Any,
    stack_root: Path,
    target: str,
    spaces: list[str],
    *,
    force: bool = False,
    say: Any = lambda _m: None,
) -> dict[str, Any]:
    """Apply the units of `spaces` (the plane's variants, as the hub resolved them) to the
    target's cluster with server-side apply, CRDs first (kube.apply). Returns what changed."""
    from eksinf.core.yamlio import load_docs

    from ..kube.apply import apply_all
    from ..kube.client import KubeClient

    kube = KubeClient.from_kubeconfig(target_kubeconfig(stack_root, target))
    docs = [
        doc
        for space in spaces
        for unit in hub.list_units(space)
        for doc in load_docs(hub.unit_data(space, unit.slug), f"{space}/{unit.slug}")
        if isinstance(doc, dict)
    ]
    say(f"apply: {len(docs)} objects of {len(spaces)} space(s) to {kube.server}")
    applied = apply_all(kube, docs, force=force, say=say)
    counts = {a: sum(1 for x in applied if x.action == a) for a in APPLY_ACTIONS}
    return {
        "server": kube.server,
        **counts,
        "changed": [x.as_json() for x in applied if x.action != "unchanged"],
    }


APPLY_ACTIONS = ("created", "configured", "unchanged")


# ---- sync on publish ------------------------------------------------------------------------


def sync_after_publish(
    hub: Any,
    stack_root: Path,
    target: str,
    published: list[str],
    argocd_namespace: str,
    timeout: float,
    poll: float = 1.0,
    say: Any = lambda _m: None,
) -> dict[str, Any]:
    """Ask the target's Argo CD to refresh the Applications of what was just published (each is
    named after its space) and wait, bounded, until each shows its new release as Synced."""
    from ..aws.argocd import request_refresh, wait_synced
    from ..kube.client import KubeClient

    space = target.split("/", 1)[0]
    path = kubeconfig_path(stack_root, space)
    if not published:
        return {"status": "skipped", "reason": "nothing published"}
    if not path.is_file():
        return {
            "status": "skipped",
            "reason": f"no kubeconfig for target {space} ({path}): Argo CD polls on its own",
        }
    kube = KubeClient.from_kubeconfig(path)
    refreshed = request_refresh(kube, argocd_namespace, sorted(published))
    say(f"sync: refresh requested for {len(refreshed)} Application(s) in {argocd_namespace}")
    wanted = {name: hub.list_releases(name)[-1].manifest_digest for name in refreshed}
    absent = sorted(set(published) - set(refreshed))
    for name in absent:
        say(f"sync: no Application {name} in {argocd_namespace} yet: nothing to wait for")
    took = wait_synced(kube, argocd_namespace, wanted, timeout, poll, say)
    late = sorted(n for n, t in took.items() if t is None)
    # "absent" is not a timeout: no Application exists to sync (Argo CD's root Application
    # creates it at its next poll, and it then pulls the release), so nothing was waited for
    status = "timeout" if late else "synced" if refreshed else "absent"
    return {
        "status": status,
        "refreshed": refreshed,
        "absent": absent,
        "seconds": {n: t for n, t in sorted(took.items()) if t is not None},
        "notSynced": late,
        "timeout": timeout,
    }


# ---- the commands' flows ------------------------------------------------------------------


def registry_of(stack: Any, oci_registry: str | None) -> str:
    """The registry Argo CD pulls releases from: --oci-registry, $EKSINF_REGISTRY, REGISTRY."""
    import os

    return oci_registry or os.environ.get("EKSINF_REGISTRY") or stack.versions.get("REGISTRY", "")


def oci_credentials() -> tuple[str, str] | None:
    """The registry login Argo CD gets ($EKSINF_OCI_USERNAME, $EKSINF_OCI_PASSWORD), if set."""
    import os

    user, password = os.environ.get("EKSINF_OCI_USERNAME"), os.environ.get("EKSINF_OCI_PASSWORD")
    return (user, password) if user and password else None


@dataclass(frozen=True)
class AddOptions:
    name: str
    plane: str
    kubeconfig: Path | None
    context: str | None = None
    kind: str = DEFAULT_KIND
    oci_registry: str | None = None
    argocd_namespace: str = "argocd"
    install_argocd: bool = True
    argocd_timeout: float = 300


def add_target(ctx: StackContext, opts: AddOptions) -> TargetInfo:
    """`target add`: usage errors and an unreadable kubeconfig before the hub is opened."""
    check_plane(opts.plane)
    chosen = target_kind(opts.kind)
    load_kubeconfig(opts.kubeconfig, opts.context)
    return _add(ctx, opts, chosen)


def _add(ctx: StackContext, opts: AddOptions, kind: TargetKind) -> TargetInfo:
    with ctx.open_hub() as hub:
        return add(hub, ctx, opts, kind)


def targets_of(ctx: StackContext) -> list[TargetInfo]:
    with ctx.open_hub() as hub:
        return list_targets(hub, ctx.stack.root)


def target_info(ctx: StackContext, name: str) -> TargetInfo:
    with ctx.open_hub() as hub:
        return info(hub, ctx.stack.root, name)


def remove_target(ctx: StackContext, name: str) -> list[str]:
    with ctx.open_hub() as hub:
        return remove(hub, ctx.stack.root, name)


@dataclass(frozen=True)
class MgmtUp:
    cluster: str  # the kind cluster, eksinf-<name>
    created: bool
    target: TargetInfo

    def as_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "created": self.created, **self.target.as_json()}


def require_tools() -> None:
    """`mgmt up` needs kind and a container runtime on PATH (exit 4 naming what is missing)."""
    missing = missing_tools()
    if missing:
        raise EksinfError(
            f"mgmt up needs {' and '.join(missing)} on PATH",
            hint="Install kind (https://kind.sigs.k8s.io) and a container runtime, or bring a "
            "cluster of your own: eksinf target add NAME --plane mgmt --kubeconfig FILE.",
            exit_code=ENVIRONMENT,
        )


def mgmt_up(ctx: StackContext, opts: AddOptions) -> MgmtUp:
    """Create the kind cluster eksinf-<name> when absent, then add it as the mgmt target."""
    import tempfile

    cluster = f"eksinf-{opts.name}"
    existing = _kind(["get", "clusters"]).split()
    with tempfile.TemporaryDirectory(prefix="eksinf-kind-") as tmp:
        config = Path(tmp) / "kubeconfig"
        if cluster in existing:
            ctx.say(f"kind cluster {cluster} exists")
            config.write_text(_kind(["get", "kubeconfig", "--name", cluster]))
        else:
            ctx.say(f"creating kind cluster {cluster} (this takes a minute)")
            _kind(["create", "cluster", "--name", cluster, "--kubeconfig", str(config)])
        added = _add(ctx, replace(opts, plane="mgmt", kubeconfig=config), KINDS[DEFAULT_KIND])
    return MgmtUp(cluster, cluster not in existing, added)


def _kind(args: list[str]) -> str:
    import subprocess

    try:
        done = subprocess.run(
            ["kind", *args], capture_output=True, text=True, timeout=600, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EksinfError(f"kind {' '.join(args)}: {exc}", exit_code=ENVIRONMENT) from exc
    if done.returncode != 0:
        raise EksinfError(
            f"kind {' '.join(args)} failed: {(done.stderr or done.stdout).strip()[:300]}",
            hint="Check the container runtime is running (`docker info`).",
            exit_code=ENVIRONMENT,
        )
    return done.stdout
