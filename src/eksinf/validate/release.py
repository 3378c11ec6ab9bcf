"""A release's admission: the units a hub space publishes, checked before they are published.

A release is resolved: every value is written in, so a placeholder anywhere is invalid. Custom
resources are checked against the stack's committed CRDs (a release of the karpenter space
carries Karpenter's CRDs, but the aws-network release needs ACK's from ack-controllers) and the
pinned CRDs the target cluster provides (validate.provided).
"""

from __future__ import annotations

from typing import Any

from ..model import configs
from .admission import Admission, Report, crds_of
from .provided import cluster_crd_units


def check_release(stack: Any, space: str, units: dict[str, list[dict]]) -> Report:
    """`units`: slug -> documents, as the space would publish them."""
    crds = {
        **crds_of(cluster_crd_units(stack)),
        **crds_of(configs.read_units(stack.configs_dir)),
        **crds_of(units),
    }
    admission = Admission(crds, stack.kube_version)
    return admission.check_units(units, lambda slug: f"release {space}/{slug}.yaml")
