"""Target commands: `target add|list|remove` (a cluster from a kubeconfig) and `mgmt up` (the
management cluster on kind). Parse, call `eksinf.targets` / `eksinf.aws.argocd`, format."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import typer

from ..errors import ENVIRONMENT, EksinfError, shell_command
from ..model.targets import DEFAULT_KIND, KIND_HELP, target_kind
from .aws import ARGOCD_TIMEOUT_OPTION, YES_OPTION, nothing_changed
from .common import HUB_OPTION, JSON_OPTION, emit_json, progress, stack_context

ARGOCD_NS_OPTION = typer.Option("argocd", "--argocd-namespace", help="Argo CD's namespace.")
KIND_OPTION = typer.Option(DEFAULT_KIND, "--kind", help=KIND_HELP)
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


def _registry(stack, oci_registry: str | None) -> str:
    import os

    return oci_registry or os.environ.get("EKSINF_REGISTRY") or stack.versions.get("REGISTRY", "")


@target_app.command("add")
def target_add_cmd(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Target name: the hub space and the kubeconfig's name."),
    plane: str = typer.Option(..., "--plane", help="mgmt or workload."),
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
    hub_choice: str | None = HUB_OPTION,  # read by open_hub (hub.use_backend)
    json_out: bool = JSON_OPTION,
) -> None:
    """Register a cluster as a target (hub space NAME, target NAME/target): install Argo CD when
    absent, apply the root Application, keep the kubeconfig. Idempotent."""
    from ..flows import targets

    run = stack_context(ctx, hub=hub_choice)
    stack = run.stack
    targets.check_plane(plane)  # usage errors open no hub
    chosen = target_kind(kind)
    targets.load_kubeconfig(kubeconfig, context)
    with run.open_hub() as hub:
        info = targets.add(
            hub,
            stack.root,
            name,
            plane,
            kubeconfig,
            _registry(stack, oci_registry),
            context,
            kind=chosen,
            argocd_namespace=argocd_namespace,
            install_argocd=not no_argocd,
            argocd_timeout=argocd_timeout,
            oci_credentials=_oci_credentials(),
            say=progress,
        )
    if json_out:
        emit_json(info.as_json())
        return
    _print_target(info)


def _oci_credentials() -> tuple[str, str] | None:
    import os

    user, password = os.environ.get("EKSINF_OCI_USERNAME"), os.environ.get("EKSINF_OCI_PASSWORD")
    return (user, password) if user and password else None


def _print_target(info) -> None:
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
    hub_choice: str | None = HUB_OPTION,  # read by open_hub (hub.use_backend)
    json_out: bool = JSON_OPTION,
) -> None:
    """Targets added with `target add` / `mgmt up`."""
    from ..flows import targets

    run = stack_context(ctx, hub=hub_choice)
    stack = run.stack
    with run.open_hub() as hub:
        rows = targets.list_targets(hub, stack.root)
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
    hub_choice: str | None = HUB_OPTION,  # read by open_hub (hub.use_backend)
) -> None:
    """Remove a target's hub spaces and kept kubeconfig (refused while variants are bound)."""
    from ..flows import targets

    run = stack_context(ctx, hub=hub_choice)
    stack = run.stack
    with run.open_hub() as hub:
        info = targets.info(hub, stack.root, name)
        if not yes:
            typer.echo(
                f"plan: delete spaces {info.apps_space} and {name}, and {info.kubeconfig}; "
                "the cluster itself is left alone"
            )
            nothing_changed()
            return
        for item in targets.remove(hub, stack.root, name):
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
    hub_choice: str | None = HUB_OPTION,  # read by open_hub (hub.use_backend)
    json_out: bool = JSON_OPTION,
) -> None:
    """Create the management cluster with kind (when absent), add it as the mgmt target and
    install the pinned Argo CD into it (when absent)."""
    from ..flows import targets

    missing = targets.missing_tools()
    if missing:
        raise EksinfError(
            f"mgmt up needs {' and '.join(missing)} on PATH",
            hint="Install kind (https://kind.sigs.k8s.io) and a container runtime, or bring a "
            "cluster of your own: eksinf target add NAME --plane mgmt --kubeconfig FILE.",
            exit_code=ENVIRONMENT,
        )
    run = stack_context(ctx, hub=hub_choice)
    stack = run.stack
    cluster = f"eksinf-{name}"
    existing = _kind(["get", "clusters"]).split()
    with tempfile.TemporaryDirectory(prefix="eksinf-kind-") as tmp:
        config = Path(tmp) / "kubeconfig"
        if cluster in existing:
            progress(f"kind cluster {cluster} exists")
            config.write_text(_kind(["get", "kubeconfig", "--name", cluster]))
        else:
            progress(f"creating kind cluster {cluster} (this takes a minute)")
            _kind(["create", "cluster", "--name", cluster, "--kubeconfig", str(config)])
        with run.open_hub() as hub:
            info = targets.add(
                hub,
                stack.root,
                name,
                "mgmt",
                config,
                _registry(stack, oci_registry),
                argocd_namespace=argocd_namespace,
                install_argocd=not no_argocd,
                argocd_timeout=argocd_timeout,
                oci_credentials=_oci_credentials(),
                say=progress,
            )
    body = {"cluster": cluster, "created": cluster not in existing, **info.as_json()}
    if json_out:
        emit_json(body)
        return
    typer.echo(f"mgmt cluster {cluster} ({'created' if body['created'] else 'existing'})")
    _print_target(info)


def _kind(args: list[str]) -> str:
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
