"""Render a stack into units: one YAML file per unit, per component, written atomically.

Pure steps (`render_stack`) build everything in memory; `write_configs` is the only writer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from eksinf import __version__
from eksinf.build import manifests
from eksinf.build.charts import ResolvedChart, read_lock, resolve
from eksinf.build.helm import HelmEngine, RenderedChart, RenderOptions, default_engine, read_values
from eksinf.build.manifests import ResolvedManifest
from eksinf.core import cache, inside
from eksinf.core.atomic import write_file
from eksinf.core.outdir import MARKER, claim, write_tree
from eksinf.core.yamlio import dump_docs, load_docs, load_mapping_docs, read_source_text
from eksinf.errors import CONTRACT, FAILURE, EksinfError
from eksinf.model import awsobjects
from eksinf.model.configs import SYNC_WAVE, Resource
from eksinf.model.digest import sha256_hex
from eksinf.model.resources import CLUSTER_SCOPED_KINDS
from eksinf.model.stack import ALLOW_FILE, LINKS_DIR, ChartSpec, Component, ManifestSpec, Stack

CRD_WAVE = "-20"
CONTROLLER_WAVE = "-10"
PROVENANCE_FILE = "provenance.json"
UNIT_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class Unit:
    """One committed file: its name is the unit's identity, its documents are its content."""

    component: str
    filename: str
    text: str
    docs: tuple[dict, ...]

    @property
    def slug(self) -> str:
        return self.filename.rsplit(".", 1)[0]


@dataclass(frozen=True)
class ChartRender:
    spec: ChartSpec
    sha256: str
    origin: str
    resources: int
    crds: int
    crd_stubs: tuple[str, ...]  # crds/ files that hold a string, not a CRD (see _split_chart)
    # CRDs this chart emits that an earlier chart of the component already wrote (see
    # _dedupe_crds): CRD name -> the unit that holds it. Counted by the conservation check.
    shared_crds: dict[str, str]
    first: RenderedChart
    # sha256 per output file of an independent render of the same inputs (determinism check):
    # a second render now, or the record of an earlier run that rendered twice and agreed.
    reference: dict[str, str]
    reference_source: str  # "second render" | "recorded render"


@dataclass(frozen=True)
class ManifestRender:
    spec: ManifestSpec
    sha256: str
    origin: str
    resources: int
    crds: int
    excluded: tuple[str, ...]


@dataclass(frozen=True)
class ComponentOutput:
    component: Component
    units: tuple[Unit, ...]
    charts: tuple[ChartRender, ...] = ()
    manifests: tuple[ManifestRender, ...] = ()


@dataclass(frozen=True)
class RenderResult:
    stack: Stack
    outputs: tuple[ComponentOutput, ...]
    provenance: dict[str, Any] = field(default_factory=dict)
    partial: bool = False  # only some components were rendered (guard/verify --component)

    def files(self) -> dict[str, str]:
        """Relative path under configs/ -> text, including the provenance record.

        A partial render has no provenance record: it describes the whole stack.
        """
        out = {f"{o.component.name}/{u.filename}": u.text for o in self.outputs for u in o.units}
        if not self.partial:
            out[PROVENANCE_FILE] = json.dumps(self.provenance, indent=2, sort_keys=True) + "\n"
        return out


def kind_of(doc: Any) -> str | None:
    return doc.get("kind") if isinstance(doc, dict) else None


def resource_id(doc: dict) -> str:
    """`Kind/namespace/name`, or `Kind/name` for cluster-scoped objects."""
    meta = doc.get("metadata") or {}
    ns = meta.get("namespace")
    name = meta.get("name", "?")
    return f"{doc.get('kind')}/{ns}/{name}" if ns else f"{doc.get('kind')}/{name}"


def stamp_wave(doc: dict, wave: str) -> dict:
    meta = doc.setdefault("metadata", {})
    annotations = meta.get("annotations") or {}
    annotations[SYNC_WAVE] = wave
    meta["annotations"] = annotations
    return doc


