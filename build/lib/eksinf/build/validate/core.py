"""Built-in kinds against the pinned Kubernetes version's OpenAPI schemas, and kinds the cluster
provides (Argo CD's Application) or that never reach a cluster (the PlatformProfile) against the
schemas shipped in the package.

The built-in schemas are kubernetes-validate's strict JSON Schemas (every object closed, so an
unknown field is an error). They type a quantity as "string or number" with no pattern; here the
quantity definition carries a format checked by model.quantity, so `32Gx` fails as it does on
the server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
from referencing import Registry, Resource

from eksinf.build.validate.structural import UNKNOWN
from eksinf.model.quantity import parse as parse_quantity

QUANTITY_DEF = "io.k8s.apimachinery.pkg.api.resource.Quantity"
# Kinds whose CRD the cluster (not the stack) provides, or that are never applied: their pinned
# schema, shipped in the package (docs/contract.md names them).
PINNED = {
    ("argoproj.io/v1alpha1", "Application"): "argocd-application.schema.json",
    ("eks-inference.eksinf.dev/v1", "PlatformProfile"): "profile.schema.json",
}
_VERSION = re.compile(r"^v(\d+)\.(\d+)\.\d+-local-strict$")


def _schema_root():
    return resources.files("kubernetes_validate").joinpath("kubernetes-json-schema")


@cache
def schema_dir(kube_version: str) -> str:
    """The newest schema set not newer than `kube_version` (kubernetes-validate's own rule)."""
    want = tuple(int(p) for p in kube_version.lstrip("v").split(".")[:2])
    found = []
    for entry in _schema_root().iterdir():
        match = _VERSION.match(entry.name)
        if match and (int(match[1]), int(match[2])) <= want:
            found.append(((int(match[1]), int(match[2])), entry.name))
    if not found:
        raise LookupError(f"no Kubernetes schemas for {kube_version}")
    return max(found)[1]


@cache
def _registry(directory: str) -> Registry:
    defs = json.loads(_schema_root().joinpath(directory, "_definitions.json").read_text())
    defs["$defs"][QUANTITY_DEF] = {"type": ["string", "number", "null"], "format": "quantity"}
    return Resource.from_contents(defs) @ Registry()


_FORMATS = jsonschema.FormatChecker(formats=())
_FORMATS.checks("quantity")(lambda value: value is None or parse_quantity(value) is not None)


def _file_name(api_version: str, kind: str) -> str:
    # kubernetes-validate's naming: rbac.authorization.k8s.io/v1 Role -> role-rbac-v1.json
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return f"{kind.lower()}-{group_version}.json"


@cache
def builtin_validator(directory: str, api_version: str, kind: str) -> Any | None:
    path = _schema_root().joinpath(directory, _file_name(api_version, kind))
    if not path.is_file():
        return None
    schema = json.loads(path.read_text())
    return jsonschema.Draft202012Validator(
        schema, registry=_registry(directory), format_checker=_FORMATS
    )


@cache
def pinned_validator(api_version: str, kind: str) -> Any | None:
    name = PINNED.get((api_version, kind))
    if name is None:
        return None
    schema = json.loads(resources.files("eksinf").joinpath("schemas", name).read_text())
    return jsonschema.Draft202012Validator(schema, format_checker=_FORMATS)


def errors(validator: Any, doc: dict) -> Iterator[tuple[list, str, Any, str]]:
    """(path parts, rule, value, message) per schema error, deepest first within a oneOf."""
    for error in validator.iter_errors(doc):
        rule = str(error.validator)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            # one finding per unknown field, at its own path, as server-side apply names it
            known = set(
                (error.schema.get("properties") or {}) if isinstance(error.schema, dict) else ()
            )
            for key in sorted(set(error.instance) - known):
                yield [*error.absolute_path, key], "unknown field", error.instance[key], UNKNOWN
            continue
        if error.validator in ("enum", "const", "pattern", "format", "type", "maximum", "minimum"):
            rule += f": {error.validator_value}"
        yield list(error.absolute_path), rule, error.instance, error.message
