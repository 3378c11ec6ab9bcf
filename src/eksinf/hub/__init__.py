"""The configuration hub: the `Hub` protocol and its two backends.

`open_hub` picks the backend: `--hub local|cub` (the argument, else this run's option), else
`hub:` in `<stack>/.eksinf/config.yaml`, else `default_backend()`: cub when run as `cub eksinf`
(cub's plugin environment), otherwise local (an SQLite file at `<stack>/.eksinf/hub.db`, or
`hub_path:` from the config file).
"""

from __future__ import annotations

from pathlib import Path

from eksinf.model.config import CONFIG_FILE, HUB_BACKENDS, read_config
from eksinf.publish.plugin import under_cub

from ..errors import CONTRACT, USAGE, EksinfError
from .protocol import Hub

BACKENDS = HUB_BACKENDS
__all__ = ["CONFIG_FILE", "BACKENDS", "Hub", "open_hub", "read_config", "use_backend"]


def default_backend() -> str:
    """The hub with no --hub and no `hub:` in the config: ConfigHub through cub when cub runs
    eksinf as its plugin (the Go original's only hub), else the embedded one."""
    return "cub" if under_cub() else "local"


# This run's --hub (cli.common sets it as the option is parsed), so that a hub opened deep in a
# flow (enroll, teardown) is the one the user named, as much as a hub command's own.
_run_choice: str | None = None


def use_backend(choice: str | None) -> None:
    """Set (or, with None, clear) the backend every later open_hub in this run defaults to."""
    global _run_choice
    _run_choice = choice


def resolve_backend(root: Path, choice: str | None = None) -> str:
    """The backend a run uses, decided once: `choice` (--hub), else this run's option, else the
    config file's `hub:`, else `default_backend()`."""
    backend = choice or _run_choice or read_config(root).get("hub") or default_backend()
    if backend not in BACKENDS:
        raise EksinfError(
            f"unknown hub backend {backend!r}", f"Use one of: {', '.join(BACKENDS)}.", USAGE
        )
    return str(backend)


def hub_exists(root: Path, backend: str) -> bool:
    """Whether the stack has a hub of `backend` to open: a local hub is a file, and opening it
    would create one; ConfigHub is always there."""
    if backend != "local":
        return True
    return _hub_file(root).exists()


def _hub_file(root: Path) -> Path:
    """The local hub's database file: the config file's `hub_path:` (relative to the stack), else
    the default."""
    from .local import DEFAULT_PATH

    value = read_config(root).get("hub_path", DEFAULT_PATH)
    if not isinstance(value, str | Path):
        raise EksinfError(
            f"{root / CONFIG_FILE}: hub_path is {value!r}, not a file path",
            "Write `hub_path: FILE` (relative to the stack, or absolute), or remove the key.",
            CONTRACT,
        )
    return root / value


def open_hub(root: Path, choice: str | None = None) -> Hub:
    backend = resolve_backend(root, choice)
    if backend == "cub":
        from .cub import CubHub

        return CubHub(root)
    from .local import LocalHub

    return LocalHub(_hub_file(root))
