"""The stack definition: components.yaml, versions.env and the render/ source tree.

`load_stack` is the only entry point. It validates everything it reads and returns a frozen
`Stack`, so later stages never re-check the definition.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from eksinf.core.types import Doc
from eksinf.core.yamlio import load_source, read_source_text
from eksinf.errors import CONTRACT, USAGE, EksinfError
from eksinf.model import shipped
from eksinf.model.schema import Schema
from eksinf.model.stackroot import COMPONENTS_SCHEMA, find_stack_root
from eksinf.model.targets import KINDS

PLANES = ("hub", "mgmt", "workload")  # apply order: the hub is never applied; mgmt converges first
# Files under render/<component>/ that are sources of checks, never units: the component's
# profile bindings (a sub-folder) and its allowed flattening hazards.
LINKS_DIR = "links"
ALLOW_FILE = "HAZARDS.allow"
RENDERERS = ("copy", "helm", "manifest")
REQUIRED_VERSION_KEYS = ("RENDER_KUBE_VERSION",)
_ENV_LINE = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


@dataclass(frozen=True)
class ChartSpec:
    """One Helm chart rendered into a component: `<name>-crds.yaml` and `<name>-controller.yaml`."""

    name: str
    chart: str
    repo: str
    version_key: str
    version: str
    release: str
    namespace: str
    values: tuple[str, ...]

    @property
    def source(self) -> str:
        """Where the chart comes from upstream: an OCI reference or `<repo-url> <chart>`."""
        repo = self.repo.rstrip("/")
        return f"{repo}/{self.chart}" if repo.startswith("oci://") else f"{repo} {self.chart}"


@dataclass(frozen=True)
class ManifestSpec:
    """One pinned upstream manifest rendered into a component (`<name>-crds.yaml`,
    `<name>-controller.yaml`), like a chart without templating."""

    name: str
    url_template: str  # `{version}` is replaced by the version
    mirror_template: str  # the file name in a mirror directory, `{version}` replaced too
    version_key: str
    version: str
    namespace: str  # set on every namespaced object the manifest leaves without one
    exclude: tuple[str, ...]  # `Kind/name` of objects left out (each with its reason in YAML)

    @property
    def url(self) -> str:
        return self.url_template.replace("{version}", self.version)

    @property
    def mirror_file(self) -> str:
        return self.mirror_template.replace("{version}", self.version)


@dataclass(frozen=True)
class Component:
    name: str
    plane: str
    order: int
    render: str
    description: str
    charts: tuple[ChartSpec, ...]
    line: int
    manifests: tuple[ManifestSpec, ...] = ()
    kinds: tuple[str, ...] = ()  # target kinds it is deployed to (model/targets.py); () = all
    # CRDs the target cluster provides (an EKS add-on installs them): pinned like a manifest,
    # never rendered or applied; `validate` checks this component's custom resources against them.
    cluster_crds: tuple[ManifestSpec, ...] = ()


@dataclass(frozen=True)
class Stack:
    root: Path
    components: tuple[Component, ...]
    versions: dict[str, str]
    shipped: bool = False  # the user's copy of the stack shipped inside eksinf (model.shipped)

    def refuse_writes(self, command: str, writes: str) -> None:
        """A command that writes into the stack's own files refuses the shipped stack: its copy
        is replaced on upgrade, and changes belong in a stack folder of one's own."""
        if self.shipped:
            raise EksinfError(
                f"{command} writes {writes} into the stack, and this is the stack shipped with "
                f"eksinf (its copy in {self.root}, replaced on every upgrade)",
                hint=f"Copy it into a folder of your own (`cp -r {self.root} DIR`), then run "
                f"`eksinf --stack DIR {command}` (or run it in DIR).",
                exit_code=USAGE,
            )

    @property
    def configs_dir(self) -> Path:
        return self.root / "configs"

    @property
    def render_dir(self) -> Path:
        return self.root / "render"

    @property
    def lock_path(self) -> Path:
        return self.root / "charts.lock"

    def source_dir(self, component: Component) -> Path:
        return self.render_dir / component.name

    def component(self, name: str) -> Component:
        for comp in self.components:
            if comp.name == name:
                return comp
        known = ", ".join(c.name for c in self.components)
        raise EksinfError(
            f"unknown component {name!r}",
            hint=f"Known components: {known}.",
            exit_code=CONTRACT,
        )

    def select(
        self, names: list[str] | None = None, plane: str | None = None, kind: str | None = None
    ) -> list[Component]:
        """Components by name (default all), in `plane`, deployed to targets of `kind`."""
        if plane is not None and plane not in PLANES:
            raise EksinfError(
                f"unknown plane {plane!r}",
                hint=f"Use one of: {', '.join(PLANES)}.",
                exit_code=USAGE,
            )
        chosen = [self.component(n) for n in names] if names else list(self.components)
        return [
            c
            for c in chosen
            if (plane is None or c.plane == plane)
            and (kind is None or not c.kinds or kind in c.kinds)
        ]

    @property
    def kube_version(self) -> str:
        return self.versions["RENDER_KUBE_VERSION"]

    @property
    def api_versions(self) -> tuple[str, ...]:
        raw = self.versions.get("RENDER_API_VERSIONS", "")
        return tuple(v.strip() for v in raw.split(",") if v.strip())


