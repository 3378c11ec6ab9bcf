"""How eksinf names what it creates: hub spaces, units, variants, kubeconfigs, and its labels.

Every rule is written once here; callers never spell `f"{component}-{variant}"` themselves, so a
rename is one edit and a reader can find the rule by its name.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
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


# `cub cluster up --name X` writes X's kubeconfig here (and no context to ~/.kube/config); the
# Go original found its clusters in this folder, so eksinf reads it too (creds --cluster, the
# mgmt deploy's credentials check).
_CUB_CLUSTER = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def cub_cluster_kubeconfig(cluster: str) -> Path:
    """The kubeconfig `cub cluster up --name CLUSTER` wrote. The name must be a DNS label, so
    the path never leaves the folder."""
    if not _CUB_CLUSTER.fullmatch(cluster):
        raise EksinfError(
            f"{cluster!r} is not a cub cluster name",
            hint="A cub cluster name is a DNS label: lowercase letters, digits and '-'.",
            exit_code=USAGE,
        )
    return Path.home() / ".confighub" / "clusters" / f"{cluster}.kubeconfig"


# ---- the character rules of names that reach AWS or Kubernetes ---------------------------------


@dataclass(frozen=True)
class NameRule:
    """A name rule matched against the whole string, in ASCII. A rule written `^...$` and
    applied with `re.match` also accepts a trailing newline (`$` matches before one), and `\\w`
    or `\\d` accept look-alike letters and digits from other scripts (`іnference`, Cyrillic і):
    both would pass every local check and reach an AWS or Kubernetes name. Every such rule is
    built with `name_rule`, so no caller can apply it the lax way."""

    pattern: re.Pattern[str]

    def match(self, value: object) -> re.Match[str] | None:
        if not isinstance(value, str) or not value.isascii():
            return None
        return self.pattern.fullmatch(value)


def name_rule(regex: str) -> NameRule:
    """A NameRule from a regex written without anchors (the whole string is matched)."""
    return NameRule(re.compile(regex, re.ASCII))


@functools.lru_cache(maxsize=1024)
def schema_pattern(pattern: str) -> re.Pattern[str]:
    """A JSON Schema or OpenAPI `pattern` as Go's regexp (the API server's) and ECMA-262 read
    it, for `search`: a final `$` is the end of the string, not "before a final newline" as in
    Python, and `\\d`, `\\w`, `\\s` are ASCII classes."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern, re.ASCII)
