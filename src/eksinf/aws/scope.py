"""What "this stack" means on AWS: the names and tags every scoped query filters on.

Built from the platform profile (`StackScope.from_profile`), so no stack name is ever written
in code. Every query that decides something about "our" resources goes through these filters
(DESIGN §7): never region-wide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model.quantity import whole_gib


@dataclass(frozen=True)
class StackScope:
    stack: str  # value of the stack tag (the profile's name)
    tag_key: str  # the stack tag key
    cluster: str
    network: str  # karpenter.sh/discovery value
    region: str
    node_role: str
    gpu_ami_alias: str
    karpenter_role: str = ""
    gpu_root_volume_gib: int | None = None
    model_cache_gib: int | None = None
    # The profile's own clusterName and region: `cluster`/`region` may be overridden on the
    # command line (--eks-cluster, --region), and enroll refuses when they then differ.
    profile_cluster: str = ""
    profile_region: str = ""

    @classmethod
    def from_profile(cls, profile: Any, tag_key: str, region: str | None = None) -> StackScope:
        spec = profile.spec or {}
        return cls(
            stack=profile.name,
            tag_key=tag_key,
            cluster=profile.cluster_name,
            network=profile.network_name,
            region=region or profile.region,
            node_role=profile.node_role_name,
            gpu_ami_alias=profile.gpu_ami_alias,
            karpenter_role=str(spec.get("karpenterRoleName", "")),
            gpu_root_volume_gib=whole_gib(spec.get("gpuRootVolumeSize")),
            model_cache_gib=whole_gib(spec.get("modelCacheSize")),
            profile_cluster=profile.cluster_name,
            profile_region=profile.region,
        )

    @property
    def cluster_tag(self) -> str:
        return f"kubernetes.io/cluster/{self.cluster}"

    def instance_filter_sets(self) -> list[list[dict[str, Any]]]:
        """EC2 ANDs filters, so "stack tag OR cluster tag" is three queries whose union we take."""
        return [
            [{"Name": f"tag:{self.tag_key}", "Values": [self.stack]}],
            [{"Name": "tag-key", "Values": [self.cluster_tag]}],
            [{"Name": "tag:eks:cluster-name", "Values": [self.cluster]}],
        ]

    def stack_filter(self) -> list[dict[str, Any]]:
        return [{"Name": f"tag:{self.tag_key}", "Values": [self.stack]}]
