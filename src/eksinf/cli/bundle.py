"""Publishing commands: bundle, push, pull, tags."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..model.digest import oci_digest
from ..model.names import STATE_DIR
from .common import JSON_OPTION, emit_json, progress, stack_context, state

# oci and bundle pull in requests: each command imports them when it runs.
if TYPE_CHECKING:
    from eksinf.model.stack import Stack

COMPONENT_OPTION = typer.Option(
    None, "--component", "-c", metavar="<name>", help="Only this component (repeatable)."
)
DEFAULT_LAYOUT = Path(STATE_DIR) / "oci"


def register(app: typer.Typer) -> None:
    app.command("bundle")(bundle_cmd)
    app.command("push")(push_cmd)
    app.command("pull")(pull_cmd)
    app.command("tags")(tags_cmd)


def bundle_cmd(
    ctx: typer.Context,
    components: list[str] = COMPONENT_OPTION,
    out: Path = typer.Option(
        None, "--out", metavar="<dir>", help="Write here instead of bundles/.", file_okay=False
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """Write bundles/<component>.tar.gz for each rendered component (reproducible bytes).

    The flattening guard runs on configs/ first; nothing is written if it finds a hazard.
    """
    from eksinf.flows.bundle import build_bundles

    bundles = build_bundles(stack_context(ctx).stack, components or None, out)
    if json_out:
        emit_json({"bundles": [b.as_dict() for b in bundles]})
        return
    for b in bundles:
        progress(f"{b.path}  {b.size} bytes  sha256:{b.sha256}")
    progress(f"bundled {len(bundles)} component(s)")


def source_url(stack: Stack) -> str:
    """Where the stack's source lives, for the `source` annotation: CI's repository, else git."""
    if os.environ.get("GITHUB_REPOSITORY"):
        server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
        return f"{server}/{os.environ['GITHUB_REPOSITORY']}"
    try:
        url = subprocess.run(
            ["git", "-C", str(stack.root), "remote", "get-url", "origin"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return url if url.startswith("https://") else ""  # never leak ssh user names or tokens


def push_cmd(
    ctx: typer.Context,
    registry: str = typer.Option(
        None,
        "--registry",
        metavar="<ref>",
        envvar="EKSINF_REGISTRY",
        help="Base: host[:port]/path or oci-layout:DIR; each component goes to "
        "<base>/<component>. Default: $EKSINF_REGISTRY, else oci-layout:.eksinf/oci in the stack.",
    ),
    components: list[str] = COMPONENT_OPTION,
    version: str = typer.Option(
        None,
        "--version",
        metavar="<tag>",
        help="Immutable version tag (default: <tool version>-<12 hex of the bundle digest>).",
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """Bundle and push each component as an OCI artifact, tagged `latest` and its version.

    Identical content keeps its manifest digest and is reported as unchanged. A version tag that
    already holds different content is refused.
    """
    from eksinf.flows.bundle import Published, build_bundles, oci, publish

    stack = stack_context(ctx).stack
    base = registry or f"{oci.LAYOUT_PREFIX}{stack.root / DEFAULT_LAYOUT}"
    bundles = build_bundles(stack, components or None)

    def report(p: Published) -> None:
        what = "unchanged" if p.result.unchanged else "pushed"
        progress(
            f"{p.bundle.component}: {what} {p.result.ref}@{p.result.manifest_digest} "
            f"(tags {', '.join(p.result.tags)})"
        )

    done = publish(
        stack, bundles, base, version=version, source=source_url(stack), on_pushed=report
    )
    if json_out:
        emit_json({"registry": base, "pushed": [p.as_dict() for p in done]})


def pull_cmd(
    ctx: typer.Context,
    ref: str = typer.Argument(
        ..., metavar="REF", help="host[:port]/repo[:tag|@digest] or oci-layout:DIR[:tag]"
    ),
    out: Path = typer.Option(
        ...,
        "--out",
        metavar="<dir>",
        help="Unpack here: a new or empty folder, or one an earlier pull wrote (replaced whole).",
    ),
    digest: str = typer.Option(
        None, "--digest", metavar="<sha256:hex>", help="Refuse unless the manifest has this digest."
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """Pull a bundle, verify its digests and unpack it safely (regular files only)."""
    from eksinf.flows.bundle import ANNOTATION_PREFIX, BASE, KIND_ANNOTATION, oci, safe_unpack

    pulled = oci.pull(ref, expect_digest=digest)
    files = safe_unpack(pulled.blob, out, stack_root=state(ctx).stack_root())
    kind = pulled.annotations.get(KIND_ANNOTATION)
    warning = None
    if kind == BASE:
        count = pulled.annotations.get(f"{ANNOTATION_PREFIX}placeholders", "?")
        warning = (
            f"{ref} is a base bundle ({count} placeholder values): not for kubectl apply, Argo CD "
            "or Flux. Install it into a hub (eksinf install --from) and consume the space's "
            "release (docs/publishing.md#bases-and-releases)."
        )
        progress(f"warning: {warning}")
    if json_out:
        emit_json(
            {
                "ref": ref,
                "out": str(out),
                "manifestDigest": pulled.manifest_digest,
                "layerDigest": oci_digest(pulled.blob),
                "title": pulled.title,
                "annotations": pulled.annotations,
                "kind": kind,
                "warning": warning,
                "files": files,
            }
        )
        return
    progress(f"pulled {ref}@{pulled.manifest_digest}: {len(files)} file(s) into {out}")


def tags_cmd(
    ref: str = typer.Argument(
        ..., metavar="REF", help="Repository: host[:port]/repo or oci-layout:DIR"
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """List the tags of a bundle repository."""
    from eksinf.flows.bundle import oci

    tags = oci.list_tags(ref)
    if json_out:
        emit_json({"ref": ref, "tags": tags})
        return
    for tag in tags:
        typer.echo(tag)