@functools.cache
def _schema() -> Schema:
    return Schema(json.loads(COMPONENTS_SCHEMA.read_text(encoding="utf-8")), COMPONENTS_SCHEMA.name)


def parse_versions(path: Path | str, text: str) -> tuple[dict[str, str], dict[str, int]]:
    """Parse KEY=VALUE lines. No shell evaluation: `$X` stays literal, quotes are stripped.

    `path` only labels error messages (`versions.env:LINE`).
    """
    values: dict[str, str] = {}
    lines: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _ENV_LINE.match(line)
        if not match:
            raise EksinfError(
                f"{path}:{number}: malformed line {raw!r}",
                hint="Each line must be KEY=VALUE (or a # comment).",
                exit_code=CONTRACT,
            )
        key, value = match.group(1), match.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        if key in values:
            raise EksinfError(
                f"{path}:{number}: duplicate key {key} (first set on line {lines[key]})",
                hint="Keep one definition per key.",
                exit_code=CONTRACT,
            )
        values[key] = value
        lines[key] = number
    return values, lines


def load_stack(root: Path | None = None) -> Stack:
    root = find_stack_root(root)
    comp_path = root / "components.yaml"
    env_path = root / "versions.env"
    if not env_path.is_file():
        raise EksinfError(
            f"versions.env: missing in {root}",
            hint="Create versions.env with the pinned inputs (RENDER_KUBE_VERSION, chart versions).",
            exit_code=CONTRACT,
        )
    versions, _ = parse_versions("versions.env", read_source_text(env_path, "versions.env"))
    text = read_source_text(comp_path, "components.yaml")
    docs = load_source(comp_path, text, label="components.yaml")
    if len(docs) != 1:
        raise EksinfError(
            f"components.yaml: expected one YAML document, found {len(docs)}", exit_code=CONTRACT
        )
    data = docs[0]
    # checked on every load (well under a millisecond), never served from a recorded pass:
    # a record's key would have to follow the checker's code too
    first = _schema().first_error(data)
    if first:
        raise EksinfError(
            f"components.yaml: {first.json_path}: {first.message}",
            hint="See docs/stack-format.md for the components.yaml format.",
            exit_code=CONTRACT,
        )
    lines = _component_lines(text)
    components = [
        _component(item, versions, lines.get(item["name"], 0)) for item in data["components"]
    ]
    _check_semantics(components)
    for key in REQUIRED_VERSION_KEYS:
        if key not in versions:
            raise EksinfError(
                f"versions.env: missing key {key}",
                hint=f"Add a line {key}=... (for example RENDER_KUBE_VERSION=1.31.0).",
                exit_code=CONTRACT,
            )
    plane_rank = {p: i for i, p in enumerate(PLANES)}
    components.sort(key=lambda c: (plane_rank[c.plane], c.order))
    return Stack(
        root=root,
        components=tuple(components),
        versions=versions,
        shipped=shipped.is_shipped(root),
    )


def _component_lines(text: str) -> dict[str, int]:
    """Line of each `- name: X` entry, for error messages that point into components.yaml."""
    out: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = re.match(r"^\s*-\s+name:\s*['\"]?([a-z0-9-]+)", line)
        if match and match.group(1) not in out:
            out[match.group(1)] = number
    return out


