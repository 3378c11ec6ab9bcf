"""Binding files: which profile value lands where, declared per component.

Each component declares its bindings in `render/<component>/links/bindings.yaml` (a sub-folder,
so the render never takes it for a unit):

    bindings:
      - source: availabilityZones.0          # a path into the profile's spec
        unit: network                        # a unit of this component (file stem)
        kind: Subnet                         # resource kind, or apiVersion/kind
        name: aws-inference/inference-demo-private-a        # namespace/name, or /name when cluster-scoped
        path: spec.availabilityZone          # paths.py grammar (`~1` = a dot inside a key)
      - source: region
        unit: karpenter-controller
        kind: Deployment
        name: kube-system/karpenter
        setter: {container: controller, env: AWS_REGION}   # by name, never by list position

Every linked field ships as the placeholder (model.placeholder), so a link that never resolved
is visible (and refused by the hub's vet-placeholders gate) instead of shipping a stale default.
This module only parses and validates the files; `links.engine` writes the values.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from eksinf.core import inside
from eksinf.core.yamlio import load_source, read_source_text
from eksinf.model import paths
from eksinf.model.stack import LINKS_DIR, Stack

from ..errors import CONTRACT, EksinfError

BINDINGS_FILE = "bindings.yaml"
_KEYS = {"source", "unit", "kind", "name", "path", "setter"}
_REQUIRED = ("source", "unit", "kind", "name")


@dataclass(frozen=True)
class Binding:
    component: str
    source: str  # path into the profile spec, e.g. `availabilityZones.0`
    unit: str  # unit slug (file stem) within the component
    kind: str  # `Kind` or `apiVersion/Kind`
    name: str  # `namespace/name`, `/name` or `name` (cluster-scoped)
    path: str | None
    container: str | None
    env: str | None
    file: str  # bindings file, relative to the stack root
    line: int

    @property
    def unit_key(self) -> str:
        return f"{self.component}/{self.unit}"

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def target(self) -> str:
        """How the binding addresses its field, for tables and messages."""
        if self.path is not None:
            return self.path
        return f"set-env-var {self.container} {self.env}"

    def describe(self) -> str:
        return f"{self.unit_key}.yaml {self.kind} {self.name} {self.target}"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "component": self.component,
            "source": self.source,
            "unit": self.unit,
            "kind": self.kind,
            "name": self.name,
            "file": self.file,
            "line": self.line,
        }
        if self.path is not None:
            out["path"] = self.path
        else:
            out["setter"] = {"container": self.container, "env": self.env}
        return out


def bindings_path(stack: Stack, component: str) -> Path:
    return stack.render_dir / component / LINKS_DIR / BINDINGS_FILE


def _bad(where: str, why: str, hint: str = "") -> EksinfError:
    return EksinfError(
        f"{where}: {why}",
        hint=hint or "See docs/linking.md for the bindings format.",
        exit_code=CONTRACT,
    )


def _item_lines(text: str) -> list[int]:
    """1-based line of each item of the top-level `bindings:` list (libyaml's composer keeps marks)."""
    root = yaml.compose(text, Loader=yaml.CSafeLoader)
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if key.value == "bindings" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []


def _parse_file(component: str, path: Path, label: str) -> list[Binding]:
    text = read_source_text(path, label)
    docs = load_source(path, text, label=label)  # strict: duplicate keys, tabs, syntax
    if not docs:
        return []
    if len(docs) != 1 or not isinstance(docs[0], dict) or set(docs[0]) != {"bindings"}:
        raise _bad(label, "expected one mapping with a single key `bindings` (a list)")
    items = docs[0]["bindings"] or []
    if not isinstance(items, list):
        raise _bad(label, "`bindings` must be a list")
    lines = _item_lines(text)
    out = []
    for index, item in enumerate(items):
        line = lines[index] if index < len(lines) else 0
        where = f"{label}:{line}"
        if not isinstance(item, dict):
            raise _bad(where, f"binding {index} is not a mapping")
        unknown = sorted(set(item) - _KEYS)
        if unknown:
            raise _bad(where, f"unknown key(s) {', '.join(unknown)}")
        for key in _REQUIRED:
            if not isinstance(item.get(key), str) or not item[key]:
                raise _bad(where, f"`{key}` is required and must be a non-empty string")
        has_path, has_setter = "path" in item, "setter" in item
        if has_path == has_setter:
            raise _bad(where, "give exactly one of `path` or `setter`")
        container = env = target_path = None
        if has_path:
            target_path = item["path"]
            if not isinstance(target_path, str):
                raise _bad(where, "`path` must be a string")
            try:
                paths.parse(target_path)
            except paths.PathError as exc:
                raise _bad(where, exc.message, exc.hint) from exc
        else:
            setter = item["setter"]
            if (
                not isinstance(setter, dict)
                or set(setter) != {"container", "env"}
                or not all(isinstance(v, str) and v for v in setter.values())
            ):
                raise _bad(
                    where,
                    "`setter` must be {container: NAME, env: NAME}",
                    "Setters address a container and an env var by name, never by position.",
                )
            container, env = setter["container"], setter["env"]
        try:
            paths.parse(item["source"])
        except paths.PathError as exc:
            raise _bad(where, f"source: {exc.message}", exc.hint) from exc
        out.append(
            Binding(
                component=component,
                source=item["source"],
                unit=item["unit"],
                kind=item["kind"],
                name=item["name"],
                path=target_path,
                container=container,
                env=env,
                file=label,
                line=line,
            )
        )
    return out


def load_bindings(stack: Stack) -> list[Binding]:
    """Every component's bindings, in component order then file order."""
    out: list[Binding] = []
    for comp in stack.components:
        path = bindings_path(stack, comp.name)
        if os.path.lexists(path):
            inside.check(path.relative_to(stack.root), stack.root, stack.root)  # no link
            out += _parse_file(comp.name, path, str(path.relative_to(stack.root)))
    return out
