"""Which release of an installed distribution a run uses, known without importlib.metadata
(~10 ms to import, more than `eksinf version` or `eksinf components` take otherwise)."""

from __future__ import annotations

import os


def release(package_dirs: list[str], distribution: str) -> str:
    """The distribution's metadata folder name (`<name>-<version>.dist-info`), found beside its
    package's folder as an installer leaves it; importlib.metadata's version when none is."""
    prefix = distribution.replace("-", "_").lower() + "-"
    for place in package_dirs:
        parent = os.path.dirname(place)
        found = sorted(
            name
            for name in (os.listdir(parent) if os.path.isdir(parent) else [])
            if name.lower().startswith(prefix) and name.endswith(".dist-info")
        )
        if found:
            return found[0]
    from importlib.metadata import version

    return version(distribution)


def package_dirs(package: str) -> list[str]:
    """Where `package` is imported from (without importing it)."""
    from importlib.util import find_spec

    spec = find_spec(package)
    return list(spec.submodule_search_locations or []) if spec else []