def _component(item: Doc, versions: dict[str, str], line: int) -> Component:
    where = f"components.yaml:{line}" if line else "components.yaml"
    charts = []
    for chart in item.get("charts", []):
        key = chart["version"]
        if key not in versions:
            raise EksinfError(
                f"{where}: component {item['name']!r} chart {chart['name']!r} names version key "
                f"{key}, which versions.env does not define",
                hint=f"Add {key}=<version> to versions.env.",
                exit_code=CONTRACT,
            )
        charts.append(
            ChartSpec(
                name=chart["name"],
                chart=chart["chart"],
                repo=chart["repo"],
                version_key=key,
                version=versions[key],
                release=chart["release"],
                namespace=chart["namespace"],
                values=tuple(chart.get("values", [])),
            )
        )
    manifests = [_manifest(m, versions, where, item["name"]) for m in item.get("manifests", [])]
    cluster_crds = [
        _manifest(m, versions, where, item["name"]) for m in item.get("clusterCRDs", [])
    ]
    return Component(
        name=item["name"],
        plane=item["plane"],
        order=item["order"],
        render=item["render"],
        description=item.get("description", ""),
        charts=tuple(charts),
        line=line,
        manifests=tuple(manifests),
        kinds=tuple(item.get("kinds") or ()),
        cluster_crds=tuple(cluster_crds),
    )


def _manifest(item: Doc, versions: dict[str, str], where: str, component: str) -> ManifestSpec:
    key = item["version"]
    if key not in versions:
        raise EksinfError(
            f"{where}: component {component!r} manifest {item['name']!r} names "
            f"version key {key}, which versions.env does not define",
            hint=f"Add {key}=<version> to versions.env.",
            exit_code=CONTRACT,
        )
    return ManifestSpec(
        name=item["name"],
        url_template=item["url"],
        mirror_template=item["mirrorFile"],
        version_key=key,
        version=versions[key],
        namespace=item.get("namespace", ""),
        exclude=tuple(e["object"] for e in item.get("exclude", [])),
    )


def _check_semantics(components: list[Component]) -> None:
    seen_names: dict[str, Component] = {}
    seen_orders: dict[tuple[str, int], Component] = {}
    for comp in components:
        where = f"components.yaml:{comp.line}" if comp.line else "components.yaml"
        if comp.plane not in PLANES:
            raise EksinfError(
                f"{where}: component {comp.name!r}: unknown plane {comp.plane!r}",
                hint=f"plane must be one of: {', '.join(PLANES)}.",
                exit_code=CONTRACT,
            )
        unknown = [k for k in comp.kinds if k not in KINDS]
        if unknown:
            raise EksinfError(
                f"{where}: component {comp.name!r}: unknown target kind(s) {', '.join(unknown)}",
                hint=f"kinds must be among: {', '.join(KINDS)} (src/eksinf/model/targets.py).",
                exit_code=CONTRACT,
            )
        if comp.render not in RENDERERS:
            raise EksinfError(
                f"{where}: component {comp.name!r}: unknown renderer {comp.render!r}",
                hint=f"render must be one of: {', '.join(RENDERERS)}.",
                exit_code=CONTRACT,
            )
        if comp.name in seen_names:
            raise EksinfError(
                f"{where}: component name {comp.name!r} is used twice",
                hint="Component names must be unique: they name configs/ folders and hub spaces.",
                exit_code=CONTRACT,
            )
        seen_names[comp.name] = comp
        key = (comp.plane, comp.order)
        if key in seen_orders:
            raise EksinfError(
                f"{where}: components {seen_orders[key].name!r} and {comp.name!r} both have "
                f"order {comp.order} in plane {comp.plane}",
                hint="Give each component in a plane its own order.",
                exit_code=CONTRACT,
            )
        seen_orders[key] = comp
        if comp.render == "helm" and not comp.charts:
            raise EksinfError(
                f"{where}: component {comp.name!r} uses the helm renderer but lists no charts",
                hint="Add a charts: list, or use render: copy.",
                exit_code=CONTRACT,
            )
        if comp.render != "helm" and comp.charts:
            raise EksinfError(
                f"{where}: component {comp.name!r} lists charts but uses the {comp.render} "
                "renderer",
                hint="Use render: helm to render charts.",
                exit_code=CONTRACT,
            )
        if (comp.render == "manifest") != bool(comp.manifests):
            raise EksinfError(
                f"{where}: component {comp.name!r}: "
                + (
                    "the manifest renderer needs a manifests: list"
                    if comp.render == "manifest"
                    else f"lists manifests but uses the {comp.render} renderer"
                ),
                hint="Pinned upstream manifests render with render: manifest.",
                exit_code=CONTRACT,
            )
        names = [c.name for c in comp.charts]
        if len(set(names)) != len(names):
            raise EksinfError(
                f"{where}: component {comp.name!r} has two charts with the same name",
                hint="Chart names prefix unit files and must be unique within a component.",
                exit_code=CONTRACT,
            )
    for plane in ("mgmt", "workload"):
        if not any(c.plane == plane for c in components):
            raise EksinfError(
                f"components.yaml: plane {plane} has no components",
                hint="A stack needs at least one mgmt and one workload component.",
                exit_code=CONTRACT,
            )
