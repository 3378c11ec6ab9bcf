"""What `eksinf version` reports: the version, the git commit and the Helm engine.

Kept apart from the build flows so that answering it imports no more than it reads: the
engine's version comes from build/engineid.py (the cache, else the native library once), never
from the engine adapter, unless EKSINF_HELM names a binary to ask.
"""

from __future__ import annotations

from pathlib import Path

from .. import __version__
from ..build import engineid
from ..core.gitinfo import commit_of


def engine_label() -> str:
    """`<engine name> <engine version>` of the engine a render would use."""
    if engineid.binary_path() is not None:
        from ..build.helm import default_engine

        engine = default_engine()
        return f"{engine.name} {engine.version}"
    return f"{engineid.SDK_NAME} {engineid.sdk_version()}"


def version_info() -> dict[str, str]:
    return {
        "version": __version__,
        # the commit of eksinf's own source (a checkout), not of any stack
        "commit": commit_of(Path(__file__).parent) or "unknown",
        "engine": engine_label(),
    }
