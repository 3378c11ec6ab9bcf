"""cub installing eksinf as its plugin: the one thing `eksinf` checks before any command (kept
apart from every other flow, so `eksinf --help` imports nothing more)."""

from __future__ import annotations


def handle_plugin_hook(argv0: str) -> bool:
    """Write the plugin manifest when cub runs this executable as its install or upgrade hook;
    False (do nothing) on an ordinary run."""
    from ..publish.plugin import handle_hook

    return bool(handle_hook(argv0))
