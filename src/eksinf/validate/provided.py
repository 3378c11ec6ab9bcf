"""CRDs the target cluster provides (components.yaml `clusterCRDs`): an EKS add-on installs them,
the stack never renders or applies them. Each is pinned by sha256 in charts.lock and resolved
like any pinned manifest (cache, offline mirror, URL), so `validate` and a release's admission
check the stack's custom resources against the schema the cluster serves.

The parsed documents are cached beside the bytes (`<sha256>.json`): a YAML parse of the
operator's 450 KB CRD costs ~80 ms on every run, reading the JSON ~2 ms.
"""

from __future__ import annotations

import json
from typing import Any


def _docs(stack: Any, spec: Any, mirror: Any, lock: dict) -> list[dict]:
    from .. import manifests
    from ..atomic import write_file
    from ..charts import cache_dir
    from ..yamlio import load_docs

    entry = lock.get((spec.url, spec.version))
    parsed = cache_dir().parent / "manifests" / f"{entry.sha256}.json" if entry else None
    if parsed is not None and parsed.is_file():
        try:
            return json.loads(parsed.read_text(encoding="utf-8"))
        except ValueError:
            pass  # a damaged cache entry: parse the verified bytes again
    resolved = manifests.resolve(stack, spec, mirror, lock)  # checks the pin, or exits 3/4
    docs = [d for d in load_docs(resolved.text, spec.mirror_file) if isinstance(d, dict)]
    write_file(
        cache_dir().parent / "manifests" / f"{resolved.sha256}.json",
        json.dumps(docs, sort_keys=True).encode("utf-8"),
    )
    return docs


def cluster_crd_units(stack: Any) -> dict[str, list[dict]]:
    """The documents of every CRD a component says the cluster provides, keyed like units
    (admission.crds_of reads their served schemas)."""
    specs = [(c.name, s) for c in stack.components for s in c.cluster_crds]
    if not specs:
        return {}
    from .. import manifests

    lock = manifests.read_lock(stack)
    mirror = manifests.mirror_dir()
    return {
        f"{component} clusterCRDs {spec.name} {spec.version} (pinned)": _docs(
            stack, spec, mirror, lock
        )
        for component, spec in specs
    }
