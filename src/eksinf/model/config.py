"""The stack's own settings: `<stack>/.eksinf/config.yaml`, read in one place.

Keys: `hub` (local|cub), `hub_path` (the local hub's database file) and `mirror` (the offline
mirror: chart archives in it, the pinned manifests in `manifests/` beside it; a relative path
is relative to the stack). Each setting's precedence is flag > environment variable > this file
> the built-in default. The mirror's built-in default is `../shared/charts` beside the stack,
when that folder exists: where a clone sits beside the shared offline mirror.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

from eksinf.core.types import Doc
from eksinf.core.yamlio import load_mapping_docs
from eksinf.errors import CONTRACT, EksinfError

CONFIG_FILE = Path(".eksinf") / "config.yaml"
HUB_BACKENDS = ("local", "cub")  # the embedded SQLite hub, ConfigHub through cub
KEYS = {
    "hub": "|".join(HUB_BACKENDS),
    "hub_path": "the local hub's database file",
    "mirror": "the offline mirror folder of chart archives",
}
DEFAULT_MIRROR = Path("..") / "shared" / "charts"  # relative to the stack
MIRROR_ENV = "EKSINF_CHART_MIRROR"


def read_config(root: Path) -> Doc:
    """The stack's config file as a mapping ({} when there is none); unknown keys refused."""
    path = root / CONFIG_FILE
    if not path.is_file():
        return {}
    docs = load_mapping_docs(path)
    config = docs[0] if docs else {}
    unknown = set(config) - set(KEYS)
    if unknown:
        raise EksinfError(
            f"{path}: unknown key(s) {', '.join(sorted(unknown))}",
            "Allowed keys: " + ", ".join(f"{k} ({v})" for k, v in KEYS.items()) + ".",
            CONTRACT,
        )
    mirror = config.get("mirror")
    if mirror is not None and (not isinstance(mirror, str) or not mirror):
        raise EksinfError(
            f"{path}: mirror is {mirror!r}, not a folder path",
            "Write `mirror: DIR` (relative to the stack, or absolute), or remove the key.",
            CONTRACT,
        )
    return config


def stack_mirror(root: Path) -> Path | None:
    """The mirror this stack names: config.yaml's `mirror:` (relative to the stack), else
    `../shared/charts` beside the stack when it exists, else None."""
    mirror = read_config(root).get("mirror")
    if mirror is not None:
        return root / cast(str, mirror)  # read_config refused any other type
    default = root / DEFAULT_MIRROR
    return default if default.is_dir() else None


# This run's settings, set by the CLI: the stack it works on (when it loads the stack) and the
# --chart-mirror it was given (as the option is parsed), so a read of a pinned input however deep
# in the run finds the mirror the user named, or the stack's.
_run_root: Path | None = None
_run_mirror: Path | None = None


def use_stack_root(root: Path | None) -> None:
    """Set (or, with None, clear) the stack whose config later reads in this run fall back to."""
    global _run_root
    _run_root = root


def run_stack_root() -> Path | None:
    return _run_root


def use_mirror(path: Path | None) -> None:
    """Set (or, with None, clear) this run's --chart-mirror."""
    global _run_mirror
    _run_mirror = path


def mirror(root: Path | None = None) -> Path | None:
    """The offline mirror (its chart folder): this run's --chart-mirror, else
    $EKSINF_CHART_MIRROR, else the stack's setting (`stack_mirror`) for `root` or this run's
    stack. Pinned manifests sit in `manifests/` beside it, the tool archives in `tools/`."""
    if _run_mirror is not None:
        return _run_mirror
    env = os.environ.get(MIRROR_ENV)
    if env:
        return Path(env)
    root = root if root is not None else _run_root
    return stack_mirror(root) if root is not None else None


def mirror_dir(explicit: Path | None = None, root: Path | None = None) -> Path | None:
    """The chart mirror: `explicit`, else `mirror`: this run's --chart-mirror, else
    $EKSINF_CHART_MIRROR, else the stack's setting (`mirror:` in its .eksinf/config.yaml, else
    ../shared/charts beside it), for the stack `root` or the one this run works on. Here, not in
    build/charts, so a render served from the cache names its mirror without the chart code."""
    return explicit if explicit is not None else mirror(root)
