"""Which release of an installed distribution a run uses, known without importlib.metadata
(~10 ms to import, more than `eksinf version` or `eksinf components` take otherwise)."""

from __future__ import annotations

import os


def release(package_dirs: list[str], distribution: str) -> str:
    """The distribution's metadata folder name (`<name>-<version>.dist-info`), found beside its
    package's folder as an installer leaves it; importlib.metadata's version when none is."""
    found = _dist_info(package_dirs, distribution)
    if found is not None:
        return os.path.basename(found)
    from importlib.metadata import version

    return version(distribution)


def version(package_dirs: list[str], distribution: str) -> str:
    """The distribution's version, as importlib.metadata gives it: the `Version` field of its
    METADATA (core metadata's headers end at the first empty line), read from the folder
    `release` finds; importlib.metadata's answer when there is none."""
    found = _dist_info(package_dirs, distribution)
    if found is not None:
        try:
            with open(os.path.join(found, "METADATA"), encoding="utf-8") as fh:
                for line in fh:
                    if not line.strip():
                        break
                    if line.startswith("Version:"):
                        return line[len("Version:") :].strip()
        except (OSError, ValueError):  # unreadable, or not UTF-8: importlib.metadata decides
            pass
    from importlib.metadata import version as metadata_version

    return metadata_version(distribution)


def _dist_info(package_dirs: list[str], distribution: str) -> str | None:
    prefix = distribution.replace("-", "_").lower() + "-"
    for place in package_dirs:
        parent = os.path.dirname(place)
        found = sorted(
            name
            for name in (os.listdir(parent) if os.path.isdir(parent) else [])
            if name.lower().startswith(prefix) and name.endswith(".dist-info")
        )
        if found:
            return os.path.join(parent, found[0])
    return None


def package_dirs(package: str) -> list[str]:
    """Where `package` is imported from (without importing it)."""
    from importlib.util import find_spec

    spec = find_spec(package)
    return list(spec.submodule_search_locations or []) if spec else []
