"""The one reader of configs/: units, their resources, and what the other layers ask of them.

configs/ holds one folder per component and one YAML file per unit, written by `eksinf render`.
Lint, links, bundle, the AWS contract, ACK and teardown all read it through here, so a unit is
parsed one way, a parse error reads the same from every command, and a resource is addressed
by one id (`Kind namespace/name`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eksinf.core import inside
from eksinf.core.yamlio import load_objects, read_source_text
from eksinf.model import paths

from .resources import api_group, pod_spec, resource_label

SYNC_WAVE = "argocd.argoproj.io/sync-wave"
ACK_GROUP_SUFFIX = ".services.k8s.aws"  # every ACK controller's API group ends so
UNIT_SUFFIX = ".yaml"


@dataclass(frozen=True)
class ConfigUnit:
    """One committed unit file: `configs/<component>/<file>`."""

    component: str
    file: str  # name inside the component folder, e.g. `network.yaml`
    text: str
    docs: tuple[dict[str, Any], ...]

    @property
    def key(self) -> str:
        """`component/unit` (the file stem): how bindings and lint name a unit."""
        return f"{self.component}/{self.file.removesuffix(UNIT_SUFFIX)}"


def place(unit_key: str, doc: dict[str, Any] | None, path: str = "") -> str:
    """`configs/<c>/<u>.yaml Kind ns/name path`: where a finding or a value lives."""
    out = f"configs/{unit_key}.yaml"
    if doc is not None:
        out += f" {resource_label(doc)}"
    return f"{out} {path}" if path else out


@dataclass(frozen=True)
class Resource:
    """One resource of one unit, with where it lives."""

    unit: str  # component/unit
    plane: str
    doc: dict[str, Any]

    def at(self, path: str = "") -> str:
        return place(self.unit, self.doc, path)

    @property
    def id(self) -> str:
        """`Kind namespace/name` (`Kind /name` when cluster-scoped)."""
        return resource_label(self.doc)

    @property
    def api_version(self) -> str:
        return str(self.doc.get("apiVersion", ""))

    @property
    def kind(self) -> str:
        return str(self.doc.get("kind", ""))

    @property
    def name(self) -> str:
        return str(self.meta.get("name", ""))

    @property
    def namespace(self) -> str | None:
        ns = self.meta.get("namespace")
        return None if ns is None else str(ns)

    @property
    def group(self) -> str:
        return api_group(self.api_version)

    @property
    def meta(self) -> dict[str, Any]:
        meta = self.doc.get("metadata")
        return meta if isinstance(meta, dict) else {}

    @property
    def spec(self) -> dict[str, Any]:
        spec = self.doc.get("spec")
        return spec if isinstance(spec, dict) else {}

    @property
    def annotations(self) -> dict[str, Any]:
        ann = self.meta.get("annotations")
        return ann if isinstance(ann, dict) else {}

    @property
    def wave(self) -> int:
        """The Argo CD sync wave (0 when unset)."""
        return int(str(self.annotations.get(SYNC_WAVE, "0")))

    @property
    def tags(self) -> dict[str, Any]:
        return tags(self.spec)

    @property
    def pod_spec(self) -> dict[str, Any] | None:
        return pod_spec(self.doc)


def tags(spec: dict[str, Any]) -> dict[str, Any]:
    """EC2/IAM tags are a key/value list; EKS and Karpenter tags are a map. Return a map."""
    found = spec.get("tags") or {}
    if isinstance(found, list):
        return {str(t.get("key")): t.get("value") for t in found if isinstance(t, dict)}
    return dict(found) if isinstance(found, dict) else {}


def tag_path(spec: dict[str, Any], key: str) -> str:
    """The path (paths.py grammar) of one tag's value, in either tag shape."""
    found = spec.get("tags")
    if isinstance(found, list):
        for index, tag in enumerate(found):
            if isinstance(tag, dict) and tag.get("key") == key:
                return f"spec.tags.{index}.value"
    return f"spec.tags.{paths.escape(key)}"


def parse_unit(component: str, file: str, text: str) -> ConfigUnit:
    """Parse one unit's text; a YAML error names `configs/<component>/<file>:line:col`."""
    docs = load_objects(
        text,
        f"configs/{component}/{file}",
        hint="configs/ is written by `eksinf render`; re-render instead of editing it.",
    )
    return ConfigUnit(component, file, text, tuple(docs))


def component_texts(configs: Path, component: str) -> list[tuple[str, str]]:
    """(file name, text) of each committed unit of one component, in file order, unparsed."""
    # regular files inside configs/ only: a link (to a unit or the whole folder) is refused,
    # so an outside file never reaches lint, links, a bundle or the hub
    folder = configs / component
    return [
        (
            path.name,
            read_source_text(
                path, f"configs/{component}/{path.name}", folder=configs, base=configs.parent
            ),
        )
        for path in inside.files_under(folder, configs.parent, recursive=False)
        if path.suffix == UNIT_SUFFIX
    ]


def read_component(configs: Path, component: str) -> list[ConfigUnit]:
    """The committed units of one component, in file order; [] when it has none."""
    return [parse_unit(component, name, text) for name, text in component_texts(configs, component)]


def components_of(configs: Path) -> list[str]:
    """The components with a folder in configs/, in name order (read_configs' order)."""
    return sorted(p.name for p in configs.iterdir() if p.is_dir()) if configs.is_dir() else []


def read_configs(configs: Path, components: Iterable[str] | None = None) -> list[ConfigUnit]:
    """Every committed unit (or those of `components`), component by component, in name order."""
    if components is None:
        components = components_of(configs)
    return [unit for comp in components for unit in read_component(configs, comp)]


def units_by_key(units: Iterable[ConfigUnit]) -> dict[str, list[dict[str, Any]]]:
    """`component/unit` -> its documents: the shape links and lint resolve over."""
    return {unit.key: list(unit.docs) for unit in units}


def read_units(
    configs: Path, components: Iterable[str] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Every committed unit's documents (or those of `components`), keyed `component/unit`."""
    return units_by_key(read_configs(configs, components))


def resources(
    units: dict[str, list[dict[str, Any]]], planes: dict[str, str] | None = None
) -> list[Resource]:
    """Every resource of `units` (keyed `component/unit`), in key order, with its plane."""
    planes = planes or {}
    return [
        Resource(key, planes.get(key.split("/")[0], ""), doc)
        for key, docs in sorted(units.items())
        for doc in docs
    ]


def of_kind(found: Iterable[Resource], kind: str, group: str | None = None) -> list[Resource]:
    return [r for r in found if r.kind == kind and (group is None or r.group == group)]
