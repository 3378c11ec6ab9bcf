"""Target commands: `target add|list|remove` (a cluster from a kubeconfig) and `mgmt up` (the
management cluster on kind). Parse, call flows/targets.py, format."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..errors import shell_command
from ..model.targets import DEFAULT_KIND, KIND_HELP, KINDS, TARGET_PLANES
from .aws import ARGOCD_TIMEOUT_OPTION, YES_OPTION, nothing_changed
from .common import HUB_OPTION, JSON_OPTION, emit_json, one_of, stack_context

if TYPE_CHECKING:
    from ..flows.targets import TargetInfo

ARGOCD_NS_OPTION = typer.Option("argocd", "--argocd-namespace", help="Argo CD's namespace.")
KIND_OPTION = typer.Option(DEFAULT_KIND, "--kind", metavar=one_of(KINDS), help=KIND_HELP)
NO_ARGOCD_OPTION = typer.Option(
    False, "--no-argocd", help="Do not install Argo CD when it is absent (only check it)."
)

target_app = typer.Typer(
    help="Clusters the hub deploys to, from a kubeconfig.", no_args_is_help=True
)
mgmt_app = typer.Typer(help="The management cluster (kind, with Argo CD).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(target_app, name="target")
    app.add_typer(mgmt_app, name="mgmt")


@target_app.command("add")
def target_add_cmd(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Target name: the hub space and the kubeconfig's name."),
    plane: str = typer.Option(
        ..., "--plane", metavar=one_of(TARGET_PLANES), help="mgmt or workload."
    ),
    kubeconfig: Path = typer.Option(
        None,
        "--kubeconfig",
        help="The cluster's kubeconfig. Default: the files KUBECONFIG lists, merged as kubectl "
        "merges them, else ~/.kube/config.",
    ),
    context: str = typer.Option(
        None, "--context", help="The kubeconfig context to use. Default: its current-context."
    ),
    kind: str = KIND_OPTION,
    oci_registry: str = typer.Option(
        None, "--oci-registry", help="Registry Argo CD pulls releases from. Default: REGISTRY."
    ),
    argocd_namespace: str = ARGOCD_NS_OPTION,
    no_argocd: bool = NO_ARGOCD_OPTION,
    argocd_timeout: float = ARGOCD_TIMEOUT_OPTION,
    hub_choice: str | None = HUB_OPTION,  # the context's hub backend
    json_out: bool = JSON_OPTION,
) -> None:
    """Register a cluster as a target (hub space NAME, target NAME/target): install Argo CD when
    absent, apply the root Application, keep the kubeconfig. Idempotent."""
    from ..flows import targets

    run = stack_context(ctx, hub=hub_choice)
    opts = targets.AddOptions(
        name,
        plane,
        kubeconfig,
        context,
        kind,
        oci_registry,
        argocd_namespace,
        not no_argocd,
        argocd_timeout,
    )
    info = targets.add_target(run, opts)
    if json_out:
        emit_json(info.as_json())
        return
    _print_target(info)


def _print_target(info: TargetInfo) -> None:
    argo = info.argocd or {}
    typer.echo(f"target {info.target} ({info.plane}, {info.kind}); kubeconfig {info.kubeconfig}")
    typer.echo(
        f"argocd: {argo.get('action')} ({argo.get('image') or 'none'}): {argo.get('detail')}"
    )
    for item in info.applied:
        typer.echo(f"applied {item}")
    typer.echo(
        "deploy with: "
        + shell_command("eksinf", "deploy", "--plane", info.plane, "--target", info.target)
    )


@target_app.command("list")
def target_list_cmd(
    ctx: typer.Context,
    hub_choice: str | None = HUB_OPTION,  # the context's hub backend
    json_out: bool = JSON_OPTION,
) -> None:
    """Targets added with `target add` / `mgmt up`."""
    from ..flows import targets

    rows = targets.targets_of(stack_context(ctx, hub=hub_choice))
    if json_out:
        emit_json({"targets": [r.as_json() for r in rows]})
        return
    for r in rows:
        typer.echo(f"{r.target:<32} {r.plane:<9} {r.kind:<9} {r.kubeconfig or '(no kubeconfig)'}")
    if not rows:
        typer.echo("no targets (add one with: eksinf target add NAME --plane P --kubeconfig F)")


@target_app.command("remove")
def target_remove_cmd(
    ctx: typer.Context,
    name: str = typer.Argument(...),
    yes: bool = YES_OPTION,
    hub_choice: str | None = HUB_OPTION,  # the context's hub backend
) -> None:
    """Remove a target's hub spaces and kept kubeconfig (refused while variants are bound)."""
    from ..flows import targets

    run = stack_context(ctx, hub=hub_choice)
    info = targets.target_info(run, name)
    if not yes:
        typer.echo(
            f"plan: delete spaces {info.apps_space} and {name}, and {info.kubeconfig}; "
            "the cluster itself is left alone"
        )
        nothing_changed()
        return
    for item in targets.remove_target(run, name):
        typer.echo(f"removed {item}")


@mgmt_app.command("up")
def mgmt_up_cmd(
    ctx: typer.Context,
    name: str = typer.Option(
        "mgmt", "--name", help="Target name; the kind cluster is eksinf-NAME."
    ),
    argocd_namespace: str = ARGOCD_NS_OPTION,
    no_argocd: bool = NO_ARGOCD_OPTION,
    argocd_timeout: float = ARGOCD_TIMEOUT_OPTION,
    oci_registry: str = typer.Option(None, "--oci-registry", help="Default: REGISTRY."),
    hub_choice: str | None = HUB_OPTION,  # the context's hub backend
    json_out: bool = JSON_OPTION,
) -> None:
    """Create the management cluster with kind (when absent), add it as the mgmt target and
    install the pinned Argo CD into it (when absent)."""
    from ..flows import targets

    targets.require_tools()  # before the stack is read
    run = stack_context(ctx, hub=hub_choice)
    opts = targets.AddOptions(
        name,
        "mgmt",
        None,
        oci_registry=oci_registry,
        argocd_namespace=argocd_namespace,
        install_argocd=not no_argocd,
        argocd_timeout=argocd_timeout,
    )
    up = targets.mgmt_up(run, opts)
    info, body = up.target, up.as_json()
    if json_out:
        emit_json(body)
        return
    typer.echo(f"mgmt cluster {up.cluster} ({'created' if up.created else 'existing'})")
    _print_target(info)
