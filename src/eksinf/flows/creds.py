"""`eksinf creds`: the AWS credentials the ACK controllers use, kept in the Secret aws-creds on
the management cluster. Each step that changes something comes after the step that shows what
it will change, so the command can print the plan before it acts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..aws import creds as creds_mod
from ..errors import EksinfError
from ..kube.client import KubeClient, resource_path
from ..model.names import kubeconfig_path
from .context import StackContext

SECRET_NAME = creds_mod.SECRET_NAME
INLINE_POLICY = creds_mod.INLINE_POLICY


@dataclass(frozen=True)
class MgmtCluster:
    """The management cluster's --kubeconfig and --context (default: the stack's kept one)."""

    kubeconfig: Path | None = None
    context: str | None = None


def ack_namespace(ctx: StackContext) -> str:
    return creds_mod.ack_namespace(ctx.stack.versions)


def mgmt_kube(ctx: StackContext, cluster: MgmtCluster) -> KubeClient:
    path = cluster.kubeconfig or kubeconfig_path(ctx.stack.root, "mgmt")
    return KubeClient.from_kubeconfig(Path(path), ctx.session, cluster.context)


# ---- status ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CredsStatus:
    cluster: str
    namespace: str
    info: creds_mod.SecretInfo
    pods: list[str]

    def as_json(self) -> dict[str, Any]:
        info = self.info
        return {
            "cluster": self.cluster,
            "namespace": self.namespace,
            "secret": SECRET_NAME if info.present else None,
            "present": info.present,
            "accessKeyId": info.access_key_id,
            "temporary": info.temporary,
            "expiresAt": info.expires_at,
            "expired": info.expired,
            "source": info.source,
            "pods": self.pods,
        }


def status(ctx: StackContext, cluster: MgmtCluster) -> CredsStatus:
    kube = mgmt_kube(ctx, cluster)
    namespace = ack_namespace(ctx)
    info = creds_mod.read_secret(kube, namespace)
    pods = kube.items(resource_path("v1", "Pod", namespace))
    return CredsStatus(
        kube.server, namespace, info, sorted(str(p["metadata"]["name"]) for p in pods)
    )


# ---- use-existing / refresh --------------------------------------------------------------


@dataclass(frozen=True)
class OwnCredentials:
    """The caller's own credentials, read, with the cluster they go to (reachable)."""

    account: str
    arn: str
    creds: dict[str, str]
    kube: KubeClient

    @property
    def temporary(self) -> bool:
        return bool(self.creds.get("SessionToken"))

    @property
    def minutes_left(self) -> int | None:
        return creds_mod.minutes_left(self.creds.get("Expiration"))


def own_credentials(ctx: StackContext, cluster: MgmtCluster, hint: str) -> OwnCredentials:
    """Read the caller's credentials (`hint` replaces the error's own when given) and check
    the cluster is reachable before anything is written."""
    session = ctx.session
    try:
        creds = creds_mod.existing_credentials(session)
    except EksinfError as exc:
        raise EksinfError(exc.message, hint=hint or exc.hint, exit_code=exc.exit_code) from exc
    kube = mgmt_kube(ctx, cluster)
    kube.version()  # reachable before anything is written
    caller = session.caller
    return OwnCredentials(caller.account, caller.arn, creds, kube)


def hand_over(ctx: StackContext, own: OwnCredentials) -> list[str]:
    """Write the Secret; the controllers restarted."""
    return creds_mod.write_secret(own.kube, ack_namespace(ctx), own.creds, f"caller/{own.arn}")


# ---- create-user -------------------------------------------------------------------------


@dataclass(frozen=True)
class UserOptions:
    user_name: str | None = None
    cluster: MgmtCluster = field(default_factory=MgmtCluster)


@dataclass(frozen=True)
class UserPlan:
    name: str
    account: str
    caller: str
    tag: str  # key=value
    policy: creds_mod.Policy
    secret: str  # namespace/name
    cluster: MgmtCluster


def user_plan(ctx: StackContext, opts: UserOptions) -> UserPlan:
    """What create-user would do; refused for the account root."""
    scope = ctx.scope
    policy = creds_mod.load_policy(ctx.stack.root)
    name = opts.user_name or creds_mod.default_user_name(scope)
    session = ctx.session
    creds_mod.refuse_root(session)
    return UserPlan(
        name,
        session.caller.account,
        session.caller.arn,
        f"{scope.tag_key}={scope.stack}",
        policy,
        f"{ack_namespace(ctx)}/{SECRET_NAME}",
        opts.cluster,
    )


@dataclass(frozen=True)
class UserCreated:
    made: creds_mod.CreatedUser
    restarted: list[str]


def create_user(ctx: StackContext, plan: UserPlan) -> UserCreated:
    kube = mgmt_kube(ctx, plan.cluster)
    kube.version()  # the Secret can be written: checked before a key is minted
    made = creds_mod.create_user(ctx.session, ctx.scope, plan.policy, plan.name)
    if made.rotated:
        ctx.say(f"deleted the previous eksinf key {', '.join(made.rotated)}")
    ctx.say(f"new key {made.access_key_id} accepted by IAM after {made.probe_attempts} probe(s)")
    restarted = creds_mod.write_secret(
        kube, ack_namespace(ctx), made.creds, f"iam-user/{plan.name}"
    )
    return UserCreated(made, restarted)


# ---- delete-user -------------------------------------------------------------------------


@dataclass(frozen=True)
class DeletePlan:
    name: str
    arn: str
    keys: list[str]
    cluster: MgmtCluster


def delete_plan(ctx: StackContext, opts: UserOptions) -> DeletePlan:
    name = opts.user_name or creds_mod.default_user_name(ctx.scope)
    found = creds_mod.user_exists(ctx.session, name)
    if found is None:
        raise EksinfError(f"no IAM user named {name}", hint="Nothing to delete.", exit_code=1)
    return DeletePlan(name, found["arn"], list(found["keys"]), opts.cluster)


@dataclass(frozen=True)
class UserDeleted:
    gone: creds_mod.DeletedUser
    secret_deleted: str | None = None  # namespace/name, when the Secret was the user's
    secret_unknown: str | None = None  # why the Secret could not be checked


def delete_user(ctx: StackContext, plan: DeletePlan) -> UserDeleted:
    """Delete the user, then its Secret when the controllers' Secret holds its key."""
    gone = creds_mod.delete_user(ctx.session, ctx.scope, plan.name)
    namespace = ack_namespace(ctx)
    try:
        kube = mgmt_kube(ctx, plan.cluster)
        info = creds_mod.read_secret(kube, namespace)
    except EksinfError as exc:
        return UserDeleted(gone, secret_unknown=exc.message)
    if info.present and info.source == f"iam-user/{plan.name}":
        kube.delete(resource_path("v1", "Secret", namespace, SECRET_NAME))
        return UserDeleted(gone, secret_deleted=f"{namespace}/{SECRET_NAME}")
    return UserDeleted(gone)


def policy(ctx: StackContext) -> creds_mod.Policy:
    """The scoped IAM policy create-user attaches (linted first)."""
    return creds_mod.load_policy(ctx.stack.root)
