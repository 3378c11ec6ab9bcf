"""Tear a stack down so that nothing billing is left, and prove it against EC2.

Order: workload (drain Karpenter through config: zero its NodePool limits, scale the other
workloads to 0, then wait until EC2 shows no instance of the stack),
then mgmt (preflights that protect data, stop Argo CD from recreating things, authorise and
delete the ACK objects in reverse sync-wave order, release Karpenter's instance profiles, sweep
the orphans that block a VPC delete inside the stack's VPC only, verify, restore Argo CD).

`plan_*` functions are pure: they describe what would happen from the configs and the scope.
Everything that touches AWS or a cluster takes the session or the client explicitly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from eksinf.model.stack import Stack

from ..errors import CONTRACT, ENVIRONMENT, FAILURE, EksinfError
from ..kube.client import KubeClient, ResourceRef, resource_path
from ..model.configs import of_kind, read_units, resources
from ..model.names import profile_space, variant_space
from . import creds as creds_mod
from .ack import AckObject, ack_accounts, ack_objects
from .leftovers import (
    EKS_CLUSTER_NAME_TAG,
    EKS_NAME_TAGS,
    Leftovers,
    eks_control_plane_description,
    leftovers,
    sweep_orphans,
)
from .scope import StackScope
from .session import AwsSession, tags_of
from .status import stack_instances
from .teardown_iam import (
    ControllersVerdict,
    check_controllers,
    check_permissions,
    delete_actions,
    karpenter_profile_path,
    release_instance_profiles,
    teardown_actions,
)

DELETION_POLICY = "services.k8s.aws/deletion-policy"
ARGO_CONTROLLER = ("apps/v1", "StatefulSet", "argocd-application-controller")
# A zero cpu limit stops Karpenter launching any node from the pool; the controller keeps
# running, so the nodes the scaled-down workloads leave empty are consolidated away.
ZERO_LIMITS = ("set-string-path", ["karpenter.sh/v1/NodePool", "spec.limits.cpu", "0"])
Say = Callable[[str], None]


def _quiet(_msg: str) -> None:
    pass


# ---- steps ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    plane: str
    steps: list[dict[str, str]] = field(default_factory=list)
    final: Leftovers | None = None

    def record(self, step: str, status: str, detail: str, say: Say) -> None:
        self.steps.append({"step": step, "status": status, "detail": detail})
        say(f"[{self.plane}] {step}: {status}: {detail}")

    def as_json(self) -> dict[str, Any]:
        return {
            "plane": self.plane,
            "steps": self.steps,
            "final": self.final.as_json() if self.final else None,
        }


def preflight(
    session: AwsSession,
    scope: StackScope,
    kube: KubeClient | None,
    namespace: str,
    objects: list[AckObject] | None = None,
) -> list[str]:
    """Data-protecting checks, run before anything is deleted. Raises on any failure."""
    notes = [f"caller {session.caller.arn} (account {session.caller.account})"]
    if kube is not None:
        kube.version()
        info = creds_mod.read_secret(kube, namespace)
        if not info.present:
            raise EksinfError(
                f"the ACK controllers have no credentials (Secret {namespace}/"
                f"{creds_mod.SECRET_NAME} missing): deleting now would strand every AWS resource",
                hint="Run `eksinf creds use-existing` (or create-user) first.",
                exit_code=ENVIRONMENT,
            )
        if info.expired:
            raise EksinfError(
                f"the ACK controllers' credentials expired at {info.expires_at}",
                hint="Run `aws sso login && eksinf creds refresh`, then re-run teardown.",
                exit_code=ENVIRONMENT,
            )
        notes.append(f"controllers' key {info.access_key_id} present, not expired")
        accounts = ack_accounts(kube, objects or [])
        other = {a: labels for a, labels in accounts.items() if a != session.caller.account}
        if other:
            account, labels = sorted(other.items())[0]
            raise EksinfError(
                f"account mismatch: ACK built {', '.join(labels[:3])} in account {account}, "
                f"but these credentials are account {session.caller.account}",
                hint="Use the identity of the stack's account (--aws-profile or AWS_PROFILE); "
                "a teardown from another account deletes nothing there and would report clean.",
                exit_code=CONTRACT,
            )
        if accounts:
            notes.append(f"ACK objects built in account {session.caller.account}, as the caller")
        if objects:  # what the controllers will be asked to delete (the mgmt plane's)
            verdict = check_controllers(session, kube, namespace, objects)
            if not verdict.allowed:
                raise verdict.error()
            notes.append(verdict.line)
    return notes


def wait_for_no_instances(
    session: AwsSession,
    scope: StackScope,
    timeout: float,
    poll: float,
    say: Say,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    deadline = clock() + timeout
    while True:
        left = [i["InstanceId"] for i in stack_instances(session, scope)]
        if not left:
            return
        if clock() >= deadline:
            raise EksinfError(
                f"{len(left)} instance(s) of stack {scope.stack} still running after "
                f"{int(timeout)} s: {', '.join(left)}",
                hint="Deleting the cluster now would orphan them: check the NodePools and "
                "workloads are scaled to 0 through config, then re-run.",
                exit_code=FAILURE,
            )
        say(f"waiting for {len(left)} instance(s) of the stack to terminate: {', '.join(left)}")
        sleep(poll)


@dataclass
class ArgoHalt:
    """Scale Argo CD's application controller to 0 and remember how to put it back."""

    kube: KubeClient
    namespace: str
    replicas: int | None = None

    @property
    def path(self) -> ResourceRef:
        api, kind, name = ARGO_CONTROLLER
        return resource_path(api, kind, self.namespace, name)

    def stop(self) -> bool:
        current = self.kube.get(self.path)
        if current is None:
            return False
        self.replicas = int(current.get("spec", {}).get("replicas", 1))
        self.kube.patch(self.path, {"spec": {"replicas": 0}})
        return True

    def wait_stopped(
        self,
        timeout: float,
        poll: float,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Scaling to 0 is a request: wait until no controller pod remains (bounded)."""
        pods = resource_path("v1", "Pod", self.namespace)
        selector = f"app.kubernetes.io/name={ARGO_CONTROLLER[2]}"
        deadline = clock() + timeout
        while self.kube.items(pods, selector):
            if clock() >= deadline:
                raise EksinfError(
                    f"Argo CD's application controller still has pods after {int(timeout)} s",
                    hint="Nothing was deleted. Check the StatefulSet, then re-run.",
                    exit_code=FAILURE,
                )
            sleep(poll)

    def restore(self) -> None:
        if self.replicas is not None:
            self.kube.patch(self.path, {"spec": {"replicas": self.replicas}})


def delete_ack_objects(
    kube: KubeClient,
    objects: list[AckObject],
    session: AwsSession,
    scope: StackScope,
    timeout: float,
    poll: float,
    say: Say,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> list[str]:
    """Authorise (deletion-policy annotation), delete in order, and wait for the controllers
    to finish; when the count stalls, sweep the orphans that block the VPC."""
    for obj in objects:
        kube.patch(obj.path, {"metadata": {"annotations": {DELETION_POLICY: "delete"}}})
    for obj in objects:
        kube.delete(obj.path)
    deadline = clock() + timeout
    previous, stalled = -1, 0
    swept: list[str] = []
    while True:
        remaining = [o.label for o in objects if kube.get(o.path) is not None]
        if not remaining:
            return swept
        if clock() >= deadline:
            raise EksinfError(
                f"{len(remaining)} ACK object(s) still present after {int(timeout)} s: "
                + ", ".join(remaining),
                hint="Inspect their status conditions (ACK.Terminal, ACK.Recoverable).",
                exit_code=FAILURE,
            )
        stalled = stalled + 1 if len(remaining) == previous else 0
        previous = len(remaining)
        if stalled and stalled % 6 == 0:
            # Karpenter's profiles hold the node role: its Role object cannot finish before.
            swept += [f"instance profile {p}" for p in release_instance_profiles(session, scope)]
            done, failed = sweep_orphans(session, scope)
            swept += done
            for item in failed:
                say(f"sweep: could not delete {item} (retried at the next sweep)")
        say(f"waiting for {len(remaining)} ACK object(s) to be deleted")
        sleep(poll)


# ---- through config (the hub), when the stack's variant spaces exist ---------------------------


def owns_nodepools(configs: Path, component: str) -> bool:
    """The component that runs Karpenter must keep running while it drains its nodes."""
    return bool(of_kind(resources(read_units(configs, [component])), "NodePool"))


class ConfigPlane(Protocol):
    """What teardown asks of the config hub. flows/teardown.py supplies it from the Hub, so this
    module never imports the hub; None when the stack has no hub."""

    def through(
        self, spaces: list[str], function: str, args: list[str]
    ) -> tuple[list[str], list[str]]:
        """Run a hub function on each existing space and publish. Returns (changed, absent)."""
        ...

    def delete_spaces(self, spaces: list[str]) -> list[str]:
        """Delete the spaces that exist (recursively); return those deleted."""
        ...

    def existing(self, spaces: list[str]) -> list[str]:
        """The spaces of `spaces` that exist."""
        ...


# ---- the whole run -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TeardownPlan:
    planes: tuple[str, ...]
    variant: str
    components: dict[str, tuple[str, ...]]  # plane -> component names
    objects: tuple[AckObject, ...]  # the mgmt plane's ACK objects, in deletion order
    spaces: dict[str, tuple[str, ...]]  # plane -> variant spaces the config steps act on
    nodepool_spaces: tuple[str, ...]  # the workload spaces holding Karpenter's NodePools
    kube_path: Path
    argocd_namespace: str
    ack_namespace: str
    # every deployable component: once none has a space of this variant left, the profile
    # variant sandbox up / hub create-variant made for it goes too (--delete-config)
    deployable: tuple[str, ...] = ()


@dataclass(frozen=True)
class Timing:
    wait_timeout: float  # instances; ACK objects get 2.3x (the control plane takes longest)
    poll: float


def make_plan(
    stack: Stack,
    planes: list[str],
    variant: str,
    kube_path: Path,
    argocd_namespace: str,
    ack_namespace: str,
) -> TeardownPlan:
    configs = stack.configs_dir
    components = {p: tuple(c.name for c in stack.select(plane=p)) for p in planes}
    mgmt = list(components.get("mgmt", ()))
    return TeardownPlan(
        planes=tuple(planes),
        variant=variant,
        components=components,
        objects=tuple(ack_objects(configs, mgmt)),
        spaces={
            # Karpenter's own space keeps running: it is what removes the nodes.
            "workload": tuple(
                variant_space(c, variant)
                for c in components.get("workload", ())
                if not owns_nodepools(configs, c)
            ),
            "mgmt": tuple(variant_space(c, variant) for c in mgmt if ack_objects(configs, [c])),
        },
        nodepool_spaces=tuple(
            variant_space(c, variant)
            for c in components.get("workload", ())
            if owns_nodepools(configs, c)
        ),
        kube_path=kube_path,
        argocd_namespace=argocd_namespace,
        ack_namespace=ack_namespace,
        deployable=tuple(c.name for c in stack.components if c.plane != "hub"),
    )


def plan_lines(plan: TeardownPlan, scope: StackScope) -> list[str]:
    lines: list[str] = [
        "preflight: iam:SimulatePrincipalPolicy on the caller for "
        + ", ".join(teardown_actions(plan.planes))
        + " (anything not allowed stops the teardown before it starts, exit 3)"
    ]
    if "workload" in plan.planes:
        lines += [
            "workload: preflight: caller identity",
            "workload: stop Karpenter launching through config: set-string-path "
            f"{' '.join(ZERO_LIMITS[1])} and publish on "
            f"{', '.join(plan.nodepool_spaces) or '(no NodePool spaces)'}",
            "workload: drain through config: set-replicas 0 and publish on "
            f"{', '.join(plan.spaces['workload']) or '(no workload spaces)'} "
            "(the space running Karpenter keeps running so it can remove the emptied nodes)",
            "workload: wait until EC2 shows no pending/running instance tagged "
            f"{scope.tag_text}, {scope.cluster_tag} or eks:cluster-name={scope.cluster}",
        ]
    if "mgmt" in plan.planes:
        lines += [
            "mgmt: preflight: caller identity, the account ACK built the stack in (from the "
            "ACK objects' status), no Karpenter node left, and the "
            f"controllers' Secret on {plan.kube_path} (present, not expired) before anything "
            "is deleted",
            "mgmt: preflight: iam:SimulatePrincipalPolicy on the ACK controllers' identity (the "
            "user or role behind their key, from sts:GetCallerIdentity) for every delete action "
            "they will perform: "
            + ", ".join(sorted({a for o in plan.objects for a in delete_actions(o) or ()}))
            + " (anything not allowed stops the teardown before it starts, exit 3)",
            "mgmt: authorise deletion through config: set-annotation "
            f"{DELETION_POLICY}=delete on {', '.join(plan.spaces['mgmt']) or '(no mgmt spaces)'}",
            "mgmt: stop Argo CD's application controller (scale to 0) so nothing is recreated",
            f"mgmt: delete {len(plan.objects)} ACK object(s), dependents first:",
            *[f"  wave {o.wave:>3}: {o.label}" for o in plan.objects],
            f"mgmt: release Karpenter's instance profiles on node role {scope.node_role} "
            "(iam:ListInstanceProfilesForRole; path "
            f"{karpenter_profile_path(scope)}* or tagged {scope.tag_text}, "
            f"{scope.cluster_tag} or eks:eks-cluster-name={scope.cluster}), also whenever the "
            "ACK deletion stalls",
            f"mgmt: sweep, only inside VPCs tagged {scope.tag_text}: detached ENIs "
            f"tagged {scope.tag_text}, {scope.cluster_tag}=owned or "
            f"{'/'.join(EKS_NAME_TAGS)}={scope.cluster}, or described "
            f"'{eks_control_plane_description(scope)}'; security groups tagged "
            f"{scope.cluster_tag}=owned or {EKS_CLUSTER_NAME_TAG}={scope.cluster} (never by "
            "name); anything else is left and listed as not the stack's",
            "mgmt: verify against EC2 (scoped to the stack) that nothing billing is left; "
            "list idle Elastic IPs",
        ]
    return lines


def plan_controllers(
    plan: TeardownPlan, session: AwsSession, kube: KubeClient | None
) -> ControllersVerdict | None:
    """The controllers' verdict the plan shows, as `run` reaches it (None: no mgmt plane or no
    management cluster, so nothing is asked of the controllers)."""
    if kube is None or "mgmt" not in plan.planes:
        return None
    return check_controllers(session, kube, plan.ack_namespace, list(plan.objects))


def karpenter_nodes(session: AwsSession, scope: StackScope) -> list[str]:
    return [
        i["InstanceId"]
        for i in stack_instances(session, scope)
        if "karpenter.sh/nodepool" in tags_of(i)
    ]


def run(
    plan: TeardownPlan,
    session: AwsSession,
    scope: StackScope,
    kube: KubeClient | None,
    config: ConfigPlane | None,
    timing: Timing,
    delete_config: bool,
    say: Say = _quiet,
) -> list[Outcome]:
    say(f"preflight: {check_permissions(session, plan.planes)}")
    for note in preflight(session, scope, kube, plan.ack_namespace, list(plan.objects)):
        say(f"preflight: {note}")
    if plan.planes == ("mgmt",):
        nodes = karpenter_nodes(session, scope)
        if nodes:
            raise EksinfError(
                f"Karpenter nodes of stack {scope.stack} are still running: {', '.join(nodes)}",
                hint="Tear the workload plane down first (eksinf teardown --plane workload "
                "--yes): deleting the cluster does not terminate them.",
                exit_code=CONTRACT,
            )
    outcomes = []
    for plane in plan.planes:
        out = Outcome(plane)
        outcomes.append(out)
        if plane == "workload":
            _drain(plan, session, scope, config, timing, out, say)
        else:
            _mgmt(plan, session, scope, kube, config, timing, out, say)
    if delete_config:
        for out in outcomes:
            if config is None:
                out.record("config", "skipped", "no hub in this stack", say)
                continue
            removed = config.delete_spaces(
                [variant_space(comp, plan.variant) for comp in plan.components[out.plane]]
            )
            if not config.existing([variant_space(c, plan.variant) for c in plan.deployable]):
                removed += [
                    f"{space} (no {plan.variant} variant uses it any more)"
                    for space in config.delete_spaces([profile_space(plan.variant)])
                ]
            out.record("config", "done", f"deleted {', '.join(removed) or 'no spaces'}", say)
    return outcomes


def _drain(
    plan: TeardownPlan,
    session: AwsSession,
    scope: StackScope,
    config: ConfigPlane | None,
    timing: Timing,
    out: Outcome,
    say: Say,
) -> None:
    if config is None:
        out.record(
            "drain",
            "skipped",
            "no hub in this stack: zero the NodePool limits and scale the workloads to 0 in "
            "your config",
            say,
        )
    else:
        function, args = ZERO_LIMITS
        done, absent = config.through(list(plan.nodepool_spaces), function, args)
        missing = f"; absent: {', '.join(absent)}" if absent else ""
        out.record(
            "limits",
            "done",
            f"NodePool spec.limits.cpu=0 published on {', '.join(done) or 'none'}{missing}",
            say,
        )
        done, absent = config.through(list(plan.spaces["workload"]), "set-replicas", ["0"])
        missing = f"; absent: {', '.join(absent)}" if absent else ""
        out.record(
            "drain",
            "done",
            f"set-replicas 0 published on {', '.join(done) or 'none'}{missing}",
            say,
        )
    wait_for_no_instances(session, scope, timing.wait_timeout, timing.poll, say)
    out.record("instances", "done", "EC2 shows no instance of the stack", say)


def _mgmt(
    plan: TeardownPlan,
    session: AwsSession,
    scope: StackScope,
    kube: KubeClient | None,
    config: ConfigPlane | None,
    timing: Timing,
    out: Outcome,
    say: Say,
) -> None:
    if kube is None:
        out.record(
            "ack-objects",
            "skipped",
            f"no management cluster ({plan.kube_path} not found): ACK objects were not "
            "deleted; only what this run can see in AWS is cleaned",
            say,
        )
    else:
        _delete_through_ack(plan, session, scope, kube, config, timing, out, say)
    profiles = release_instance_profiles(session, scope)
    out.record("instance-profiles", "done", ", ".join(profiles) or "none of the stack's", say)
    done, failed = sweep_orphans(session, scope)
    out.record(
        "sweep",
        "partial" if failed else "done",
        "; ".join(done + failed) or "no orphans in the stack VPC",
        say,
    )
    out.final = leftovers(session, scope)


def _delete_through_ack(
    plan: TeardownPlan,
    session: AwsSession,
    scope: StackScope,
    kube: KubeClient,
    config: ConfigPlane | None,
    timing: Timing,
    out: Outcome,
    say: Say,
) -> None:
    if config is not None:
        done, _ = config.through(
            list(plan.spaces["mgmt"]), "set-annotation", [DELETION_POLICY, "delete"]
        )
        out.record(
            "authorise",
            "done",
            f"deletion-policy=delete published on {', '.join(done) or 'none'}",
            say,
        )
    else:
        out.record(
            "authorise", "direct", "no hub: each object is annotated once Argo CD is stopped", say
        )
    halt = ArgoHalt(kube, plan.argocd_namespace)
    stopped = halt.stop()
    out.record(
        "argocd",
        "stopped" if stopped else "absent",
        f"application controller replicas {halt.replicas} -> 0"
        if stopped
        else "no application controller found",
        say,
    )
    deleted = False
    try:
        if stopped:
            halt.wait_stopped(180, min(timing.poll, 10))
        swept = delete_ack_objects(
            kube, list(plan.objects), session, scope, timing.wait_timeout * 2.3, timing.poll, say
        )
        deleted = True
        extra = f"; swept {', '.join(swept)}" if swept else ""
        out.record("ack-objects", "done", f"{len(plan.objects)} deleted{extra}", say)
    finally:
        if stopped and not deleted:
            halt.restore()
            out.record("argocd", "restored", "nothing was deleted, so the controller is back", say)
    if stopped:
        out.record(
            "argocd",
            "left stopped",
            "restoring it now would recreate what was just deleted from the published config; "
            "after deleting the mgmt config, scale statefulset/argocd-application-controller in "
            f"{plan.argocd_namespace} back to {halt.replicas}",
            say,
        )
