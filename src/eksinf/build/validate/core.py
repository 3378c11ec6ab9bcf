"""Built-in kinds against the pinned Kubernetes version's OpenAPI schemas, and kinds the cluster
provides (Argo CD's Application) or that never reach a cluster (the PlatformProfile) against the
schemas shipped in the package.

The built-in schemas are kubernetes-validate's strict JSON Schemas (every object closed, so an
unknown field is an error). They type a quantity as "string or number" with no pattern; here the
quantity definition carries a format checked by model.quantity, so `32Gx` fails as it does on
the server.

jsonschema loads only when a document is checked here, not when a cached verdict stands for the
check (validate.admission): `has_builtin` and `identity` read file names and bytes only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from collections.abc import Iterator
from functools import cache
from importlib import resources
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from eksinf.build.validate.structural import UNKNOWN
from eksinf.core.types import Doc
from eksinf.model.quantity import parse as parse_quantity

QUANTITY_DEF = "io.k8s.apimachinery.pkg.api.resource.Quantity"
# Kinds whose CRD the cluster (not the stack) provides, or that are never applied: their pinned
# schema, shipped in the package (docs/contract.md names them).
PINNED = {
    ("argoproj.io/v1alpha1", "Application"): "argocd-application.schema.json",
    ("eks-inference.eksinf.dev/v1", "PlatformProfile"): "profile.schema.json",
}
_VERSION = re.compile(r"^v(\d+)\.(\d+)\.\d+-local-strict$")


@cache
def _schema_root() -> Path:
    # found without importing kubernetes_validate (its package imports jsonschema and PyYAML)
    spec = find_spec("kubernetes_validate")
    if spec is None or not spec.submodule_search_locations:
        raise LookupError("kubernetes-validate is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "kubernetes-json-schema"


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
def _registry(directory: str) -> Any:
    from referencing import Registry, Resource

    defs = json.loads(_schema_root().joinpath(directory, "_definitions.json").read_text())
    defs["$defs"][QUANTITY_DEF] = {"type": ["string", "number", "null"], "format": "quantity"}
    return Resource.from_contents(defs) @ Registry()


@cache
def _formats() -> Any:
    import jsonschema

    formats = jsonschema.FormatChecker(formats=())
    formats.checks("quantity")(lambda value: value is None or parse_quantity(value) is not None)
    return formats


def _file_name(api_version: str, kind: str) -> str:
    # kubernetes-validate's naming: rbac.authorization.k8s.io/v1 Role -> role-rbac-v1.json
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return f"{kind.lower()}-{group_version}.json"


@cache
def has_builtin(directory: str, api_version: str, kind: str) -> bool:
    """Whether the schema set has the kind (without loading a validator)."""
    return _schema_root().joinpath(directory, _file_name(api_version, kind)).is_file()


@cache
def builtin_validator(directory: str, api_version: str, kind: str) -> Any | None:
    if not has_builtin(directory, api_version, kind):
        return None
    import jsonschema

    path = _schema_root().joinpath(directory, _file_name(api_version, kind))
    schema = json.loads(path.read_text())
    return jsonschema.Draft202012Validator(
        schema, registry=_registry(directory), format_checker=_formats()
    )


@cache
def _pinned_text(name: str) -> str:
    return resources.files("eksinf").joinpath("schemas", name).read_text()


@cache
def pinned_validator(api_version: str, kind: str) -> Any | None:
    name = PINNED.get((api_version, kind))
    if name is None:
        return None
    import jsonschema

    schema = json.loads(_pinned_text(name))
    return jsonschema.Draft202012Validator(schema, format_checker=_formats())


# The libraries whose code decides a verdict here or in validate.structural/cel (the CEL engine,
# its grammar and regex engine), by distribution name: part of a cached verdict's key.
LIBRARIES = ("jsonschema", "referencing", "kubernetes_validate", "cel_python", "lark", "google_re2")


def _installed(names: tuple[str, ...]) -> list[str]:
    """`name-version` of each installed distribution, read from the names of the dist-info
    folders beside the packages (no metadata lookup, which scans every path entry)."""
    wanted = {n.lower().replace("-", "_") for n in names}
    found: set[str] = set()
    for folder in dict.fromkeys(p for p in sys.path if p and os.path.isdir(p)):
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            if entry.endswith(".dist-info"):
                name, _, version = entry[: -len(".dist-info")].partition("-")
                if name.lower().replace("-", "_") in wanted:
                    found.add(f"{name.lower()}-{version}")
    return sorted(found)


@cache
def identity(directory: str, api_version: str, kind: str) -> str:
    """What a built-in or pinned kind's verdict depends on besides the document and eksinf's
    code: the schema file's bytes (the set's shared definitions are named by the set and the
    kubernetes-validate release shipping it), the pinned schema's bytes, the libraries and
    Python. Empty parts say "none": a kind without either schema is refused by that fact."""
    digest = hashlib.sha256()
    builtin = _schema_root().joinpath(directory, _file_name(api_version, kind))
    parts = [
        directory,
        builtin.read_text() if builtin.is_file() else "",
        _pinned_text(PINNED[(api_version, kind)]) if (api_version, kind) in PINNED else "",
        *libraries(),
        sys.version,
    ]
    for part in parts:
        data = part.encode("utf-8", "backslashreplace")
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


@cache
def libraries() -> tuple[str, ...]:
    return tuple(_installed(LIBRARIES))


def errors(validator: Any, doc: Doc) -> Iterator[tuple[list[str | int], str, Any, str]]:
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
