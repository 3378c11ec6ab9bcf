"""CRDs the target cluster provides (components.yaml `clusterCRDs`): an EKS add-on installs them,
the stack never renders or applies them. Each is pinned by sha256 in charts.lock and resolved
like any pinned manifest (cache, offline mirror, URL), so `validate` and a release's admission
check the stack's custom resources against the schema the cluster serves.

The parsed documents are kept as JSON in the derived-data cache (eksinf.core.cache, HMAC-checked)
under the pinned sha256: a YAML parse of the operator's 450 KB CRD costs ~80 ms on every run,
reading the JSON ~2 ms.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from eksinf.core import cache
from eksinf.core.types import Docs


def _docs(stack: Any, spec: Any, mirror: Any, lock: dict[tuple[str, str], Any]) -> Docs:
    from eksinf.build import manifests
    from eksinf.core.yamlio import load_docs

    entry = lock.get((spec.url, spec.version))
    if entry is not None:
        hit = cache.get("cluster-crds", _key(entry.sha256))
        try:
            docs = json.loads(hit) if hit is not None else None
        except ValueError:
            docs = None  # a damaged cache entry: parse the verified bytes again
        if isinstance(docs, list) and all(isinstance(d, dict) for d in docs):
            return docs
    resolved = manifests.resolve(stack, spec, mirror, lock)  # checks the pin, or exits 3/4
    docs = [d for d in load_docs(resolved.text, spec.mirror_file) if isinstance(d, dict)]
    with contextlib.suppress(ValueError, TypeError):  # not plain JSON: parsed on every run
        cache.put("cluster-crds", _key(resolved.sha256), json.dumps(docs, sort_keys=True).encode())
    return docs


def _key(sha256: str) -> str:
    return cache.key(b"cluster-crds-1", sha256.encode())


def cluster_crd_units(stack: Any) -> dict[str, Docs]:
    """The documents of every CRD a component says the cluster provides, keyed like units
    (admission.crds_of reads their served schemas)."""
    specs = [(c.name, s) for c in stack.components for s in c.cluster_crds]
    if not specs:
        return {}
    from eksinf.build import manifests

    lock = manifests.read_lock(stack)
    mirror = manifests.mirror_dir(root=stack.root)
    return {
        f"{component} clusterCRDs {spec.name} {spec.version} (pinned)": _docs(
            stack, spec, mirror, lock
        )
        for component, spec in specs
    }
