"""Profile links: which profile value lands where, declared per component, resolved purely.

Each component declares its bindings in `render/<component>/links/bindings.yaml` (a sub-folder,
so the render never takes it for a unit):

    bindings:
      - source: availabilityZones.0          # a path into the profile's spec
        unit: network                        # a unit of this component (file stem)
        kind: Subnet                         # resource kind, or apiVersion/kind
        name: aws-inference/private-a        # namespace/name, or /name when cluster-scoped
        path: spec.availabilityZone          # paths.py grammar (`~1` = a dot inside a key)
      - source: region
        unit: karpenter-controller
        kind: Deployment
        name: kube-system/karpenter
        setter: {container: controller, env: AWS_REGION}   # by name, never by list position

Every linked field ships as the placeholder (model.placeholder), so a link that never resolved is visible
(and refused by the hub's vet-placeholders gate) instead of shipping a stale default.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import paths
from .errors import CONTRACT, EksinfError
from .model.resources import find_resource, pod_spec, pod_spec_path
from .stack import Stack
from .yamlio import load_source, read_source_text

LINKS_DIR = "links"
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
        if path.is_file():
            out += _parse_file(comp.name, path, str(path.relative_to(stack.root)))
    return out


# ---- addressing -------------------------------------------------------------------------------


def setter_path(doc: dict, container: str, env: str) -> str:
    """The positional path a setter writes today, e.g. `spec.template.spec.containers.0.env.5.value`.

    Raises PathError naming what is missing (the container, or the env var in it).
    """
    spec = pod_spec(doc)
    if spec is None:
        raise paths.PathError(f"{doc.get('kind')} has no pod template to set env vars in")
    base = pod_spec_path(doc)
    for field in ("containers", "initContainers"):
        for ci, item in enumerate(spec.get(field) or []):
            if item.get("name") != container:
                continue
            names = []
            for ei, var in enumerate(item.get("env") or []):
                names.append(var.get("name"))
                if var.get("name") == env:
                    if "value" not in var:
                        raise paths.PathError(
                            f"container {container!r} env var {env!r} has no literal value "
                            "(valueFrom?)"
                        )
                    return f"{base}.{field}.{ci}.env.{ei}.value"
            have = ", ".join(n for n in names if n) or "none"
            raise paths.PathError(
                f"container {container!r} has no env var {env!r} (it has: {have})",
                "A setter changes an existing variable; add it to the source with the placeholder.",
            )
    have = ", ".join(c.get("name", "?") for c in spec.get("containers") or [])
    raise paths.PathError(f"no container named {container!r} (containers: {have or 'none'})")


def target_path(binding: Binding, doc: dict) -> str:
    """The concrete path a binding writes in `doc` (setters resolved to today's position)."""
    if binding.path is not None:
        return binding.path
    return setter_path(doc, binding.container or "", binding.env or "")


def apply_binding(binding: Binding, doc: dict, value: Any) -> bool:
    """Write `value` into one resource document. Returns whether anything changed.

    Raises PathError (exit 3) when the path, container or env var does not exist: a link never
    creates a field, because a created field is exactly the silent failure it exists to prevent.
    """
    return paths.set_existing(doc, target_path(binding, doc), value)


def profile_value(spec: dict, source: str) -> Any:
    try:
        return paths.get(spec, source)
    except paths.PathError as exc:
        raise paths.PathError(f"profile spec.{source}: {exc.message}", exc.hint) from exc


def resolve_units(
    units: dict[str, list[dict]], profile_spec: dict, bindings: list[Binding]
) -> dict[str, list[dict]]:
    """Return copies of `units` (keyed `component/unit`) with every binding's value written in.

    Bindings whose unit is not in `units` are skipped, so a caller may resolve one component.
    Pure: the inputs are not modified. Units that no binding touches are returned as new lists of
    the same (unmodified) documents; bound units are deep copies.
    """
    bound = {b.unit_key for b in bindings}
    out = {key: copy.deepcopy(docs) if key in bound else list(docs) for key, docs in units.items()}
    for binding in bindings:
        docs = out.get(binding.unit_key)
        if docs is None:
            continue
        doc = find_resource(docs, binding.kind, binding.name)
        if doc is None:
            raise EksinfError(
                f"{binding.where}: {binding.kind} {binding.name} not found in unit "
                f"{binding.unit_key}.yaml",
                hint="Fix the binding's kind/name, or the unit that should hold the resource.",
                exit_code=CONTRACT,
            )
        try:
            value = profile_value(profile_spec, binding.source)
            apply_binding(binding, doc, value)
        except paths.PathError as exc:
            raise EksinfError(
                f"{binding.where}: {binding.describe()}: {exc.message}",
                hint=exc.hint or "Fix the binding or the unit it points at.",
                exit_code=CONTRACT,
            ) from exc
    return out
