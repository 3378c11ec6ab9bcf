"""The reviewable state of a stack at one point: its rendered resources plus the inputs a reviewer
cares about that never reach a resource (chart versions, profile bindings, IAM policy files,
versions.env).

`snapshot` is pure: it takes the stack's files as a mapping (stack-relative posix path -> text),
whether they came from the working tree, a git commit or a fresh render.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import yaml

from eksinf.core.types import Doc
from eksinf.model.stack import PLANES, parse_versions

from ..errors import CONTRACT, EksinfError
from ..links import BINDINGS_FILE, LINKS_DIR
from ..model.configs import parse_unit
from ..model.names import PROFILE_COMPONENT
from ..model.resources import api_group

# Kinds of the inputs that are not Kubernetes objects; their apiVersion says where they live.
INPUT_API = "eksinf.dev/input"
CHART_KIND = "Chart"
BINDING_KIND = "Binding"
POLICY_FILE_KIND = "PolicyFile"
VERSIONS_KIND = "Versions"
STACK_GROUP = "(stack)"  # the component of inputs that belong to the whole stack


@dataclass(frozen=True)
class Resource:
    component: str
    unit: str  # the file it lives in, relative to the stack
    doc: Doc

    @property
    def api_version(self) -> str:
        return str(self.doc.get("apiVersion", ""))

    @property
    def kind(self) -> str:
        return str(self.doc.get("kind", ""))

    @property
    def group(self) -> str:
        return api_group(self.api_version)

    @property
    def namespace(self) -> str | None:
        ns = (self.doc.get("metadata") or {}).get("namespace")
        return str(ns) if ns is not None else None

    @property
    def name(self) -> str:
        return str((self.doc.get("metadata") or {}).get("name", "?"))

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """Identity across versions: an apiVersion bump is a change, not a delete and create."""
        return (self.component, self.group, self.kind, self.namespace or "", self.name)

    @property
    def label(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.api_version} {self.kind} {where}"


@dataclass(frozen=True)
class Snapshot:
    components: dict[str, tuple[str, int]]  # name -> (plane, order)
    resources: tuple[Resource, ...]

    def by_key(self) -> dict[tuple[str, str, str, str, str], Resource]:
        return {r.key: r for r in self.resources}


def _input(component: str, unit: str, kind: str, name: str, body: Doc) -> Resource:
    doc = {"apiVersion": INPUT_API, "kind": kind, "metadata": {"name": name}, **body}
    return Resource(component, unit, doc)


def _components(files: dict[str, str]) -> dict[str, tuple[str, int]]:
    text = files.get("components.yaml")
    if text is None:
        return {}
    try:
        data = yaml.load(text, Loader=yaml.CSafeLoader)
    except yaml.YAMLError as exc:
        raise EksinfError(
            f"components.yaml: not YAML ({str(exc).splitlines()[0]})", exit_code=CONTRACT
        ) from exc
    out: dict[str, tuple[str, int]] = {}
    for item in (data or {}).get("components") or []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            plane = str(item.get("plane")) if item.get("plane") in PLANES else "?"
            order = item.get("order")
            out[item["name"]] = (plane, order if isinstance(order, int) else 0)
    return out


def _charts(files: dict[str, str]) -> list[Resource]:
    """The charts the configs were rendered from, from configs/provenance.json."""
    text = files.get("configs/provenance.json")
    if text is None:
        return []
    try:
        charts = json.loads(text).get("charts") or []
    except (ValueError, AttributeError) as exc:
        raise EksinfError(
            "configs/provenance.json: not a JSON object",
            hint="Re-render with `eksinf render` and commit configs/.",
            exit_code=CONTRACT,
        ) from exc
    return [
        _input(
            c.get("component", STACK_GROUP),
            "configs/provenance.json",
            CHART_KIND,
            c.get("name", "?"),
            {"spec": {k: c.get(k) for k in ("chart", "version", "repo", "sha256")}},
        )
        for c in charts
        if isinstance(c, dict)
    ]


def _bindings(files: dict[str, str]) -> list[Resource]:
    """Each profile binding is one input resource, named by everything that identifies it."""
    out = []
    for rel, text in files.items():
        parts = rel.split("/")
        if len(parts) != 4 or parts[0] != "render" or parts[2:] != [LINKS_DIR, BINDINGS_FILE]:
            continue
        try:
            data = yaml.load(text, Loader=yaml.CSafeLoader) or {}
        except yaml.YAMLError as exc:
            raise EksinfError(
                f"{rel}: not YAML ({str(exc).splitlines()[0]})",
                hint="`eksinf lint` names the line to fix.",
                exit_code=CONTRACT,
            ) from exc
        items = data.get("bindings") if isinstance(data, dict) else None
        for item in items or []:
            if not isinstance(item, dict):
                continue
            setter = item.get("setter")
            target = (
                f"set-env-var {setter.get('container')} {setter.get('env')}"
                if isinstance(setter, dict)
                else item.get("path")
            )
            name = (
                f"{item.get('source')} -> {item.get('unit')} {item.get('kind')} "
                f"{item.get('name')} {target}"
            )
            out.append(_input(parts[1], rel, BINDING_KIND, name, {"spec": item}))
    return out


def _policy_files(files: dict[str, str]) -> list[Resource]:
    out = []
    for rel, text in files.items():
        if not (rel.startswith("iam/") and rel.endswith(".json")):
            continue
        try:
            policy = json.loads(text)
        except ValueError as exc:
            raise EksinfError(
                f"{rel}: not JSON ({exc})", hint="Fix the policy document.", exit_code=CONTRACT
            ) from exc
        out.append(_input(STACK_GROUP, rel, POLICY_FILE_KIND, rel, {"policy": policy}))
    return out


def _versions(files: dict[str, str]) -> list[Resource]:
    text = files.get("versions.env")
    if text is None:
        return []
    values, _ = parse_versions("versions.env", text)
    return [_input(STACK_GROUP, "versions.env", VERSIONS_KIND, "versions.env", {"data": values})]


def _units(files: dict[str, str]) -> list[Resource]:
    out = []
    for rel, text in sorted(files.items()):
        parts = rel.split("/")
        if len(parts) != 3 or parts[0] != "configs" or not parts[2].endswith((".yaml", ".yml")):
            continue
        docs = parse_unit(parts[1], parts[2], text).docs
        out += [Resource(parts[1], rel, d) for d in docs if d.get("kind")]
    return out


def without_unchanged_units(
    base: dict[str, str], head: dict[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Both sides without the unit files that are byte-identical on both: their resources cannot
    differ, and parsing them is most of a review's time (CRD units are large). The profile is
    kept: the cost bounds read its region."""

    def same(rel: str) -> bool:
        parts = rel.split("/")
        return (
            len(parts) == 3
            and parts[0] == "configs"
            and parts[1] != PROFILE_COMPONENT
            and base.get(rel) == head.get(rel)
        )

    return (
        {r: t for r, t in base.items() if not same(r)},
        {r: t for r, t in head.items() if not same(r)},
    )


GPU_MARK = "nvidia.com/gpu"


def gpu_units(files: dict[str, str]) -> dict[str, str]:
    """The unit files that can hold a GPU request or a GPU NodePool (they name nvidia.com/gpu),
    CRDs left out: the few the GPU totals need, without parsing the whole stack."""
    return {
        rel: text
        for rel, text in files.items()
        if rel.startswith("configs/")
        and GPU_MARK in text
        and "kind: CustomResourceDefinition" not in text
    }


def snapshot(files: dict[str, str]) -> Snapshot:
    resources = _units(files) + _charts(files) + _bindings(files)
    resources += _policy_files(files) + _versions(files)
    return Snapshot(_components(files), tuple(resources))
