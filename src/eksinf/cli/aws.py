"""AWS-facing commands: status, creds, enroll, teardown, addon-schemas. Each parses, calls its
flow (flows/status, creds, enroll, teardown, addons, serving) with a StackContext, and formats."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..errors import USAGE, EksinfError, shell_command
from ..model.names import apps_space
from ..model.targets import (
    DEFAULT_KIND,
    HYPERPOD_GROUPS,
    KIND_HELP,
    KINDS,
    TARGET_PLANES,
    kinds_with,
    target_kind,
)
from .addonschemas import addon_schemas_app
from .common import (
    AWS_PROFILE_OPTION,
    HUB_OPTION,
    JSON_OPTION,
    REGION_OPTION,
    emit_json,
    one_of,
    print_table,
    progress,
    stack_context,
)

# The flows pull in boto3/botocore and requests (~0.2 s): each command imports the one it
# calls, so `eksinf --help` and the build commands never load them.
if TYPE_CHECKING:
    from ..flows.context import StackContext
    from ..flows.creds import MgmtCluster, UserCreated
    from ..flows.enroll import ContractReport
    from ..flows.teardown import TeardownDone, TeardownPreview

creds_app = typer.Typer(
    help="AWS credentials for the ACK controllers (the Secret aws-creds on the mgmt cluster).",
    no_args_is_help=True,
)


enroll_app = typer.Typer(
    help="Check a bring-your-own EKS cluster against the contract and wire it to Argo CD. "
    "Never creates or destroys a cluster.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.command("status")(status_cmd)
    app.add_typer(addon_schemas_app, name="addon-schemas")
    app.add_typer(creds_app, name="creds")
    app.add_typer(enroll_app, name="enroll")
    app.command("teardown")(teardown_cmd)


def warn(message: str) -> None:
    progress(f"warning: {message}")


ARGOCD_NS_OPTION = typer.Option("argocd", "--argocd-namespace", help="Argo CD's namespace.")
CONTEXT_OPTION = typer.Option(
    None, "--context", help="The --kubeconfig context to use. Default: its current-context."
)


STATUS_PLANE_OPTION = typer.Option(
    None,
    "--plane",
    metavar=one_of(TARGET_PLANES),
    help="mgmt or workload: report whether the plane serves, from its cluster only (Argo CD, "
    "ACK, Karpenter, model endpoints) instead of EC2 and costs.",
)
STATUS_KIND_OPTION = typer.Option(
    DEFAULT_KIND,
    "--kind",
    metavar=one_of(KINDS),
    help="The target's kind: which components --plane reads; hyperpod-eks also lists and "
    "prices the HyperPod cluster's instances (spec.hyperpod.clusterName).",
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
    plane: str = STATUS_PLANE_OPTION,
    variant: str = typer.Option("dev", "--variant", help="With --plane: the deployed variant."),
    kind: str = STATUS_KIND_OPTION,
    argocd_namespace: str = ARGOCD_NS_OPTION,
    watch: float = typer.Option(
        0, "--watch", help="With --plane: refresh every SECONDS until interrupted."
    ),
    count: int = typer.Option(0, "--count", help="With --watch: stop after N reports (0: never)."),
    json_out: bool = JSON_OPTION,
) -> None:
    """What this stack runs on EC2 and what it costs (scoped to the stack's tags); with --plane,
    whether the plane serves."""
    from ..flows import status as flow

    chosen = target_kind(kind)
    if plane is not None:
        from ..flows import serving

        serving.check_plane(plane)  # before the stack is read
        _serving_status(
            stack_context(ctx, json_out=json_out),
            plane,
            workload_kubeconfig,
            context,
            variant,
            chosen.name,
            argocd_namespace,
            watch,
            count,
        )
        return
    run = stack_context(ctx, json_out=json_out, region=region, aws_profile=aws_profile)
    opts = flow.StatusOptions(
        chosen.name, workload_kubeconfig, context, mgmt_kubeconfig, mgmt_context
    )
    try:
        result = flow.status(run, opts)
    except flow.StatusUnknown as exc:
        # Unknown is not zero: say UNKNOWN with the reason, never print an empty list.
        if json_out:
            emit_json(exc.body)
        else:
            typer.echo(f"cost UNKNOWN: {exc.reason}")
        raise
    if json_out:
        emit_json(result.as_json())
        return
    for line in result.lines():
        typer.echo(line)
    progress(result.prices_note)


def _serving_status(
    run: StackContext,
    plane: str,
    kubeconfig: Path | None,
    context_name: str | None,
    variant: str,
    kind: str,
    argocd_namespace: str,
    watch: float,
    count: int,
) -> None:
    from ..flows import serving

    def show(report: dict[str, Any]) -> None:
        if run.output.json:
            emit_json(report)
        else:
            for line in serving.format_text(report):
                typer.echo(line)

    opts = serving.WatchOptions(
        plane, kubeconfig, context_name, variant, kind, argocd_namespace, watch, count
    )
    serving.watch_plane(run, opts, show)


# ---- creds -----------------------------------------------------------------------------------

MGMT_KUBECONFIG_OPTION = typer.Option(
    None,
    "--kubeconfig",
    help="Kubeconfig of the management (kind) cluster. "
    "Default: .eksinf/clusters/mgmt.kubeconfig in the stack directory.",
)
USER_OPTION = typer.Option(None, "--user-name", help="IAM user name. Default: <stack>-ack.")
YES_OPTION = typer.Option(False, "--yes", help="Carry out the change (without it: print the plan).")


def _mgmt(kubeconfig: Path | None, context: str | None) -> MgmtCluster:
    from ..flows.creds import MgmtCluster

    return MgmtCluster(kubeconfig, context)


ARGOCD_TIMEOUT_OPTION = typer.Option(
    300,
    "--argocd-timeout",
    help="Seconds to wait for an installed Argo CD to become Available; then exit 4 saying "
    "what the cluster lacks (nodes, pods).",
)


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
    from ..flows import creds as flow

    run = stack_context(ctx, json_out=json_out, aws_profile=aws_profile)
    found = flow.status(run, _mgmt(kubeconfig, context))
    if json_out:
        emit_json(found.as_json())
        return
    info, namespace = found.info, found.namespace
    if not info.present:
        typer.echo(f"secret {namespace}/{flow.SECRET_NAME}: MISSING")
        progress("write one with: eksinf creds use-existing (or creds create-user --yes)")
        return
    kind = "temporary session" if info.temporary else "long-lived access key"
    typer.echo(f"secret {namespace}/{flow.SECRET_NAME}: key {info.access_key_id} ({kind})")
    if info.expires_at:
        typer.echo(f"expires at {info.expires_at}" + (" (EXPIRED)" if info.expired else ""))
        if info.expired:
            warn("expired: run `aws sso login && eksinf creds refresh`")
    typer.echo(f"source: {info.source or 'unknown'}")
    typer.echo(f"pods in {namespace}: {', '.join(found.pods) or 'none'}")


def _write_own_credentials(
    ctx: typer.Context,
    kubeconfig: Path | None,
    context: str | None,
    aws_profile: str | None,
    hint: str,
) -> None:
    from ..flows import creds as flow

    run = stack_context(ctx, aws_profile=aws_profile)
    own = flow.own_credentials(run, _mgmt(kubeconfig, context), hint)
    typer.echo(f"account {own.account}, identity {own.arn}, key {own.creds['AccessKeyId']}")
    if own.temporary:
        typer.echo(f"temporary credentials; expire at {own.creds.get('Expiration', 'unknown')}")
        left = own.minutes_left
        if left is not None and left < 30:
            warn(
                f"these credentials expire in {left} min; provisioning takes ~25 min and the "
                "controllers stop when they expire (refresh with `eksinf creds refresh`)"
            )
    _report_restart(flow.hand_over(run, own))


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
    from ..flows import creds as flow

    run = stack_context(ctx, aws_profile=aws_profile)
    plan = flow.user_plan(run, flow.UserOptions(user_name, _mgmt(kubeconfig, context)))
    typer.echo(f"account {plan.account}, caller {plan.caller}")
    typer.echo(
        f"plan: IAM user {plan.name} (tag {plan.tag}), inline policy "
        f"{flow.INLINE_POLICY} from {plan.policy.path.name}, a new access key (rotating only the "
        f"one eksinf created), Secret {plan.secret}"
    )
    if not yes:
        nothing_changed()
        return
    done: UserCreated = flow.create_user(run, plan)
    _report_restart(done.restarted)
    typer.echo(f"user {done.made.arn} key {done.made.access_key_id} written to the controllers")
    progress(
        "remove later with: "
        + shell_command("eksinf", "creds", "delete-user", "--user-name", plan.name, "--yes")
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
    from ..flows import creds as flow

    run = stack_context(ctx, aws_profile=aws_profile)
    plan = flow.delete_plan(run, flow.UserOptions(user_name, _mgmt(kubeconfig, context)))
    typer.echo(f"plan: delete IAM user {plan.arn}, keys {', '.join(plan.keys) or 'none'}")
    if not yes:
        warn("the ACK controllers lose AWS access if they use this user's key")
        nothing_changed()
        return
    done = flow.delete_user(run, plan)
    gone = done.gone
    typer.echo(
        f"deleted IAM user {gone.user} (keys: {', '.join(gone.keys) or 'none'}; "
        f"policies: {', '.join(gone.policies) or 'none'})"
    )
    if done.secret_unknown is not None:
        warn(f"could not check the controllers' Secret: {done.secret_unknown}")
    elif done.secret_deleted is not None:
        progress(f"deleted Secret {done.secret_deleted}")


@creds_app.command("show-policy")
def creds_show_policy_cmd(ctx: typer.Context, json_out: bool = JSON_OPTION) -> None:
    """Print the scoped IAM policy create-user attaches (linted first)."""
    from ..flows import creds as flow

    policy = flow.policy(stack_context(ctx, json_out=json_out))
    if json_out:
        emit_json({"path": str(policy.path), "policy": policy.doc, "problems": []})
    else:
        typer.echo(policy.text.rstrip("\n"))


# ---- enroll ----------------------------------------------------------------------------------


def _print_checks(report: ContractReport) -> None:
    marks = {"pass": "ok  ", "fail": "FAIL", "warn": "warn", "unknown": "????", "skipped": "skip"}
    for check in report.checks:
        progress(f"{marks[check.status]} {check.name}: {check.detail}  [{check.call}]")


ENROLL_NAME_OPTION = typer.Option(
    None, "--name", help="Target name (also the apps space prefix). Required to enroll."
)

ENROLL_LIST_CHECKS_OPTION = typer.Option(
    False, "--list-checks", help="Print the table of contract rules and exit."
)

ENROLL_MARKDOWN_OPTION = typer.Option(
    False, "--markdown", help="With --list-checks: the table docs/contract.md carries."
)

ENROLL_EKS_CLUSTER_OPTION = typer.Option(
    None, "--eks-cluster", help="EKS cluster name. Default: the profile's clusterName."
)

ENROLL_HYPERPOD_CLUSTER_OPTION = typer.Option(
    None,
    "--hyperpod-cluster",
    help="With --kind hyperpod-eks: the HyperPod cluster, NAME or ARN. Default: the "
    "profile's spec.hyperpod.clusterName.",
)

ENROLL_KUBECONFIG_OPTION = typer.Option(
    None,
    "--kubeconfig",
    help="Use this kubeconfig for the cluster instead of writing one from eks describe-cluster.",
)

ENROLL_GRANT_ACCESS_OPTION = typer.Option(
    False,
    "--grant-access",
    help="Create the caller's missing access entry and/or associate the cluster-admin access policy.",
)

ENROLL_OCI_REGISTRY_OPTION = typer.Option(
    None, "--oci-registry", help="Registry Argo CD pulls releases from. Default: REGISTRY."
)

ENROLL_NO_ARGOCD_OPTION = typer.Option(
    False, "--no-argocd", help="Do not install Argo CD when absent (then it must be there)."
)

ENROLL_WAIT_ENABLEMENT_OPTION = typer.Option(
    None,
    "--wait-enablement",
    metavar="<seconds>",
    min=0,
    help="With --kind hyperpod-eks: while the inference operator's watcher is still "
    "enabling, wait up to SECONDS for it; 0 reads it once. Default: 20 minutes (a "
    "recreated cluster takes over 15). It only warns, never blocks.",
)


@enroll_app.command("cluster")
def enroll_cluster_cmd(
    ctx: typer.Context,
    name: str = ENROLL_NAME_OPTION,
    list_checks: bool = ENROLL_LIST_CHECKS_OPTION,
    markdown: bool = ENROLL_MARKDOWN_OPTION,
    eks_cluster: str = ENROLL_EKS_CLUSTER_OPTION,
    kind: str = typer.Option(DEFAULT_KIND, "--kind", metavar=one_of(KINDS), help=KIND_HELP),
    hyperpod_cluster: str = ENROLL_HYPERPOD_CLUSTER_OPTION,
    region: str = REGION_OPTION,
    kubeconfig: Path = ENROLL_KUBECONFIG_OPTION,
    context: str = CONTEXT_OPTION,
    grant_access: bool = ENROLL_GRANT_ACCESS_OPTION,
    oci_registry: str = ENROLL_OCI_REGISTRY_OPTION,
    argocd_namespace: str = ARGOCD_NS_OPTION,
    no_argocd: bool = ENROLL_NO_ARGOCD_OPTION,
    argocd_timeout: float = ARGOCD_TIMEOUT_OPTION,
    wait_enablement: int | None = ENROLL_WAIT_ENABLEMENT_OPTION,
    aws_profile: str = AWS_PROFILE_OPTION,
    hub_choice: str | None = HUB_OPTION,  # the context's hub backend
    json_out: bool = JSON_OPTION,
) -> None:
    """Check the cluster contract; when it holds, install Argo CD if absent and wire the
    cluster (idempotent)."""
    from ..flows import enroll as flow

    chosen = target_kind(kind)
    if hyperpod_cluster and chosen.capacity != HYPERPOD_GROUPS:
        raise EksinfError(
            "--hyperpod-cluster is only for --kind "
            + " or --kind ".join(kinds_with(HYPERPOD_GROUPS)),
            exit_code=USAGE,
        )
    if list_checks:
        _list_checks(chosen.name, markdown, json_out)
        return
    if not name:
        raise EksinfError("enroll cluster needs --name", exit_code=2)
    run = stack_context(
        ctx, hub=hub_choice, json_out=json_out, region=region, aws_profile=aws_profile
    )
    opts = flow.EnrollOptions(
        name,
        chosen.name,
        eks_cluster,
        hyperpod_cluster,
        kubeconfig,
        context,
        grant_access,
        oci_registry,
        argocd_namespace,
        not no_argocd,
        argocd_timeout,
        wait_enablement,
    )
    checked = flow.check(run, opts)
    report = checked.report
    if not json_out:
        _print_checks(report)
    for check in report.warnings:
        warn(f"{check.name}: {check.detail}" + (f" (fix: {check.fix})" if check.fix else ""))
    lines = checked.missing
    if lines:
        if json_out:
            emit_json({**report.as_json(), "wiring": None})
        else:
            for line in lines:
                typer.echo(line)
        raise checked.refusal()
    wiring = flow.wire(run, checked).wiring
    if json_out:
        emit_json({**report.as_json(), "wiring": wiring})
        return
    _show_wiring(checked.cluster, name, wiring)


def _show_wiring(cluster: str, name: str, wiring: dict[str, Any]) -> None:
    if wiring["argocd"]:
        argo = wiring["argocd"]
        typer.echo(f"argocd: {argo['action']} ({argo['image'] or 'none'}): {argo['detail']}")
    for item in wiring["skipped"]:
        warn(f"skipped {item}")
    typer.echo(f"cluster {cluster} meets the contract; enrolled as {name}")
    typer.echo(f"kubeconfig: {wiring['kubeconfig']}")
    typer.echo(
        f"hub target: {wiring['target']}, kind {wiring['kind']} (apps space {wiring['appsSpace']})"
    )
    for item in wiring["applied"]:
        typer.echo(f"applied {item}")


def _list_checks(kind: str, markdown: bool, json_out: bool) -> None:
    from ..flows import enroll as flow

    if markdown:
        typer.echo(flow.contract_markdown(kind), nl=False)
    elif json_out:
        emit_json({"checks": flow.contract_table(kind)})
    else:
        print_table(flow.contract_table(kind), ("name", "severity", "anchor", "summary"))


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
    hub_choice: str | None = HUB_OPTION,  # the context's hub backend
) -> None:
    """Detach a cluster: remove the root app (orphaning workloads); optionally its hub spaces."""
    from ..flows import enroll as flow

    run = stack_context(ctx, hub=hub_choice, aws_profile=aws_profile)
    spaces = f"; hub spaces {apps_space(name)} and {name}" if delete_spaces else ""
    typer.echo(
        f"plan: delete Application {argocd_namespace}/{apps_space(name)} without "
        f"cascading (workloads and child apps stay) and its repo-creds Secret{spaces}. "
        "The cluster, Argo CD and any access entry are left alone."
    )
    if not yes:
        nothing_changed()
        return
    opts = flow.DetachOptions(name, kubeconfig, context, argocd_namespace, delete_spaces)
    done = flow.detach(run, opts)
    if done.unreachable is not None:
        warn(f"cluster not reachable, in-cluster wiring left in place: {done.unreachable}")
    for item in done.removed:
        typer.echo(f"removed {item}")
    for space in done.deleted_spaces:
        typer.echo(f"deleted hub space {space}")


# ---- teardown --------------------------------------------------------------------------------


def teardown_cmd(
    ctx: typer.Context,
    plane: str = typer.Option(
        None,
        "--plane",
        metavar=one_of(TARGET_PLANES),
        help="workload or mgmt. Default: both, workload first.",
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
    hub_choice: str | None = HUB_OPTION,  # the context's hub backend
    json_out: bool = JSON_OPTION,
) -> None:
    """Destroy the stack's AWS infrastructure and prove nothing billing is left (needs --yes)."""
    from ..flows import teardown as flow

    flow.check_plane(plane)  # before the stack is read
    run = stack_context(
        ctx, hub=hub_choice, json_out=json_out, region=region, aws_profile=aws_profile
    )
    opts = flow.TeardownOptions(
        plane,
        yes,
        delete_config,
        variant,
        kubeconfig,
        context,
        argocd_namespace,
        wait_timeout,
        poll,
        dry_run=dry_run,
    )
    done = flow.teardown(run, opts)
    if isinstance(done, flow.TeardownPreview):
        _show_preview(done, json_out)
        if done.refusal is not None:
            raise done.refusal
        nothing_changed()
        return
    if json_out:
        emit_json(done.as_json())
    else:
        _show_done(done)
    if not done.clean:
        raise EksinfError("teardown incomplete: see what is left above", exit_code=1)


def _show_preview(preview: TeardownPreview, json_out: bool) -> None:
    if json_out:
        emit_json(preview.as_json())
        return
    for line in preview.plan:
        typer.echo(line)
    verdict = preview.controllers
    if verdict is not None:
        typer.echo(
            f"preflight: {verdict.line}"
            + (" -> teardown refuses (exit 3)" if preview.refusal else "")
        )
    current = preview.current
    if current is not None:
        typer.echo(f"now billing: {', '.join(current['billing']) or 'nothing'}")
        typer.echo(f"now blocking a VPC delete: {', '.join(current['blockers']) or 'nothing'}")
        for item in current["notTheStacks"]:
            typer.echo(f"left: not the stack's: {item['kind']} {item['id']} ({item['why']})")
    typer.echo("This destroys real AWS infrastructure.")


def _show_done(done: TeardownDone) -> None:
    for final in done.finals:
        for item in final.not_ours:
            typer.echo(f"left: not the stack's: {item.line}")
        if not final.clean:
            typer.echo("left: " + ", ".join(final.billing + final.blockers))
            continue
        vpcs = f" (non-billing VPC(s) still present: {', '.join(final.vpcs)})" if final.vpcs else ""
        typer.echo(f"clean: nothing billing left for stack {done.stack} in {done.region}{vpcs}")
    if not done.finals:
        typer.echo("workload plane drained: no instance of the stack left")
