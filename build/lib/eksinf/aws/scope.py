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
    # Stack tag keys read besides `tag_key` (never written): the Go original's, so a stack it
    # built is counted and torn down.
    also_tag_keys: tuple[str, ...] = ()

    @classmethod
    def from_profile(
        cls,
        profile: Any,
        tag_key: str,
        region: str | None = None,
        also_tag_keys: tuple[str, ...] = (),
    ) -> StackScope:
        spec = profile.spec or {}
        return cls(
            stack=profile.name,
            tag_key=tag_key,
            also_tag_keys=also_tag_keys,
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

    @property
    def tag_keys(self) -> tuple[str, ...]:
        """Every stack tag key read, eksinf's first."""
        return (self.tag_key, *self.also_tag_keys)

    @property
    def tag_text(self) -> str:
        """The stack tags as a plan line names them."""
        return " or ".join(f"{key}={self.stack}" for key in self.tag_keys)

    def stack_tag_value(self, tags: dict[str, str]) -> str | None:
        """The stack a resource's tags name (eksinf's key first), None when they name none."""
        return next((tags[k] for k in self.tag_keys if k in tags), None)

    def tagged_ours(self, tags: dict[str, str]) -> bool:
        return any(tags.get(k) == self.stack for k in self.tag_keys)

    def instance_filter_sets(self) -> list[list[dict[str, Any]]]:
        """EC2 ANDs filters, so "a stack tag OR a cluster tag" is one query each, unioned."""
        return [
            *self.stack_filter_sets(),
            [{"Name": "tag-key", "Values": [self.cluster_tag]}],
            [{"Name": "tag:eks:cluster-name", "Values": [self.cluster]}],
        ]

    def stack_filter_sets(self) -> list[list[dict[str, Any]]]:
        """One filter list per stack tag key: the union of their answers is the stack's."""
        return [[{"Name": f"tag:{key}", "Values": [self.stack]}] for key in self.tag_keys]
