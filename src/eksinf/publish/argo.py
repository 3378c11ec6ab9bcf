"""Argo CD Application manifests for a target's apps space (app-of-apps over OCI).

The floor is Argo CD 3.1: older versions cannot read plain-manifest `oci://` sources and fail
quietly (Healthy, never synced). The root Application pulls the apps space's own release; each
child pulls one variant space's release.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import cast

from eksinf.core.types import Doc
from eksinf.core.yamldump import dump_docs

ARGOCD_MIN_VERSION = "3.1"
ARGOCD_NAMESPACE = "argocd"
IN_CLUSTER = "https://kubernetes.default.svc"
LAYOUT_HOST = "oci-layout.invalid"  # stand-in targets: releases live in a local OCI layout


@cache
def application_schema() -> Doc:
    """The one JSON Schema for the Applications below: enroll checks each one it applies
    against it, and the tests check what this module generates."""
    text = resources.files("eksinf").joinpath("schemas/argocd-application.schema.json").read_text()
    return cast(Doc, json.loads(text))  # the package's own schema file: one JSON object


def repo_url(registry: str, space: str) -> str:
    """Where Argo pulls a space's release from. A layout registry has no host Argo could reach;
    the reserved `.invalid` name makes that explicit (stand-in targets are never pulled)."""
    base = LAYOUT_HOST if registry.startswith("oci-layout:") else registry
    return f"oci://{base}/space/{space}"


def _application(
    name: str, url: str, namespace: str, sync_options: list[str], automated: Doc
) -> Doc:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {
            "name": name,
            "namespace": ARGOCD_NAMESPACE,
            "finalizers": ["resources-finalizer.argocd.argoproj.io"],
        },
        "spec": {
            "project": "default",
            "source": {"repoURL": url, "targetRevision": "latest", "path": "."},
            "destination": {"server": IN_CLUSTER, "namespace": namespace},
            "syncPolicy": {"automated": automated, "syncOptions": sync_options},
        },
    }


def root_application(apps_space: str, registry: str) -> str:
    """The app-of-apps: selfHeal, no prune (removing a child must not cascade by accident)."""
    doc = _application(
        apps_space,
        repo_url(registry, apps_space),
        ARGOCD_NAMESPACE,
        [
            "ServerSideApply=true",
            "ServerSideApply.ForceConflicts=true",
            "RespectIgnoreDifferences=true",
            "CreateNamespace=false",
        ],
        {"selfHeal": True},
    )
    return dump_docs([doc])


def child_application(
    variant_space: str, registry: str, *, namespace: str, ships_namespace: bool
) -> str:
    """One variant's Application: prune on, and CreateNamespace only when the variant does not
    ship its own Namespace resource (a shipped Namespace must win, with its labels).
    `namespace` is the variant's main namespace (the destination default)."""
    doc = _application(
        variant_space,
        repo_url(registry, variant_space),
        namespace,
        ["ServerSideApply=true", f"CreateNamespace={'false' if ships_namespace else 'true'}"],
        {"prune": True, "selfHeal": True, "allowEmpty": True},
    )
    return dump_docs([doc])