def source_dir(stack: Stack, comp: Component) -> Path:
    """render/<component>/, refused (exit 3) when it or render/ is a link."""
    return inside.check(stack.source_dir(comp).relative_to(stack.root), stack.root, stack.root)


def source_files(stack: Stack, comp: Component) -> list[Path]:
    """Handwritten units of a component: top-level *.yaml files. Subfolders hold other inputs.
    A link among them is refused (exit 3): it could carry an outside file into configs/."""
    src = source_dir(stack, comp)
    return [
        p for p in inside.files_under(src, stack.root, recursive=False) if p.suffix in UNIT_SUFFIXES
    ]


def _copy_units(stack: Stack, comp: Component) -> list[Unit]:
    units = []
    for path in source_files(stack, comp):
        label = str(path.relative_to(stack.root))
        text = read_source_text(path, label, base=stack.root)
        # units refuse anchors: they do not survive flattening (docs/flattening.md); and plain
        # scalars YAML readers disagree on (`y`, `0755`): the author says which one is meant
        docs = load_mapping_docs(path, text, label=label, aliases=False, ambiguous=False)
        units.append(Unit(comp.name, path.name, text, tuple(docs)))
    return units


def merge_values(base: dict, override: dict) -> dict:
    """Helm's rule: maps merge key by key, everything else is replaced."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_values(out[key], value)
        else:
            out[key] = value
    return out


def chart_values(stack: Stack, comp: Component, spec: ChartSpec, *, helm: bool = True) -> dict:
    """The chart's values, files merged in order. With `helm` (for rendering), each file as the
    Helm engine reads it; without (the guard, which looks only at strings), as eksinf's reader
    does, which takes plain scalars as Helm does and skips loading the engine."""
    values: dict = {}
    folder = source_dir(stack, comp)
    for rel in spec.values:
        # inside its component folder, no link on the way: `../../etc/passwd` is refused
        path = inside.check(Path(rel), folder, stack.root, what="values file")
        label = str(path.relative_to(stack.root))
        if not path.is_file():
            raise EksinfError(
                f"{label}: values file named by components.yaml (chart {spec.name}) is missing",
                hint="Create the file or remove it from the chart's values list.",
                exit_code=CONTRACT,
            )
        text = read_source_text(path, label, base=stack.root)
        # strict first (syntax, duplicate keys, bounds, each with its position); Helm expands
        # anchors in values files, so they are allowed
        docs = load_mapping_docs(path, text, label=label)
        if not helm:
            for doc in docs:
                values = merge_values(values, doc)
            continue
        # then the values as Helm itself reads them (`create: n` is false for Helm, where
        # Python's YAML 1.1 reader kept "n"), documents merged as Helm merges them
        values = merge_values(values, read_values(text, label))
    return values


_DOC_START = re.compile(r"^---(?: |$)", re.MULTILINE)


# Helm's install order of kinds. The helm binary sorts the documents of each template file in
# this order and the SDK does not; sorting both the same way makes their output identical.
HELM_INSTALL_ORDER = (
    "PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
    "PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
    "ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
    "CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
    "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
    "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
    "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
    "APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
)  # fmt: skip
_KIND_RANK = {kind: rank for rank, kind in enumerate(HELM_INSTALL_ORDER)}


def _install_rank(doc: Any) -> tuple[int, str]:
    kind = kind_of(doc)
    if not isinstance(kind, str):
        return (len(_KIND_RANK) + 1, "")
    return (_KIND_RANK.get(kind, len(_KIND_RANK)), "" if kind in _KIND_RANK else kind)


def _parse_output(
    comp: Component, spec: ChartSpec, rendered: RenderedChart
) -> list[tuple[str, bool, list]]:
    """Parse each file the engine produced once: (origin, is a crds/ file, documents)."""
    crd_files = {path for path, _ in rendered.crds}
    parsed = []
    for origin, text in [*rendered.crds, *rendered.manifests.items()]:
        try:
            docs = sorted(load_docs(text), key=_install_rank)  # stable: kind order only
            parsed.append((origin, origin in crd_files, docs))
        except yaml.YAMLError as exc:
            raise EksinfError(
                f"{comp.name}: chart {spec.name} template {origin} rendered invalid YAML: "
                f"{str(exc).splitlines()[0]}",
                hint="Check the chart values that feed this template.",
                exit_code=CONTRACT,
            ) from exc
    return parsed


def _split_chart(
    comp: Component, spec: ChartSpec, parsed: list[tuple[str, bool, list]]
) -> tuple[list, list, list]:
    """Split one chart's output into (controller docs, CRD docs, CRD stubs), stamping waves.

    A CRD stub is a file under crds/ that holds a bare string instead of a CRD: a symlink that
    the chart's packaging turned into a file. It is not a document we can ship, so it is returned
    separately and the guard reports it (hazard `crd-stub`) rather than it vanishing silently.
    """
    controllers: list[dict] = []
    crds: list[dict] = []
    stubs: list[str] = []
    for origin, from_crds_dir, docs in parsed:
        for doc in docs:
            if from_crds_dir and isinstance(doc, str):
                stubs.append(f"{origin} -> {doc.strip()}")
                continue
            if not isinstance(doc, dict):
                raise EksinfError(
                    f"{comp.name}: chart {spec.name} template {origin} emitted a "
                    f"{type(doc).__name__}, not a Kubernetes object",
                    exit_code=CONTRACT,
                )
            if kind_of(doc) is None:
                continue
            if doc["kind"] == "CustomResourceDefinition":
                crds.append(stamp_wave(doc, CRD_WAVE))
            else:
                controllers.append(stamp_wave(doc, CONTROLLER_WAVE))
    return controllers, crds, stubs


@dataclass(frozen=True)
class _CrdSource:
    chart: str
    origin: str  # the chart file that emitted it
    doc: dict

    @property
    def unit(self) -> str:
        return f"{self.chart}-crds.yaml"


def _dedupe_crds(
    comp: Component,
    spec: ChartSpec,
    parsed: list[tuple[str, bool, list]],
    crds: list[dict],
    owners: dict[str, _CrdSource],
) -> tuple[list[dict], dict[str, str]]:
    """Keep each CRD once per component: in the unit of the first chart (components.yaml order)
    that emits it. ACK's controller charts each ship the runtime's shared CRDs (fieldexports,
    iamroleselectors); applying one object from three units makes Flux's kustomization refuse
    the duplicate id and Argo CD fight over its owner. A later chart's copy must be identical;
    two different definitions of one CRD name are an error naming both sources.

    Returns the CRDs this chart still writes and, for those dropped, name -> the owning unit.
    `owners` (CRD name -> first source) is updated in place across the component's charts.
    """
    origin_of = {
        (doc.get("metadata") or {}).get("name"): origin
        for origin, _, docs in parsed
        for doc in docs
        if isinstance(doc, dict) and kind_of(doc) == "CustomResourceDefinition"
    }
    kept: list[dict] = []
    shared: dict[str, str] = {}
    for doc in crds:
        name = str((doc.get("metadata") or {}).get("name"))
        first = owners.get(name)
        if first is None:
            owners[name] = _CrdSource(spec.name, origin_of.get(name, "?"), doc)
            kept.append(doc)
            continue
        if first.doc != doc:
            raise EksinfError(
                f"{comp.name}: CRD {name} is defined differently by chart {first.chart} "
                f"({first.origin}) and chart {spec.name} ({origin_of.get(name, '?')})",
                hint="Pin chart versions that ship the same definition, or render the charts in "
                "separate components (the API server holds one definition per CRD name).",
                exit_code=CONTRACT,
            )
        shared[name] = first.unit
    return kept, shared


def output_digests(rendered: RenderedChart) -> dict[str, str]:
    """sha256 of every file one render produced (templates and crds/), by path."""
    files = [*rendered.crds, *rendered.manifests.items()]
    return {path: sha256_hex(text) for path, text in files}


REFERENCES = "render-references"  # the cache space of determinism references


def _reference_digests(
    engine: HelmEngine,
    chart: ResolvedChart,
    values: dict,
    opts: RenderOptions,
    first: dict[str, str],
) -> tuple[dict[str, str], str]:
    """Digests of an independent render of the same inputs, for the determinism check.

    The first time a set of inputs is seen, the chart is rendered a second time. When both
    renders agree, their digests are recorded in the cache, keyed by every input (engine and
    version, archive, values, options); later runs compare against that record instead of
    rendering twice. A record from an earlier run is a stricter reference than a second render
    a millisecond later: it also catches output that changes by the day (`now | date`).
    """
    key = sha256_hex(
        json.dumps(
            {
                "engine": [engine.name, engine.version],
                "archive": chart.sha256,
                "values": values,
                "options": dataclasses.asdict(opts),
            },
            sort_keys=True,
            default=str,
        )
    )
    try:
        recorded = json.loads(cache.read_record(REFERENCES, key) or b"")
        if isinstance(recorded, dict):
            return recorded, "recorded render"
    except ValueError:
        pass
    second = output_digests(engine.render(chart.archive, values, opts))
    if second == first:
        # an unwritable cache costs a second render next time, nothing more
        cache.write_record(REFERENCES, key, json.dumps(second, sort_keys=True).encode())
    return second, "second render"


def _render_key(engine: HelmEngine, chart: ResolvedChart, values: dict, opts: RenderOptions) -> str:
    return cache.key(
        b"render-1",
        engine.identity.encode(),
        chart.sha256.encode(),
        json.dumps(values, sort_keys=True, default=str).encode(),
        json.dumps(dataclasses.asdict(opts), sort_keys=True).encode(),
    )


def _cached_render(key: str) -> RenderedChart | None:
    """A chart's output from the derived-data cache. An entry is stored only after the
    determinism check agreed (below), so serving one never skips that check: the check compares
    against the recorded reference, exactly as it does for a fresh render once one is recorded."""
    data = cache.get("helm", key)
    if data is None:
        return None
    try:
        return RenderedChart.from_dict(json.loads(data))
    except (ValueError, KeyError, TypeError):
        return None


def _store_render(key: str, rendered: RenderedChart) -> None:
    cache.put("helm", key, json.dumps(dataclasses.asdict(rendered)).encode())


def _helm_units(
    stack: Stack, comp: Component, resolved: dict[str, ResolvedChart], engine: HelmEngine
) -> tuple[list[Unit], list[ChartRender]]:
    units: list[Unit] = []
    renders: list[ChartRender] = []
    crd_owners: dict[str, _CrdSource] = {}
    for spec in comp.charts:
        chart = resolved[spec.name]
        values = chart_values(stack, comp, spec)
        opts = RenderOptions(spec.release, spec.namespace, stack.kube_version, stack.api_versions)
        render_key = _render_key(engine, chart, values, opts)
        first = _cached_render(render_key)
        fresh = first is None
        if first is None:
            first = engine.render(chart.archive, values, opts)
        digests = output_digests(first)
        reference, reference_source = _reference_digests(engine, chart, values, opts, digests)
        if fresh and reference == digests:
            _store_render(render_key, first)
        parsed = _parse_output(comp, spec, first)
        emitted = sum(1 for _, _, docs in parsed for d in docs if kind_of(d) is not None)
        controllers, crds, stubs = _split_chart(comp, spec, parsed)
        crds, shared = _dedupe_crds(comp, spec, parsed, crds, crd_owners)
        written = 0
        for suffix, docs in (("controller", controllers), ("crds", crds)):
            if not docs:  # an empty CRD file would ship as an empty unit
                continue
            text = dump_docs(docs)
            # count the documents the file really holds: a lost separator merges two
            written += len(_DOC_START.findall(text))
            units.append(Unit(comp.name, f"{spec.name}-{suffix}.yaml", text, tuple(docs)))
        if written + len(shared) != emitted:
            dropped = f" + {len(shared)} shared CRDs written once" if shared else ""
            raise EksinfError(
                f"{comp.name}: {spec.name} split lost documents: helm emitted {emitted}, "
                f"wrote {written}{dropped}",
                hint="This is a bug in the split; please report it with the chart version.",
                exit_code=FAILURE,
            )
        renders.append(
            ChartRender(
                spec,
                chart.sha256,
                chart.origin,
                len(controllers),
                len(crds) + len(shared),  # what the chart emitted, shared ones included
                tuple(stubs),
                shared,
                first,
                reference,
                reference_source,
            )
        )
    return units, renders


def _manifest_units(
    stack: Stack, comp: Component, resolved: dict[str, ResolvedManifest]
) -> tuple[list[Unit], list[ManifestRender]]:
    """A pinned upstream manifest split like a chart (`<name>-crds.yaml` at the CRD wave,
    `<name>-controller.yaml` at the controller wave). Upstream install manifests leave the
    namespace to `kubectl apply -n`; here it is written on every namespaced object, so the unit
    means the same wherever it is applied. `exclude` entries leave objects out, by Kind/name."""
    units: list[Unit] = []
    renders: list[ManifestRender] = []
    for spec in comp.manifests:
        manifest = resolved[spec.name]
        label = f"{spec.name} {spec.version} ({spec.mirror_file})"
        try:
            docs = [d for d in load_docs(manifest.text) if d is not None]
        except yaml.YAMLError as exc:
            raise EksinfError(
                f"{comp.name}: manifest {label} is not valid YAML: {str(exc).splitlines()[0]}",
                exit_code=CONTRACT,
            ) from exc
        controllers, crds, excluded = [], [], []
        for doc in docs:
            if not isinstance(doc, dict) or kind_of(doc) is None:
                raise EksinfError(
                    f"{comp.name}: manifest {label} holds a document that is not a Kubernetes "
                    "object",
                    exit_code=CONTRACT,
                )
            key = f"{doc['kind']}/{(doc.get('metadata') or {}).get('name')}"
            if key in spec.exclude:
                excluded.append(key)
                continue
            if doc["kind"] not in CLUSTER_SCOPED_KINDS:
                doc.setdefault("metadata", {}).setdefault("namespace", spec.namespace)
            if doc["kind"] == "CustomResourceDefinition":
                crds.append(stamp_wave(doc, CRD_WAVE))
            else:
                controllers.append(stamp_wave(doc, CONTROLLER_WAVE))
        missing = sorted(set(spec.exclude) - set(excluded))
        if missing:
            raise EksinfError(
                f"components.yaml: component {comp.name} manifest {spec.name} excludes "
                f"{', '.join(missing)}, which {label} does not hold",
                hint="Remove the stale exclude entry (the upstream manifest changed).",
                exit_code=CONTRACT,
            )
        for suffix, part in (("controller", controllers), ("crds", crds)):
            if part:
                units.append(
                    Unit(comp.name, f"{spec.name}-{suffix}.yaml", dump_docs(part), tuple(part))
                )
        renders.append(
            ManifestRender(
                spec,
                manifest.sha256,
                manifest.origin,
                len(controllers),
                len(crds),
                tuple(excluded),
            )
        )
    return units, renders


def _with_handwritten(
    comp: Component, units: list[Unit], handwritten: list[Unit], source: str
) -> list[Unit]:
    """The component's rendered units plus its handwritten ones, by file name. A handwritten
    file may not take a name reserved for rendered output (`<source>-controller.yaml`,
    `<source>-crds.yaml`)."""
    names = {u.filename for u in units}
    for unit in handwritten:
        if unit.filename in names:
            raise EksinfError(
                f"render/{comp.name}/{unit.filename}: name collides with a rendered {source} unit",
                hint=f"Rename the handwritten file; <{source}>-controller.yaml and "
                f"<{source}>-crds.yaml are reserved for {source} output.",
                exit_code=CONTRACT,
            )
    return sorted([*units, *handwritten], key=lambda u: u.filename)


def _renders_bytes(rel: Path) -> bool:
    """Whether a file under render/ can change rendered bytes. A component's links/ (profile
    bindings, read live by lint and the hub) and its HAZARDS.allow (read live by the guard)
    never reach configs/, so editing them must not make configs/ look stale."""

    return not (len(rel.parts) > 1 and rel.parts[1] in (LINKS_DIR, ALLOW_FILE))


INPUT_FILES = ("components.yaml", "versions.env", "charts.lock")


def is_render_input(rel: str) -> bool:
    """Whether a stack-relative posix path is an input `inputs_digest` covers."""
    parts = rel.split("/")
    return rel in INPUT_FILES or (
        len(parts) > 1 and parts[0] == "render" and _renders_bytes(Path(*parts[1:]))
    )


def digest_inputs(files: dict[str, bytes]) -> str:
    """sha256 over the render inputs among `files` (stack-relative posix path -> bytes).

    The one definition of the inputs digest: over the working tree (`inputs_digest`) and over
    a git commit's blobs (`eksinf diff`), so both agree on whether configs/ is stale.
    """
    digest = hashlib.sha256()
    top = [name for name in INPUT_FILES if name in files]
    # render/ files in Path order (by parts), as the digest has always been taken
    under = sorted(
        (r for r in files if r.startswith("render/") and is_render_input(r)),
        key=lambda r: r.split("/"),
    )
    for rel in top + under:
        digest.update(rel.encode() + b"\0")
        digest.update(files[rel] + b"\0")
    return digest.hexdigest()


def inputs_digest(stack: Stack) -> str:
    """sha256 over every input that determines rendered bytes, in a fixed order."""
    paths = [stack.root / "components.yaml", stack.root / "versions.env", stack.lock_path]
    # a link anywhere in render/ (or a linked top-level input) is refused here, the one walk
    # every render and lint makes
    paths += inside.files_under(stack.render_dir, stack.root)
    files = {
        p.relative_to(stack.root).as_posix(): p for p in paths if p.is_file() or p.is_symlink()
    }
    return digest_inputs(
        {
            rel: inside.read_bytes(p, stack.root, stack.root)
            for rel, p in files.items()
            if is_render_input(rel)
        }
    )


def render_stack(
    stack: Stack,
    mirror: Path | None = None,
    engine: HelmEngine | None = None,
    progress: Callable[[str], None] = lambda _msg: None,
    components: list[str] | None = None,
) -> RenderResult:
    """Render every component (or only `components`) in memory. Nothing is written.

    A whole render is looked up in the derived-data cache first (`_cached_result`)."""
    chosen = stack.select(components) if components else list(stack.components)
    # every input is read, and a link or an outside path refused, before any chart is fetched
    inputs = inputs_digest(stack)
    need_helm = any(c.render == "helm" for c in chosen)
    engine = engine or (default_engine() if need_helm else None)
    whole = None if components else _result_key(inputs, engine)
    if whole is not None:
        cached = _cached_result(stack, whole)
        if cached is not None:
            for output in cached.outputs:
                _report(output, progress)
            return cached
    # hand-written units and values are parsed and checked before any chart is fetched, so a
    # refused input leaves the chart cache as it was
    handwritten = {comp.name: _copy_units(stack, comp) for comp in chosen}
    for comp in chosen:
        for spec in comp.charts:
            chart_values(stack, comp, spec)
    lock = read_lock(stack)
    outputs = []
    for comp in chosen:
        if comp.render == "copy":
            output = ComponentOutput(comp, tuple(handwritten[comp.name]))
        elif comp.render == "manifest":
            pinned = manifests.read_lock(stack)
            manifest_mirror = manifests.mirror_dir(mirror, stack.root)
            units, made = _manifest_units(
                stack,
                comp,
                {
                    s.name: manifests.resolve(stack, s, manifest_mirror, pinned)
                    for s in comp.manifests
                },
            )
            units = _with_handwritten(comp, units, handwritten[comp.name], "manifest")
            output = ComponentOutput(comp, tuple(units), manifests=tuple(made))
        else:
            resolved = {spec.name: resolve(stack, spec, mirror, lock) for spec in comp.charts}
            assert engine is not None  # need_helm: a helm component is being rendered
            units, renders = _helm_units(stack, comp, resolved, engine)
            units = _with_handwritten(comp, units, handwritten[comp.name], "chart")
            output = ComponentOutput(comp, tuple(units), tuple(renders))
        outputs.append(output)
        _report(output, progress)
    provenance = {
        "tool": {"name": "eksinf", "version": __version__},
        "engine": {"name": engine.name, "version": engine.version} if engine else None,
        "kubeVersion": stack.kube_version,
        "apiVersions": list(stack.api_versions),
        "inputsSha256": inputs,
        "charts": [
            {
                "component": o.component.name,
                "name": r.spec.name,
                "chart": r.spec.chart,
                "version": r.spec.version,
                "repo": r.spec.repo,
                "sha256": r.sha256,
            }
            for o in outputs
            for r in o.charts
        ],
        "manifests": [
            {
                "component": o.component.name,
                "name": m.spec.name,
                "version": m.spec.version,
                "url": m.spec.url,
                "sha256": m.sha256,
            }
            for o in outputs
            for m in o.manifests
        ],
    }
    result = RenderResult(stack, tuple(outputs), provenance, partial=bool(components))
    if whole is not None:
        _store_result(whole, result)
    return result


def _report(output: ComponentOutput, progress: Callable[[str], None]) -> None:
    """One progress line per chart, manifest or copied component."""
    name = output.component.name
    if output.component.render == "copy":
        progress(f"{name}: {len(output.units)} units (copied)")
    for m in output.manifests:
        left = f", {len(m.excluded)} left out" if m.excluded else ""
        progress(
            f"{name}: {m.spec.name} {m.spec.version}: {m.resources} resources + "
            f"{m.crds} CRDs{left} (manifest from {m.origin})"
        )
    for r in output.charts:
        stubs = f" ({len(r.crd_stubs)} CRD files are stubs, not CRDs)" if r.crd_stubs else ""
        shared = ""
        if r.shared_crds:
            where = ", ".join(sorted(set(r.shared_crds.values())))
            shared = f" ({len(r.shared_crds)} already written once, in {where})"
        origin = f" (from the {r.origin})" if r.origin == RESULT_CACHE else ""
        progress(
            f"{name}: {r.spec.name}: {r.resources} resources + {r.crds} CRDs{shared}{stubs}{origin}"
        )


# ---- the whole-render cache ----------------------------------------------------------------
#
# A render is a pure function of the inputs `inputs_digest` covers, the engine and eksinf's own
# code, so a whole render (every component) is kept in the derived-data cache under those three.
# What is kept is everything a render hands on: unit texts, provenance, and per chart what the
# guard reads (template sources, CRD stubs, the determinism check's two digest sets), so the
# guard, verify and every later stage see exactly what a fresh render gave them. Only renders
# whose determinism check agreed are kept. EKSINF_NO_CACHE=1 (CI's verify) renders afresh.

RESULT_CACHE = "render cache"  # the origin of archives and manifests a cached render stands for


def _result_key(inputs: str, engine: HelmEngine | None) -> str:
    identity = engine.identity if engine is not None else ""
    return cache.key(
        b"render-result-2", cache.code_digest().encode(), inputs.encode(), identity.encode()
    )


def _store_result(key: str, result: RenderResult) -> None:
    charts = [r for o in result.outputs for r in o.charts]
    if any(output_digests(r.first) != r.reference for r in charts):
        return  # a non-deterministic chart is rendered (and reported) every time
    record = {
        "provenance": result.provenance,
        "outputs": [
            {
                "component": o.component.name,
                "units": [[u.filename, u.text] for u in o.units],
                "charts": [
                    {
                        "name": r.spec.name,
                        "sha256": r.sha256,
                        "resources": r.resources,
                        "crds": r.crds,
                        "crd_stubs": list(r.crd_stubs),
                        "shared_crds": r.shared_crds,
                        "first": dataclasses.asdict(r.first),
                        "reference": r.reference,
                    }
                    for r in o.charts
                ],
                "manifests": [
                    {
                        "name": m.spec.name,
                        "sha256": m.sha256,
                        "resources": m.resources,
                        "crds": m.crds,
                        "excluded": list(m.excluded),
                    }
                    for m in o.manifests
                ],
            }
            for o in result.outputs
        ],
    }
    with contextlib.suppress(ValueError, TypeError):  # not plain data: rendered each time
        cache.put("render", key, json.dumps(record, ensure_ascii=False).encode())


def _cached_result(stack: Stack, key: str) -> RenderResult | None:
    data = cache.get("render", key)
    if data is None:
        return None
    try:
        record = json.loads(data)
        outputs = tuple(_cached_output(stack, o) for o in record["outputs"])
        if [o.component.name for o in outputs] != [c.name for c in stack.components]:
            return None
        return RenderResult(stack, outputs, record["provenance"])
    except (ValueError, TypeError, KeyError, IndexError, EksinfError):
        return None  # unreadable or from another stack shape: render afresh


def _cached_output(stack: Stack, raw: dict) -> ComponentOutput:
    comp = stack.component(raw["component"])
    charts = {s.name: s for s in comp.charts}
    specs = {s.name: s for s in comp.manifests}
    units = tuple(
        Unit(comp.name, filename, text, tuple(load_docs(text, f"configs/{comp.name}/{filename}")))
        for filename, text in raw["units"]
    )
    renders = tuple(
        ChartRender(
            charts[r["name"]],
            r["sha256"],
            RESULT_CACHE,
            r["resources"],
            r["crds"],
            tuple(r["crd_stubs"]),
            dict(r["shared_crds"]),
            RenderedChart.from_dict(r["first"]),
            dict(r["reference"]),
            "recorded render",
        )
        for r in raw["charts"]
    )
    made = tuple(
        ManifestRender(
            specs[m["name"]],
            m["sha256"],
            RESULT_CACHE,
            m["resources"],
            m["crds"],
            tuple(m["excluded"]),
        )
        for m in raw["manifests"]
    )
    return ComponentOutput(comp, units, renders, made)


# ---- writing ------------------------------------------------------------------------------


def write_configs(result: RenderResult, out: Path | None = None) -> Path:
    """Write the whole render into configs/ (or `out`): a clean rebuild, so no stale unit stays."""
    if result.partial:
        raise ValueError("a partial render cannot replace configs/")  # a caller bug, not input
    owned = claim(out or result.stack.configs_dir, result.stack.root, allow_configs=True)
    write_tree(owned, result.files())
    if out is None or out == result.stack.configs_dir:
        record_aws_objects(result)
    return owned.path


def record_aws_objects(result: RenderResult) -> None:
    """Record the AWS-backed objects the new configs/ ships in aws-objects.lock (never dropping
    one: model/awsobjects)."""
    planes = {c.name: c.plane for c in result.stack.components}
    now = awsobjects.shipped(
        Resource(f"{o.component.name}/{u.slug}", planes.get(o.component.name, ""), doc)
        for o in result.outputs
        for u in o.units
        for doc in u.docs
    )
    root = result.stack.root
    old = awsobjects.read_lock_text(root)  # read once: parsed here, compared below
    recorded = [] if old is None else awsobjects.parse(load_docs(old, awsobjects.LOCK_FILE))
    text = awsobjects.render_lock(awsobjects.merge(recorded, now))
    if text != old:
        write_file(root / awsobjects.LOCK_FILE, text.encode("utf-8"))


def read_tree(root: Path) -> dict[str, str]:
    """Every file under `root` (configs/ or an --out folder) as text; a link is refused (exit 3),
    so nothing outside the folder is ever compared, diffed or printed."""
    return {
        p.relative_to(root).as_posix(): inside.read_bytes(p, root, root.parent).decode("utf-8")
        for p in inside.files_under(root, root.parent)
        if p.name != MARKER
    }
