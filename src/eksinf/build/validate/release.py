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

from eksinf.build.validate import core
from eksinf.build.validate.admission import Admission, Crd, Report, crds_of
from eksinf.build.validate.provided import cluster_crd_units
from eksinf.model import configs


class ReleaseGate:
    """The admission of one stack's releases, for a command that publishes several: the stack's
    committed units are read once, and releases whose CRDs are the committed ones share one
    Admission (one CEL engine over the CRDs' rules, one memo of checked documents)."""

    def __init__(self, stack: Any) -> None:
        self.stack = stack
        self._committed: dict[tuple[str, str], Crd] | None = None
        self._admissions: dict[tuple, Admission] = {}

    def check(self, space: str, units: dict[str, list[dict]]) -> Report:
        """`units`: slug -> documents, as the space would publish them."""
        if self._committed is None:
            self._committed = crds_of(configs.read_units(self.stack.configs_dir))
        committed = self._committed
        # a release's own CRD whose schema equals the committed one's is taken as that one, so
        # the releases of one stack share an Admission (keyed below by the CRD objects)
        own = {
            key: committed[key] if key in committed and committed[key].schema == crd.schema else crd
            for key, crd in crds_of(units).items()
        }
        crds = {**committed, **own}
        builtin = core.schema_dir(self.stack.kube_version)
        unserved = {
            (str(d.get("apiVersion")), str(d.get("kind")))
            for docs in units.values()
            for d in docs
            if isinstance(d, dict) and d.get("kind")
        } - set(crds)
        if any(not core.has_builtin(builtin, *key) and key not in core.PINNED for key in unserved):
            crds = {**crds_of(cluster_crd_units(self.stack)), **crds}
        identity = tuple(sorted((key, id(crd)) for key, crd in crds.items()))
        admission = self._admissions.get(identity)
        if admission is None:
            admission = self._admissions[identity] = Admission(crds, self.stack.kube_version)
        return admission.check_units(units, lambda slug: f"release {space}/{slug}.yaml")
