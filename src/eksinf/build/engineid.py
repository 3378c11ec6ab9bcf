"""Which Helm engine a run uses and what it is, known without loading it.

Loading the in-process SDK's native library costs ~80 ms, and importing the engine adapter
(build/helm.py) its own share; `eksinf version` and a render served from the cache need only the
engine's identity (what decides its output) and its version, so both live here, apart from it.
"""

from __future__ import annotations

import functools
import os

from eksinf.core import cache, dist

HELM_ENV = "EKSINF_HELM"  # a helm binary to render with instead of the in-process SDK
SDK_NAME = "helm-python-sdk"
SDK_PACKAGE = "helm_python"


def binary_path() -> str | None:
    """The helm binary EKSINF_HELM names, or None for the in-process SDK."""
    return os.environ.get(HELM_ENV) or None


@functools.cache
def sdk_identity() -> str:
    """What decides the SDK's output, without loading it: its distribution (name and version)
    and the native library files it loads (HELM_C_LIB, else the packaged lib/), by size and
    mtime. A cached render is looked up under it (build/render.py)."""
    packaged = dist.package_dirs(SDK_PACKAGE)
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
    return repr((SDK_NAME, dist.release(packaged, SDK_NAME), tuple(files)))


@functools.cache
def sdk_version() -> str:
    """`<distribution version> (Helm <version>)`: asked of the native library once per
    identity, then read from the cache."""
    key = cache.key(sdk_identity().encode())
    known = cache.get("engine-version", key)
    if known is not None:
        return known.decode()
    from helm_python import _native  # loads the native library

    release = dist.version(dist.package_dirs(SDK_PACKAGE), SDK_NAME)
    found = f"{release} (Helm {_native.helm_sdk_version()})"
    cache.put("engine-version", key, found.encode())
    return found
