"""AWS-facing commands: status, creds, enroll, teardown. Parse, call `eksinf.aws`, format."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..errors import ENVIRONMENT, USAGE, EksinfError, shell_command
from ..model.names import apps_space, kubeconfig_path
from ..model.targets import DEFAULT_KIND, HYPERPOD_EKS, KIND_HELP, target_kind
from .common import HUB_OPTION, JSON_OPTION, emit_json, print_table, progress, state

# The AWS stages pull in boto3/botocore and requests (~0.2 s): each command imports what it
# uses, so `eksinf --help` and the build commands never load them.
if TYPE_CHECKING:
    from ..aws.scope import StackScope
    from ..aws.session import AwsSession
    from ..kube.client import KubeClient

REGION_OPTION = typer.Option(
    None, "--region", help="AWS region. Default: the platform profile's region."
)
AWS_PROFILE_OPTION = typer.Option(
    None,
    "--aws-profile",
    help="AWS CLI profile for every AWS, kubectl and Helm call of this command. "
    "Default: $AWS_PROFILE as it was when the command started.",
)


creds_app = typer.Typer(
    help="AWS credentials for the ACK controllers (the Secret aws-creds on the mgmt cluster).",
    no_args_is_help=True,
)


enroll_app = typer.Typer(
    help="Check a bring-your-own EKS cluster against the contract and wire it to Argo CD. "
    "Never creates or destroys a cluster.",
    no_args_is_help=True,
)


addon_schemas_app = typer.Typer(
    help="EKS add-on configuration schemas recorded in the package (lint checks values with them).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.command("status")(status_cmd)
    app.add_typer(addon_schemas_app, name="addon-schemas")
    app.add_typer(creds_app, name="creds")
    app.add_typer(enroll_app, name="enroll")
    app.command("teardown")(teardown_cmd)


def stack_scope(ctx: typer.Context, region: str | None) -> StackScope:
    from eksinf.model.profile import ORIGINAL_STACK_TAG_KEY, STACK_TAG_KEY, load_profile

    from ..aws.scope import StackScope

    profile = load_profile(state(ctx).stack())
    return StackScope.from_profile(profile, STACK_TAG_KEY, region, (ORIGINAL_STACK_TAG_KEY,))


def aws_session(scope: StackScope, aws_profile: str | None) -> AwsSession:
    from ..aws.session import AwsIdentity, AwsSession

    return AwsSession(AwsIdentity.resolve(scope.region, aws_profile))


def warn(message: str) -> None:
    progress(f"warning: {message}")


ARGOCD_NS_OPTION = typer.Option("argocd", "--argocd-namespace", help="Argo CD's namespace.")
CONTEXT_OPTION = typer.Option(
    None, "--context", help="The --kubeconfig context to use. Default: its current-context."
)


def status_cmd(
    ctx: typer.Context,
    region: str = REGION_OPTION,
    aws_profile: str = AWS_PROFILE_OPTION,
    workload_kubeconfig: Path = typer.Option(
        None,
        "--kubeconfig",
        help="Workload cluster kubeconfig: adds EC2NodeClass resolution (subnets, security "
        "groups, AMIs, reservations) to the report.",
    ),
    mgmt_kubeconfig: Path = typer.Option(
        None,
        "--mgmt-kubeconfig",
        help="Management cluster kubeconfig, to compare the account ACK built the stack in "
        "with the caller's. Default: .eksinf/clusters/mgmt.kubeconfig when it exists.",
    ),
    context: str = CONTEXT_OPTION,
    mgmt_context: str = typer.Option(
        None, "--mgmt-context", help="The --mgmt-kubeconfig context. Default: its current-context."
    ),
    plane: str = typer.Option(
        None,
        "--plane",
        help="mgmt or workload: report whether the plane serves, from its cluster only (Argo "
        "CD, ACK, Karpenter, model endpoints) instead of EC2 and costs.",
    ),
    variant: str = typer.Option("dev", "--variant", help="With --plane: the deployed variant."),
    kind: str = typer.Option(
        DEFAULT_KIND,
        "--kind",
        help="The target's kind: which components --plane reads; hyperpod-eks also lists and "
        "prices the HyperPod cluster's instances (spec.hyperpod.clusterName).",
    ),
    argocd_namespace: str = ARGOCD_NS_OPTION,
    watch: float = typer.Option(
        0, "--watch", help="With --plane: refresh every SECONDS until interrupted."
    ),
    count: int = typer.Option(0, "--count", help="With --watch: stop after N reports (0: never)."),
    json_out: bool = JSON_OPTION,
) -> None:
    """What this stack runs on EC2 and what it costs (scoped to the stack's tags); with --plane,
    whether the plane serves."""
    from eksinf.model.prices import load_prices

    from ..aws import pricing
    from ..aws import status as status_mod
    from ..kube.client import KubeClient

    chosen = target_kind(kind)
    if plane is not None:
        _serving_status(
            ctx,
            plane,
            workload_kubeconfig,
            context,
            variant,
            chosen.name,
            argocd_namespace,
            watch,
            count,
            json_out,
        )
        return

    scope = stack_scope(ctx, region)
    hyperpod = None
    if chosen.name == HYPERPOD_EKS:
        from eksinf.model.profile import load_profile

        from ..aws.contract.hyperpod import expected

        stack = state(ctx).stack()
        hyperpod = expected(load_profile(stack), stack.versions).name
    try:
        session = aws_session(scope, aws_profile)
        raw = status_mod.collect(session, scope, hyperpod)
    except EksinfError as exc:
        # Unknown is not zero: say UNKNOWN with the reason, never print an empty list.
        if json_out:
            emit_json(status_mod.unknown_json(scope, exc.message))
        else:
            typer.echo(f"cost UNKNOWN: {exc.message}")
        raise EksinfError(
            "cost UNKNOWN: cannot query AWS for this stack",
            hint=exc.hint or "Fix the AWS access above and re-run.",
            exit_code=exc.exit_code if exc.exit_code == ENVIRONMENT else ENVIRONMENT,
        ) from exc
    stack_accounts = _stack_accounts(ctx, mgmt_kubeconfig, session, mgmt_context)
    live = pricing.fetch_rates(
        session,
        scope.region,
        [
            status_mod.instance_type(i)
            for i in raw.instances
            if i.get("InstanceLifecycle") != "spot"
        ],
        [
            (status_mod.instance_type(i), status_mod.zone_of(i))
            for i in raw.instances
            if i.get("InstanceLifecycle") == "spot"
        ],
    )
    report = status_mod.build_status(scope, raw, load_prices(), stack_accounts, live)
    section: dict[str, Any] | None = None
    if workload_kubeconfig is not None:
        try:
            kube = KubeClient.from_kubeconfig(workload_kubeconfig, session, context)
        except EksinfError as exc:
            section = {
                "nodeClasses": None,
                "nodeClassError": f"UNKNOWN: {exc.message}",
                "warnings": [],
            }
        else:
            section = status_mod.node_class_section(kube, scope.network)
    for message in [*report.warnings, *((section or {}).get("warnings") or [])]:
        warn(message)  # stderr in both modes, so --json stays clean
    if section and section["nodeClassError"]:
        warn(f"node classes: {section['nodeClassError']}")
    if json_out:
        body = status_mod.to_json(report)
        if section is not None:
            body.update(
                nodeClasses=section["nodeClasses"], nodeClassError=section["nodeClassError"]
            )
        emit_json(body)
        return
    for line in status_mod.format_text(report):
        typer.echo(line)
    if section is None:
        typer.echo("node classes: no workload cluster given (--kubeconfig); not checked")
    elif section["nodeClasses"] is None:
        typer.echo(f"node classes: {section['nodeClassError']}")
    else:
        for nc in section["nodeClasses"]:
            typer.echo(
                f"nodeclass {nc['name']}: ready={nc['ready']} subnets={nc['subnets']} "
                f"securityGroups={nc['securityGroups']} amis={nc['amis']} "
                f"reservations={nc['capacityReservations']}"
            )
    sources = sorted({r.price_source for r in report.instances})
    progress(
        f"prices: {', '.join(sources) or 'none needed'} (live rates cached in "
        f"{pricing.cache_file(scope.region)}; table src/eksinf/data/prices.json as of "
        f"{report.prices_as_of})"
    )


def _serving_status(
    ctx: typer.Context,
    plane: str,
    kubeconfig: Path | None,
    context: str | None,
    variant: str,
    kind: str,
    argocd_namespace: str,
    watch: float,
    count: int,
    json_out: bool,
) -> None:
    import time

    from eksinf.model.profile import load_profile

    from ..aws import serving
    from ..kube.client import KubeClient

    if plane not in ("mgmt", "workload"):
        raise EksinfError(f"unknown plane {plane!r}", hint="Use mgmt or workload.", exit_code=2)
    stack = state(ctx).stack()
    path = kubeconfig or kubeconfig_path(stack.root, "mgmt")
    if kubeconfig is None and plane == "workload":
        raise EksinfError(
            "status --plane workload needs --kubeconfig (the workload cluster's)", exit_code=2
        )
    model = str(load_profile(stack).spec.get("modelId", ""))
    plan = serving.plan_for(
        stack.configs_dir, plane, [c.name for c in stack.select(plane=plane, kind=kind)], variant
    )
    kube = KubeClient.from_kubeconfig(Path(path), context=context)
    shown = 0
    while True:
        report = serving.collect(kube, plan, argocd_namespace, model, plane)
        shown += 1
        if json_out:
            emit_json(report)
        else:
            for line in serving.format_text(report):
                typer.echo(line)
        if not watch or (count and shown >= count):
            break
        time.sleep(watch)
    if report["state"] != serving.HEALTHY:
        raise EksinfError(f"{plane} plane is {report['state']}: see above", exit_code=1)


def _stack_accounts(
    ctx: typer.Context, kubeconfig: Path | None, session: AwsSession, context: str | None
) -> dict[str, list[str]] | None:
    """The account(s) the stack's ACK objects record, or None when there is no way to know."""
    from ..aws.ack import ack_accounts, ack_objects
    from ..kube.client import KubeClient

    stack = state(ctx).stack()
    path = kubeconfig or kubeconfig_path(stack.root, "mgmt")
    if kubeconfig is None and not path.is_file():
        return None
    mgmt = [c.name for c in stack.select(plane="mgmt")]
    try:
        kube = KubeClient.from_kubeconfig(path, session, context)
        return ack_accounts(kube, ack_objects(stack.configs_dir, mgmt))
    except EksinfError as exc:
        warn(f"the stack's account is unknown (management cluster: {exc.message})")
        return None


# ---- creds -----------------------------------------------------------------------------------

MGMT_KUBECONFIG_OPTION = typer.Option(
    None,
    "--kubeconfig",
    help="Kubeconfig of the management (kind) cluster. "
    "Default: .eksinf/clusters/mgmt.kubeconfig in the stack directory.",
)
USER_OPTION = typer.Option(None, "--user-name", help="IAM user name. Default: <stack>-ack.")
YES_OPTION = typer.Option(False, "--yes", help="Carry out the change (without it: print the plan).")


def mgmt_kube(
    ctx: typer.Context, kubeconfig: Path | None, session: AwsSession, context: str | None
) -> KubeClient:
    from ..kube.client import KubeClient

    path = kubeconfig or kubeconfig_path(state(ctx).stack().root, "mgmt")
    return KubeClient.from_kubeconfig(Path(path), session, context)


ARGOCD_TIMEOUT_OPTION = typer.Option(
    300,
    "--argocd-timeout",
    help="Seconds to wait for an installed Argo CD to become Available; then exit 4 saying "
    "what the cluster lacks (nodes, pods).",
)


def ack_namespace(ctx: typer.Context) -> str:
    from ..aws.creds import ack_namespace as namespace_of

    return namespace_of(state(ctx).stack().versions)


def nothing_changed() -> None:
    progress("nothing changed; re-run with --yes")


@creds_app.command("status")
def creds_status_cmd(
    ctx: typer.Context,
    kubeconfig: Path = MGMT_KUBECONFIG_OPTION,
    context: str = CONTEXT_OPTION,
    aws_profile: str = AWS_PROFILE_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Show the controllers' credentials Secret (key id, temporary or not, expiry) and pods."""
    from ..aws import creds as creds_mod

    scope = stack_scope(ctx, None)
    session = aws_session(scope, aws_profile)
    kube = mgmt_kube(ctx, kubeconfig, session, context)
    namespace = ack_namespace(ctx)
    info = creds_mod.read_secret(kube, namespace)
    from ..kube.client import resource_path

    pods = kube.items(resource_path("v1", "Pod", namespace))
    pod_names = sorted(str(p["metadata"]["name"]) for p in pods)
    body = {
        "cluster": kube.server,
        "namespace": namespace,
        "secret": creds_mod.SECRET_NAME if info.present else None,
        "present": info.present,
        "accessKeyId": info.access_key_id,
        "temporary": info.temporary,
        "expiresAt": info.expires_at,
        "expired": info.expired,
        "source": info.source,
        "pods": pod_names,
    }
    if json_out:
        emit_json(body)
        return
    if not info.present:
        typer.echo(f"secret {namespace}/{creds_mod.SECRET_NAME}: MISSING")
        progress("write one with: eksinf creds use-existing (or creds create-user --yes)")
        return
    kind = "temporary session" if info.temporary else "long-lived access key"
    typer.echo(f"secret {namespace}/{creds_mod.SECRET_NAME}: key {info.access_key_id} ({kind})")
    if info.expires_at:
        typer.echo(f"expires at {info.expires_at}" + (" (EXPIRED)" if info.expired else ""))
        if info.expired:
            warn("expired: run `aws sso login && eksinf creds refresh`")
    typer.echo(f"source: {info.source or 'unknown'}")
    typer.echo(f"pods in {namespace}: {', '.join(pod_names) or 'none'}")


def _write_own_credentials(
    ctx: typer.Context,
    kubeconfig: Path | None,
    context: str | None,
    aws_profile: str | None,
    hint: str,
) -> None:
    from ..aws import creds as creds_mod

    scope = stack_scope(ctx, None)
    session = aws_session(scope, aws_profile)
    try:
        creds = creds_mod.existing_credentials(session)
    except EksinfError as exc:
        raise EksinfError(exc.message, hint=hint or exc.hint, exit_code=exc.exit_code) from exc
    kube = mgmt_kube(ctx, kubeconfig, session, context)
    kube.version()  # reachable before anything is written
    caller = session.caller
    typer.echo(f"account {caller.account}, identity {caller.arn}, key {creds['AccessKeyId']}")
    if creds.get("SessionToken"):
        typer.echo(f"temporary credentials; expire at {creds.get('Expiration', 'unknown')}")
        left = creds_mod.minutes_left(creds.get("Expiration"))
        if left is not None and left < 30:
            warn(
                f"these credentials expire in {left} min; provisioning takes ~25 min and the "
                "controllers stop when they expire (refresh with `eksinf creds refresh`)"
            )
    restarted = creds_mod.write_secret(kube, ack_namespace(ctx), creds, f"caller/{caller.arn}")
    _report_restart(restarted)


def _report_restart(restarted: list[str]) -> None:
    if restarted:
        progress(f"restarted controllers: {', '.join(restarted)}")
    else:
        progress("no controllers deployed yet; they will read this Secret at startup")


@creds_app.command("use-existing")
def creds_use_existing_cmd(
    ctx: typer.Context,
    kubeconfig: Path = MGMT_KUBECONFIG_OPTION,
    context: str = CONTEXT_OPTION,
    aws_profile: str = AWS_PROFILE_OPTION,
) -> None:
    """Hand your own AWS identity (never the account root) to the ACK controllers."""
    _write_own_credentials(ctx, kubeconfig, context, aws_profile, "")


@creds_app.command("refresh")
def creds_refresh_cmd(
    ctx: typer.Context,
    kubeconfig: Path = MGMT_KUBECONFIG_OPTION,
    context: str = CONTEXT_OPTION,
    aws_profile: str = AWS_PROFILE_OPTION,
) -> None:
    """Re-write the Secret from a renewed session (after `aws sso login`)."""
    _write_own_credentials(
        ctx, kubeconfig, context, aws_profile, "Has your SSO session expired? Try: aws sso login"
    )
    progress("reconciliation resumes as the controllers come back up")


@creds_app.command("create-user")
def creds_create_user_cmd(
    ctx: typer.Context,
    user_name: str = USER_OPTION,
    kubeconfig: Path = MGMT_KUBECONFIG_OPTION,
    context: str = CONTEXT_OPTION,
    aws_profile: str = AWS_PROFILE_OPTION,
    yes: bool = YES_OPTION,
) -> None:
    """Create (or reuse) a dedicated IAM user with the scoped policy and hand its key to ACK."""
    from ..aws import creds as creds_mod

    scope = stack_scope(ctx, None)
    policy = creds_mod.load_policy(state(ctx).stack().root)
    name = user_name or creds_mod.default_user_name(scope)
    session = aws_session(scope, aws_profile)
    creds_mod.refuse_root(session)
    typer.echo(f"account {session.caller.account}, caller {session.caller.arn}")
    typer.echo(
        f"plan: IAM user {name} (tag {scope.tag_key}={scope.stack}), inline policy "
        f"{creds_mod.INLINE_POLICY} from {policy.path.name}, a new access key (rotating only the "
        f"one eksinf created), Secret {ack_namespace(ctx)}/{creds_mod.SECRET_NAME}"
    )
    if not yes:
        nothing_changed()
        return
    kube = mgmt_kube(ctx, kubeconfig, session, context)
    kube.version()  # the Secret can be written: checked before a key is minted
    made = creds_mod.create_user(session, scope, policy, name)
    if made.rotated:
        progress(f"deleted the previous eksinf key {', '.join(made.rotated)}")
    progress(f"new key {made.access_key_id} accepted by IAM after {made.probe_attempts} probe(s)")
    restarted = creds_mod.write_secret(kube, ack_namespace(ctx), made.creds, f"iam-user/{name}")
    _report_restart(restarted)
    typer.echo(f"user {made.arn} key {made.access_key_id} written to the controllers")
    progress(
        "remove later with: "
        + shell_command("eksinf", "creds", "delete-user", "--user-name", name, "--yes")
    )


@creds_app.command("delete-user")
def creds_delete_user_cmd(
    ctx: typer.Context,
    user_name: str = USER_OPTION,
    kubeconfig: Path = MGMT_KUBECONFIG_OPTION,
    context: str = CONTEXT_OPTION,
    aws_profile: str = AWS_PROFILE_OPTION,
    yes: bool = YES_OPTION,
) -> None:
    """Delete the dedicated IAM user, its keys and policy, and its Secret if it is the user's."""
    from ..aws import creds as creds_mod

    scope = stack_scope(ctx, None)
    name = user_name or creds_mod.default_user_name(scope)
    session = aws_session(scope, aws_profile)
    found = creds_mod.user_exists(session, name)
    if found is None:
        raise EksinfError(f"no IAM user named {name}", hint="Nothing to delete.", exit_code=1)
    typer.echo(f"plan: delete IAM user {found['arn']}, keys {', '.join(found['keys']) or 'none'}")
    if not yes:
        warn("the ACK controllers lose AWS access if they use this user's key")
        nothing_changed()
        return
    gone = creds_mod.delete_user(session, scope, name)
    typer.echo(
        f"deleted IAM user {gone.user} (keys: {', '.join(gone.keys) or 'none'}; "
        f"policies: {', '.join(gone.policies) or 'none'})"
    )
    try:
        kube = mgmt_kube(ctx, kubeconfig, session, context)
        info = creds_mod.read_secret(kube, ack_namespace(ctx))
    except EksinfError as exc:
        warn(f"could not check the controllers' Secret: {exc.message}")
        return
    if info.present and info.source == f"iam-user/{name}":
        from ..kube.client import resource_path

        kube.delete(resource_path("v1", "Secret", ack_namespace(ctx), creds_mod.SECRET_NAME))
        progress(f"deleted Secret {ack_namespace(ctx)}/{creds_mod.SECRET_NAME}")


@creds_app.command("show-policy")
def creds_show_policy_cmd(ctx: typer.Context, json_out: bool = JSON_OPTION) -> None:
    """Print the scoped IAM policy create-user attaches (linted first)."""
    from ..aws import creds as creds_mod

    policy = creds_mod.load_policy(state(ctx).stack().root)
    if json_out:
        emit_json({"path": str(policy.path), "policy": policy.doc, "problems": []})
    else:
        typer.echo(policy.text.rstrip("\n"))


# ---- addon-schemas ---------------------------------------------------------------------------


@addon_schemas_app.command("refresh")
def addon_schemas_refresh_cmd(
    ctx: typer.Context,
    region: str = REGION_OPTION,
    record: Path = typer.Option(
        None, "--record", help="The record to update. Default: the package's addon-schemas.json."
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print what would change; write nothing."
    ),
    aws_profile: str = AWS_PROFILE_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Record eks:DescribeAddonConfiguration for the version each Addon unit pins (the profile
    linked in), so `eksinf lint` checks configurationValues against it offline."""
    from eksinf.core.atomic import write_file

    from ..aws import addons, contract
    from ..model import addons as recorded

    stack = state(ctx).stack()
    scope = stack_scope(ctx, region)
    path = record or recorded.RECORD
    result = addons.refresh(
        aws_session(scope, aws_profile),
        scope.region,
        contract.needs_for(stack).addons,
        recorded.load_records(path),
    )
    if result.dirty and not dry_run:
        write_file(path, recorded.records_bytes(result.records))
    if json_out:
        emit_json(
            {**result.as_json(), "record": str(path), "written": result.dirty and not dry_run}
        )
        return
    for what in ("added", "changed", "unchanged"):
        for item in result.as_json()[what]:
            typer.echo(f"{what:<9} {item}")
    if not result.dirty:
        typer.echo(f"{path}: up to date")
    elif dry_run:
        progress(f"(dry run; {path} not written)")
    else:
        typer.echo(f"wrote {path}")


# ---- enroll ----------------------------------------------------------------------------------


def _print_checks(report) -> None:
    marks = {"pass": "ok  ", "fail": "FAIL", "warn": "warn", "unknown": "????", "skipped": "skip"}
    for check in report.checks:
        progress(f"{marks[check.status]} {check.name}: {check.detail}  [{check.call}]")


@enroll_app.command("cluster")
def enroll_cluster_cmd(
    ctx: typer.Context,
    name: str = typer.Option(
        None, "--name", help="Target name (also the apps space prefix). Required to enroll."
    ),
    list_checks: bool = typer.Option(
        False, "--list-checks", help="Print the table of contract rules and exit."
    ),
    markdown: bool = typer.Option(
        False, "--markdown", help="With --list-checks: the table docs/contract.md carries."
    ),
    eks_cluster: str = typer.Option(
        None, "--eks-cluster", help="EKS cluster name. Default: the profile's clusterName."
    ),
    kind: str = typer.Option(DEFAULT_KIND, "--kind", help=KIND_HELP),
    hyperpod_cluster: str = typer.Option(
        None,
        "--hyperpod-cluster",
        help="With --kind hyperpod-eks: the HyperPod cluster, NAME or ARN. Default: the "
        "profile's spec.hyperpod.clusterName.",
    ),
    region: str = REGION_OPTION,
    kubeconfig: Path = typer.Option(
        None,
        "--kubeconfig",
        help="Use this kubeconfig for the cluster instead of writing one from eks describe-cluster.",
    ),
    context: str = CONTEXT_OPTION,
    grant_access: bool = typer.Option(
        False,
        "--grant-access",
        help="Create the caller's missing access entry and/or associate the cluster-admin access policy.",
    ),
    oci_registry: str = typer.Option(
        None, "--oci-registry", help="Registry Argo CD pulls releases from. Default: REGISTRY."
    ),
    argocd_namespace: str = ARGOCD_NS_OPTION,
    no_argocd: bool = typer.Option(
        False, "--no-argocd", help="Do not install Argo CD when absent (then it must be there)."
    ),
    argocd_timeout: float = ARGOCD_TIMEOUT_OPTION,
    wait_enablement: int | None = typer.Option(
        None,
        "--wait-enablement",
        min=0,
        help="With --kind hyperpod-eks: while the inference operator's watcher is still "
        "enabling, wait up to SECONDS for it; 0 reads it once. Default: 20 minutes (a "
        "recreated cluster takes over 15). It only warns, never blocks.",
    ),
    aws_profile: str = AWS_PROFILE_OPTION,
    hub_choice: str | None = HUB_OPTION,  # read by open_hub (hub.use_backend)
    json_out: bool = JSON_OPTION,
) -> None:
    """Check the cluster contract; when it holds, install Argo CD if absent and wire the
    cluster (idempotent)."""
    import os

    from ..aws import contract, enroll
    from ..flows import enroll as enroll_flow

    chosen = target_kind(kind)
    if hyperpod_cluster and chosen.name != HYPERPOD_EKS:
        raise EksinfError("--hyperpod-cluster is only for --kind hyperpod-eks", exit_code=USAGE)
    if list_checks:
        rows = contract.table(chosen.name)
        if markdown:
            typer.echo(contract.markdown(chosen.name), nl=False)
        elif json_out:
            emit_json({"checks": rows})
        else:
            print_table(rows, ("name", "severity", "anchor", "summary"))
        return
    if not name:
        raise EksinfError("enroll cluster needs --name", exit_code=2)
    stack = state(ctx).stack()
    scope = contract.with_cluster(stack_scope(ctx, region), eks_cluster, region)
    expected, window = None, 0
    if chosen.name == HYPERPOD_EKS:  # the profile's spec.hyperpod, before any AWS call
        from eksinf.model.profile import load_profile

        from ..aws.contract import hyperpod

        expected = hyperpod.expected(load_profile(stack), stack.versions, hyperpod_cluster)
        window = hyperpod.ENABLEMENT_WINDOW if wait_enablement is None else wait_enablement
    session = aws_session(scope, aws_profile)
    access = enroll.cluster_access(stack.root, name, scope, session, kubeconfig, context)
    report = contract.check_cluster(
        session,
        scope,
        contract.needs_for(stack),
        access.kube,
        grant=grant_access,
        argocd_namespace=argocd_namespace,
        install_argocd=not no_argocd,
        kind=chosen,
        hyperpod=expected,
        enablement_wait=window,
        say=progress,
    )
    if not json_out:
        _print_checks(report)
    for check in report.warnings:
        warn(f"{check.name}: {check.detail}" + (f" (fix: {check.fix})" if check.fix else ""))
    lines = contract.missing_lines(report)
    if lines:
        if json_out:
            emit_json({**report.as_json(), "wiring": None})
        else:
            for line in lines:
                typer.echo(line)
        raise EksinfError(
            f"cluster {scope.cluster} does not meet the contract "
            f"({len(report.violations)} element(s) missing); nothing was wired",
            hint="Apply the fixes above and re-run; see "
            + ("docs/hyperpod.md." if chosen.name == HYPERPOD_EKS else "docs/contract.md."),
            exit_code=3,
        )
    user, password = os.environ.get("EKSINF_OCI_USERNAME"), os.environ.get("EKSINF_OCI_PASSWORD")
    wiring = enroll_flow.enroll(
        stack.root,
        name,
        access,
        oci_registry or stack.versions.get("REGISTRY", ""),
        argocd_namespace,
        (user, password) if user and password else None,
        chosen,
        install_argocd=not no_argocd,
        say=progress,
        argocd_timeout=argocd_timeout,
    )
    if json_out:
        emit_json({**report.as_json(), "wiring": wiring})
        return
    if wiring["argocd"]:
        argo = wiring["argocd"]
        typer.echo(f"argocd: {argo['action']} ({argo['image'] or 'none'}): {argo['detail']}")
    for item in wiring["skipped"]:
        warn(f"skipped {item}")
    typer.echo(f"cluster {scope.cluster} meets the contract; enrolled as {name}")
    typer.echo(f"kubeconfig: {wiring['kubeconfig']}")
    typer.echo(
        f"hub target: {wiring['target']}, kind {wiring['kind']} (apps space {wiring['appsSpace']})"
    )
    for item in wiring["applied"]:
        typer.echo(f"applied {item}")


@enroll_app.command("remove")
def enroll_remove_cmd(
    ctx: typer.Context,
    name: str = typer.Option(..., "--name", help="The enrolled target name."),
    kubeconfig: Path = typer.Option(
        None, "--kubeconfig", help="Default: .eksinf/clusters/<name>.kubeconfig."
    ),
    context: str = CONTEXT_OPTION,
    argocd_namespace: str = ARGOCD_NS_OPTION,
    delete_spaces: bool = typer.Option(
        False, "--delete-spaces", help="Also delete the hub's target and apps spaces."
    ),
    aws_profile: str = AWS_PROFILE_OPTION,
    yes: bool = YES_OPTION,
    hub_choice: str | None = HUB_OPTION,  # read by open_hub (hub.use_backend)
) -> None:
    """Detach a cluster: remove the root app (orphaning workloads); optionally its hub spaces."""
    from ..aws import enroll
    from ..flows import enroll as enroll_flow
    from ..kube.client import KubeClient

    stack = state(ctx).stack()
    path = kubeconfig or kubeconfig_path(stack.root, name)
    spaces = f"; hub spaces {apps_space(name)} and {name}" if delete_spaces else ""
    typer.echo(
        f"plan: delete Application {argocd_namespace}/{apps_space(name)} without "
        f"cascading (workloads and child apps stay) and its repo-creds Secret{spaces}. "
        "The cluster, Argo CD and any access entry are left alone."
    )
    if not yes:
        nothing_changed()
        return
    scope = stack_scope(ctx, None)
    session = aws_session(scope, aws_profile)
    try:
        kube = KubeClient.from_kubeconfig(Path(path), session, context)
        kube.version()
    except EksinfError as exc:
        warn(f"cluster not reachable, in-cluster wiring left in place: {exc.message}")
    else:
        for item in enroll.detach(kube, name, argocd_namespace):
            typer.echo(f"removed {item}")
    if delete_spaces:
        for space in enroll_flow.delete_hub_spaces(stack.root, name):
            typer.echo(f"deleted hub space {space}")


# ---- teardown --------------------------------------------------------------------------------


def teardown_cmd(
    ctx: typer.Context,
    plane: str = typer.Option(
        None, "--plane", help="workload or mgmt. Default: both, workload first."
    ),
    yes: bool = YES_OPTION,
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Print the plan and the preflight verdicts; change nothing (as without --yes).",
    ),
    delete_config: bool = typer.Option(
        False, "--delete-config", help="Also delete the torn-down planes' variant spaces."
    ),
    variant: str = typer.Option("dev", "--variant", help="Variant whose spaces hold the config."),
    kubeconfig: Path = MGMT_KUBECONFIG_OPTION,
    context: str = CONTEXT_OPTION,
    argocd_namespace: str = ARGOCD_NS_OPTION,
    wait_timeout: float = typer.Option(
        900, "--wait-timeout", help="Seconds to wait for instances (and 2.3x that for ACK objects)."
    ),
    poll: float = typer.Option(30, "--poll", help="Seconds between progress checks."),
    region: str = REGION_OPTION,
    aws_profile: str = AWS_PROFILE_OPTION,
    hub_choice: str | None = HUB_OPTION,  # read by open_hub (hub.use_backend)
    json_out: bool = JSON_OPTION,
) -> None:
    """Destroy the stack's AWS infrastructure and prove nothing billing is left (needs --yes)."""
    from ..aws import teardown as td
    from ..flows.teardown import stack_config
    from ..kube.client import KubeClient

    if plane not in (None, "workload", "mgmt"):
        raise EksinfError(
            f"unknown plane {plane!r}"
            + (": the hub plane creates nothing to tear down" if plane == "hub" else ""),
            hint="Use --plane workload or --plane mgmt (default: both).",
            exit_code=2,
        )
    stack = state(ctx).stack()
    scope = stack_scope(ctx, region)
    plan = td.make_plan(
        stack,
        [plane] if plane else ["workload", "mgmt"],
        variant,
        Path(kubeconfig or kubeconfig_path(stack.root, "mgmt")),
        argocd_namespace,
        ack_namespace(ctx),
    )
    session = aws_session(scope, aws_profile)
    if dry_run or not yes:
        lines = td.plan_lines(plan, scope)
        current = None
        try:
            current = td.leftovers(session, scope).as_json()
        except EksinfError as exc:
            warn(f"current state UNKNOWN: {exc.message}")
        verdict = None
        if "mgmt" in plan.planes and plan.kube_path.is_file():
            try:  # read-only: the controllers' Secret, sts and the IAM simulator
                mgmt = KubeClient.from_kubeconfig(plan.kube_path, session, context)
                verdict = td.plan_controllers(plan, session, mgmt)
            except EksinfError as exc:
                warn(f"the ACK controllers' permissions UNKNOWN: {exc.message}")
        refusal = verdict.error() if verdict is not None and not verdict.allowed else None
        if json_out:
            report: dict[str, Any] = {"plan": lines, "current": current, "changed": False}
            report["controllers"] = verdict.as_json() if verdict else None
            if refusal is not None:
                report.update(error=refusal.message, hint=refusal.hint, exit=refusal.exit_code)
            emit_json(report)
        else:
            for line in lines:
                typer.echo(line)
            if verdict is not None:
                typer.echo(
                    f"preflight: {verdict.line}"
                    + (" -> teardown refuses (exit 3)" if refusal else "")
                )
            if current is not None:
                typer.echo(f"now billing: {', '.join(current['billing']) or 'nothing'}")
                typer.echo(
                    f"now blocking a VPC delete: {', '.join(current['blockers']) or 'nothing'}"
                )
                for item in current["notTheStacks"]:
                    typer.echo(
                        f"left: not the stack's: {item['kind']} {item['id']} ({item['why']})"
                    )
            typer.echo("This destroys real AWS infrastructure.")
        if refusal is not None:
            raise refusal
        nothing_changed()
        return
    kube = (
        KubeClient.from_kubeconfig(plan.kube_path, session, context)
        if plan.kube_path.is_file()
        else None
    )
    with stack_config(stack.root) as config:
        outcomes = td.run(
            plan,
            session,
            scope,
            kube,
            config,
            td.Timing(wait_timeout, poll),
            delete_config,
            say=progress,
        )
    finals = [o.final for o in outcomes if o.final is not None]
    for final in finals:
        for eip in final.idle_eips:
            warn(
                f"idle Elastic IP {eip['publicIp']} ({eip['allocationId']}) bills while unattached"
                + (" (carries the stack tag)" if eip["stack"] else "")
            )
    clean = all(f.clean for f in finals)
    if json_out:
        emit_json({"changed": True, "planes": [o.as_json() for o in outcomes], "clean": clean})
    else:
        for final in finals:
            for item in final.not_ours:
                typer.echo(f"left: not the stack's: {item.line}")
            if not final.clean:
                typer.echo("left: " + ", ".join(final.billing + final.blockers))
                continue
            vpcs = (
                f" (non-billing VPC(s) still present: {', '.join(final.vpcs)})"
                if final.vpcs
                else ""
            )
            typer.echo(
                f"clean: nothing billing left for stack {scope.stack} in {scope.region}{vpcs}"
            )
        if not finals:
            typer.echo("workload plane drained: no instance of the stack left")
    if not clean:
        raise EksinfError("teardown incomplete: see what is left above", exit_code=1)
