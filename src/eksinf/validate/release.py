"""A release's admission: the units a hub space publishes, checked before they are published.

A release is resolved: every value is written in, so a placeholder anywhere is invalid. Custom
resources are checked against the stack's committed CRDs (a release of the karpenter space
carries Karpenter's CRDs, but the aws-network release needs ACK's from ack-controllers) and, for
a release holding a kind those do not serve, the pinned CRDs the target cluster provides
(validate.provided): only then are they read, so a release that needs none (every eks-kind
release) needs neither their cache nor the offline mirror.
"""

from __future__ import annotations

from typing import Any

from ..model import configs
from . import core
from .admission import Admission, Report, crds_of
from .provided import cluster_crd_units


def check_release(stack: Any, space: str, units: dict[str, list[dict]]) -> Report:
    """`units`: slug -> documents, as the space would publish them."""
    crds = {**crds_of(configs.read_units(stack.configs_dir)), **crds_of(units)}
    builtin = core.schema_dir(stack.kube_version)
    unserved = {
        (str(d.get("apiVersion")), str(d.get("kind")))
        for docs in units.values()
        for d in docs
        if isinstance(d, dict) and d.get("kind")
    } - set(crds)
    if any(
        core.builtin_validator(builtin, *key) is None and core.pinned_validator(*key) is None
        for key in unserved
    ):
        crds = {**crds_of(cluster_crd_units(stack)), **crds}
    admission = Admission(crds, stack.kube_version)
    return admission.check_units(units, lambda slug: f"release {space}/{slug}.yaml")
