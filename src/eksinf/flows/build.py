"""The build commands' entry points (version, components, render, guard, verify, charts): each
calls one function of the build layer, so this module hands those on, and keeps the Helm engine,
the cache, the chart code and the upstream manifests behind functions that import them only when
called: a render served from the cache needs none of them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..build import guard
from ..build.render import render_stack
from ..build.units import RenderResult
from ..build.write import write_configs
from ..core.gitinfo import commit_of
from ..core.outdir import claim
from ..model.config import mirror_dir
from ..model.stack import Stack

if TYPE_CHECKING:
    from ..build.validate.ids import Duplicate
    from ..build.verify import Drift

__all__ = [
    "RenderResult",
    "chart_lock",
    "claim",
    "commit_of",
    "default_engine",
    "disable_cache",
    "guard",
    "lock_pins",
    "mirror_dir",
    "drift",
    "duplicate_ids",
    "render_stack",
    "write_configs",
]


def default_engine() -> Any:
    """The Helm engine render uses (its import loads the Helm SDK)."""
    from ..build.helm import default_engine as engine

    return engine()


def disable_cache() -> None:
    """Render from scratch: nothing read from the derived-output cache."""
    from ..core import cache

    cache.disable()


def drift(result: RenderResult) -> Drift:
    """How configs/ differs from `result` (verify's drift gate; render never loads it)."""
    from ..build import verify

    return verify.compare(result)


def duplicate_ids(result: RenderResult) -> list[Duplicate]:
    """Resource ids `result` writes more than once within a plane."""
    from ..build import verify

    return verify.duplicate_ids(result)


def chart_lock(stack: Stack) -> dict[tuple[str, str, str], Any]:
    """charts.lock's chart pins, by (chart, version, repo)."""
    from ..build import charts

    return dict(charts.read_lock(stack))


def lock_pins(stack: Stack, mirror: Path | None) -> tuple[list[Any], list[Any]]:
    """Fetch every chart archive and upstream manifest and pin its sha256 in charts.lock."""
    from ..build import manifests

    chart_pins, manifest_pins = manifests.lock(
        stack, mirror_dir(mirror, stack.root), manifests.mirror_dir(mirror, stack.root)
    )
    return list(chart_pins), list(manifest_pins)
