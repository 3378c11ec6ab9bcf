"""Which Helm engine a run uses and what it is, known without loading it.

Loading the in-process SDK's native library costs ~80 ms, and importing the engine adapter
(build/helm.py) its own share; `eksinf version` and a render served from the cache need only the
engine's identity (what decides its output) and its version, so both live here, apart from it.
"""

from __future__ import annotations

import functools
import os

from eksinf.core import cache

HELM_ENV = "EKSINF_HELM"  # a helm binary to render with instead of the in-process SDK
SDK_NAME = "helm-python-sdk"
SDK_PACKAGE = "helm_python"


def binary_path() -> str | None:
    """The helm binary EKSINF_HELM names, or None for the in-process SDK."""
    return os.environ.get(HELM_ENV) or None


def _sdk_distribution(places: list[str]) -> str:
    """The SDK distribution's metadata folder name (it holds the version), found beside the
    package as an installer leaves it; importlib.metadata (~10 ms to import) when it is not."""
    prefix = SDK_NAME.replace("-", "_") + "-"
    for place in places:
        parent = os.path.dirname(place)
        with_metadata = sorted(
            name
            for name in (os.listdir(parent) if os.path.isdir(parent) else [])
            if name.startswith(prefix) and name.endswith(".dist-info")
        )
        if with_metadata:
            return with_metadata[0]
    from importlib.metadata import version

    return version(SDK_NAME)


@functools.cache
def sdk_identity() -> str:
    """What decides the SDK's output, without loading it: its distribution (name and version)
    and the native library files it loads (HELM_C_LIB, else the packaged lib/), by size and
    mtime. A cached render is looked up under it (build/render.py)."""
    from importlib.util import find_spec

    spec = find_spec(SDK_PACKAGE)
    packaged = list(spec.submodule_search_locations or []) if spec else []
    places = [os.environ.get("HELM_C_LIB", "")]
    places += [os.path.join(p, "lib") for p in packaged]
    files = []
    for place in filter(None, places):
        names = sorted(os.listdir(place)) if os.path.isdir(place) else [""]
        for name in names:
            try:
                st = os.stat(os.path.join(place, name))
            except OSError:
                continue
            files.append(f"{os.path.join(place, name)}:{st.st_size}:{st.st_mtime_ns}")
    # repr, not json: nothing else `eksinf version` does needs the json module
    return repr((SDK_NAME, _sdk_distribution(packaged), tuple(files)))


@functools.cache
def sdk_version() -> str:
    """`<distribution version> (Helm <version>)`: asked of the native library once per
    identity, then read from the cache."""
    key = cache.key(sdk_identity().encode())
    known = cache.get("engine-version", key)
    if known is not None:
        return known.decode()
    from importlib.metadata import version

    from helm_python import _native  # loads the native library

    found = f"{version(SDK_NAME)} (Helm {_native.helm_sdk_version()})"
    cache.put("engine-version", key, found.encode())
    return found
