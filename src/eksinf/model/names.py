"""How eksinf names what it creates: hub spaces, units, variants, kubeconfigs, and its labels.

Every rule is written once here; callers never spell `f"{component}-{variant}"` themselves, so a
rename is one edit and a reader can find the rule by its name.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import USAGE, EksinfError

BASE = "base"  # the variant every component's units are installed into first
PROFILE_COMPONENT = "platform-profile"
PROFILE_UNIT = "profile"
PROFILE_KIND = "PlatformProfile"

# The Owner label of every space eksinf creates (bases, variants, targets, apps spaces), and the
# `--owner` a cub variant upload passes: one value, so `hub where` and ConfigHub's UI group them.
OWNER_LABEL = "Owner"
OWNER = "EKS Inference"
# The label install puts on every base unit it uploads.
MANAGED_BY = {"managed-by": "eks-inference"}

# Karpenter's discovery tag: subnets and security groups carrying it (value: the network name)
# are the ones a NodeClass's selector terms find.
DISCOVERY_KEY = "karpenter.sh/discovery"
# Karpenter's well-known label of an instance's family, and the GPU resource NVIDIA's device
# plugin advertises (lint schedules against them; diff prices NodePool limits with them).
FAMILY_KEY = "karpenter.k8s.aws/instance-family"
GPU_RESOURCE = "nvidia.com/gpu"

STATE_DIR = ".eksinf"  # per-stack local state (hub.db, OCI layout, kubeconfigs), never committed


# A space slug names an OCI layout directory and is typed in hub commands, so it is ASCII letters,
# digits, '-' and '_', starting with a letter or digit, at most 128 characters.
SPACE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def check_space_name(
    slug: str, hint: str = "Pick another --name/--variant, e.g. dev or team-a."
) -> None:
    """Refuse (exit 2) a space name the hub would store as given (spaces, '/', '!', a newline,
    non-ASCII letters) or that is too long."""
    if not SPACE_NAME.fullmatch(slug):
        raise EksinfError(
            f"bad space name {slug!r}: use letters, digits, '-' and '_' "
            "(starting with a letter or digit, at most 128 characters)",
            hint=hint,
            exit_code=USAGE,
        )


def variant_space(component: str, variant: str) -> str:
    """The space holding one component's units in one variant (`karpenter-dev`)."""
    return f"{component}-{variant}"


def base_space(component: str) -> str:
    """The space install uploads a component's units into (`karpenter-base`)."""
    return variant_space(component, BASE)


def profile_space(variant: str) -> str:
    """The platform profile's space in one variant, the upstream of every profile link."""
    return variant_space(PROFILE_COMPONENT, variant)


def apps_space(space: str) -> str:
    """The space holding a target space's Argo CD Applications (root app of the app-of-apps)."""
    return f"{space}-argo-apps"


def sandbox_spaces(name: str) -> tuple[str, str]:
    """The (mgmt, workload) target spaces of one sandbox."""
    return f"{name}-mgmt", f"{name}-workload"


def owner_labels(**extra: str) -> dict[str, str]:
    """Labels of a space eksinf creates: the Owner label plus `extra`."""
    return {OWNER_LABEL: OWNER, **extra}


def kubeconfig_path(stack_root: Path, cluster: str) -> Path:
    """Where enroll keeps the kubeconfig of an enrolled cluster (`mgmt` for the management one)."""
    return stack_root / STATE_DIR / "clusters" / f"{cluster}.kubeconfig"
