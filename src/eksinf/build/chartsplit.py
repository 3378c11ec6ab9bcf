"""A chart's render split into units: `<chart>-controller.yaml` at the controller wave and
`<chart>-crds.yaml` at the CRD wave, each CRD kept once per component, with the determinism
check's reference and the chart-render cache."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from eksinf.build.charts import ResolvedChart, read_lock, resolve
from eksinf.build.determinism import PROOF_SOURCE, Proof, prove
from eksinf.build.helm import (
    EngineThread,
    HelmEngine,
    RenderedChart,
    RenderOptions,
    read_values,
)
from eksinf.build.units import (
    CONTROLLER_WAVE,
    CRD_WAVE,
    ChartRender,
    Unit,
    kind_of,
    source_dir,
    stamp_wave,
)
from eksinf.core import cache, inside
from eksinf.core.types import Doc, Docs
from eksinf.core.yamldump import dump_docs
from eksinf.core.yamlio import (
    CACHE_FORMAT,
    docs_json,
    json_exact,
    load_docs_uncached,
    load_mapping_docs,
    read_source_text,
)
from eksinf.errors import CONTRACT, FAILURE, EksinfError
from eksinf.model.digest import sha256_hex
from eksinf.model.stack import ChartSpec, Component, Stack

if TYPE_CHECKING:
    from concurrent.futures import Future


def merge_values(base: Doc, override: Doc) -> Doc:
    """Helm's rule: maps merge key by key, everything else is replaced."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_values(out[key], value)
        else:
            out[key] = value
    return out


@dataclass(frozen=True)
class ValuesFile:
    """One values file of a chart, read and checked strictly: its label, text and documents."""

    label: str
    text: str
    docs: Docs


def values_files(stack: Stack, comp: Component, spec: ChartSpec) -> list[ValuesFile]:
    """The chart's values files in order, each checked strictly (syntax, duplicate keys, bounds,
    each with its position); Helm expands anchors in values files, so they are allowed."""
    files = []
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
        files.append(ValuesFile(label, text, load_mapping_docs(path, text, label=label)))
    return files


def merged_values(readings: list[Doc]) -> Doc:
    """Values files' readings merged in order, as Helm merges `-f` files."""
    values: Doc = {}
    for reading in readings:
        values = merge_values(values, reading)
    return values


def chart_values(stack: Stack, comp: Component, spec: ChartSpec) -> Doc:
    """The chart's values as eksinf's reader reads them, files merged in order: for the guard,
    which looks only at strings (a render reads each file as the Helm engine does, in `start`);
    plain scalars are taken as Helm takes them, and the engine is not loaded."""
    return merged_values([doc for f in values_files(stack, comp, spec) for doc in f.docs])


# a line that starts a document (`---` alone or before a space), found after its line break: a
# pattern that starts with `^` in MULTILINE mode is tried at every character of the text, one
# that starts with a character is searched for at memchr's speed (~10x quicker over a render)
_DOC_START = re.compile(r"\n---(?= |\n|\Z)")


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


Parsed = list[list[Any] | None]  # each output file's documents as parsed (None: not kept)


def _parse_output(
    comp: Component, spec: ChartSpec, rendered: RenderedChart, kept: Parsed | None
) -> tuple[list[tuple[str, bool, list[Any]]], list[tuple[list[Any], bool]]]:
    """Parse each file the engine produced once: (origin, is a crds/ file, documents), and each
    file's documents as parsed, to keep with the render, with whether they are known to be
    JSON-exact. `kept`: what an earlier run kept, taken instead of a parse."""
    crd_files = {path for path, _ in rendered.crds}
    parsed, raw = [], []
    for at, (origin, text) in enumerate(rendered.files()):
        docs = kept[at] if kept is not None else None
        exact = docs is not None
        if docs is None:
            try:
                docs, exact = load_docs_uncached(text)
            except yaml.YAMLError as exc:
                raise EksinfError(
                    f"{comp.name}: chart {spec.name} template {origin} rendered invalid YAML: "
                    f"{str(exc).splitlines()[0]}",
                    hint="Check the chart values that feed this template.",
                    exit_code=CONTRACT,
                ) from exc
        raw.append((docs, exact))
        # sorted into a new list (stable: kind order only); the split stamps waves on the
        # documents themselves, so a record is made of `raw` before it
        parsed.append((origin, origin in crd_files, sorted(docs, key=_install_rank)))
    return parsed, raw


def _split_chart(
    comp: Component, spec: ChartSpec, parsed: list[tuple[str, bool, list[Any]]]
) -> tuple[Docs, Docs, list[str]]:
    """Split one chart's output into (controller docs, CRD docs, CRD stubs), stamping waves.

    A CRD stub is a file under crds/ that holds a bare string instead of a CRD: a symlink that
    the chart's packaging turned into a file. It is not a document we can ship, so it is returned
    separately and the guard reports it (hazard `crd-stub`) rather than it vanishing silently.
    """
    controllers: Docs = []
    crds: Docs = []
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
    """The first chart of a component to emit a CRD, and the file that emitted it: its unit
    is the one that writes the CRD."""

    chart: str
    origin: str  # the chart file that emitted it
    doc: Doc

    @property
    def unit(self) -> str:
        return f"{self.chart}-crds.yaml"


def _dedupe_crds(
    comp: Component,
    spec: ChartSpec,
    parsed: list[tuple[str, bool, list[Any]]],
    crds: Docs,
    owners: dict[str, _CrdSource],
) -> tuple[Docs, dict[str, str]]:
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
    kept: Docs = []
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


REFERENCES = "render-references"  # the cache space of determinism references


def _reference_digests(
    engine: HelmEngine,
    chart: ResolvedChart,
    values: Doc,
    opts: RenderOptions,
    first: RenderedChart,
    judge: Callable[[], Proof],
) -> tuple[dict[str, str], str, Proof | None]:
    """The determinism check's reference for `first`: digests of a render of the same inputs
    that agreed with another, where they came from, and the static proof's verdict when it was
    asked (None when a record answered).

    The strictest reference comes first: the record of an earlier run, kept in the cache under
    every input (engine and version, archive, values, options). It also catches output that
    changes by the day (`now | date`), which a second render a millisecond later would not, and
    it spares the proof. Else the chart's templates are judged (`judge`: build/determinism.py,
    pure functions only, no root context printed): a proven chart renders the same bytes every
    time, so its first render is its own reference. Else the chart is rendered a second time.
    Either way the reference is recorded, for the next run that renders these inputs.
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
            return recorded, "recorded render", None
    except ValueError:
        pass
    proof = judge()
    if proof.proven:
        reference, source = first.digests, PROOF_SOURCE
    else:
        second = engine.render(chart.archive, values, opts, templates=False)
        reference, source = second.digests, "second render"
    if reference == first.digests:
        # an unwritable cache costs a second render or a proof next time, nothing more
        cache.write_record(REFERENCES, key, json.dumps(reference, sort_keys=True).encode())
    return reference, source, proof


def _render_key(engine: HelmEngine, chart: ResolvedChart, values: Doc, opts: RenderOptions) -> str:
    return cache.key(
        b"render-3",  # a record holds which subcharts ran and whether the values hold `{{`
        CACHE_FORMAT,  # the record holds the output's parse, as yamlio reads it
        engine.identity.encode(),
        chart.sha256.encode(),
        json.dumps(values, sort_keys=True, default=str).encode(),
        json.dumps(dataclasses.asdict(opts), sort_keys=True).encode(),
    )


@dataclass(frozen=True)
class _Kept:
    """A chart's record from the derived-data cache: its output, its files' documents as
    parsed, and the static proof's verdict on its templates (None when the record's verdict is
    under other rules than this eksinf's)."""

    rendered: RenderedChart
    parsed: Parsed
    proof: Proof | None


def _cached_render(key: str) -> _Kept | None:
    """A chart's record (`_Kept`). An entry is stored only after the determinism check agreed
    (below), so serving one never skips that check: the check compares against the recorded
    reference, exactly as it does for a fresh render once one is recorded."""
    data = cache.get("helm", key)
    if data is None:
        return None
    try:
        head, texts = cache.Texts.split(data)
        record = json.loads(head)
        rendered = RenderedChart.from_record(record["render"], texts)
        kept, verdict = record["docs"], record["proof"]
        if not texts.done() or not isinstance(kept, list):
            return None
        if len(kept) != len(rendered.files()):
            return None
        if not all(docs is None or isinstance(docs, list) for docs in kept):
            return None
        return _Kept(rendered, kept, Proof.from_dict(verdict))
    except (ValueError, KeyError, TypeError, RecursionError):
        return None


def _store_render(
    key: str, rendered: RenderedChart, parsed: list[tuple[list[Any], bool]], proof: Proof | None
) -> None:
    """Keep a chart's output (its texts as they are, beside a JSON head: see cache.Texts), its
    parse and its proof's verdict in one entry: a later render of the same chart (one whose
    values elsewhere in the stack changed) reads one entry, not one per file, and scans none
    of its templates. A file's documents that JSON would not give back exactly are left out
    (None), and parsed again when read."""
    if not cache.enabled():  # not encoded for a cache that is off
        return
    kept = [docs if exact or json_exact(docs) else None for docs, exact in parsed]
    texts = cache.Texts()
    verdict = proof.as_dict() if proof else None  # None: not asked (a reference was recorded)
    record = {"render": rendered.to_record(texts), "docs": kept, "proof": verdict}
    try:
        head = docs_json(record)
    except (ValueError, TypeError, RecursionError):
        return
    cache.put_parts("helm", key, texts.entry(head))


@dataclass(frozen=True)
class ChartJob:
    """One chart of a component, made ready on the engine's thread (`start`): its pinned
    archive, values (read once, as Helm reads them) and options, the key of its record, and its
    first render: the record when the cache holds one, else the engine's render, queued there
    so that it runs while the charts before it are split."""

    spec: ChartSpec
    chart: ResolvedChart
    values: Doc
    opts: RenderOptions
    key: str
    cached: _Kept | None
    pending: Future[RenderedChart] | None

    def first(self) -> RenderedChart:
        """The chart's first render: its record's, or the engine's (waited for)."""
        if self.cached is not None:
            return self.cached.rendered
        assert self.pending is not None  # start() makes one of the two
        return self.pending.result()


def start(
    stack: Stack,
    charted: list[Component],
    files: dict[str, dict[str, list[ValuesFile]]],
    mirror: Path | None,
    engine: EngineThread,
) -> dict[str, list[ChartJob]]:
    """Each component's charts as jobs, in components.yaml order, run on the engine's thread
    (`EngineThread.call`): every values file read as Helm reads it (`read_values`), all before
    any chart is fetched, so a value Helm refuses leaves the chart cache as it was; then each
    chart fetched and keyed, and each one the cache does not hold queued for rendering."""
    values = {
        comp.name: {
            spec: merged_values([read_values(f.text, f.label) for f in fs])
            for spec, fs in files[comp.name].items()
        }
        for comp in charted
    }
    lock = read_lock(stack)
    jobs: dict[str, list[ChartJob]] = {}
    for comp in charted:
        jobs[comp.name] = []
        for spec in comp.charts:
            chart = resolve(stack, spec, mirror, lock)
            given = values[comp.name][spec.name]
            opts = RenderOptions(
                spec.release, spec.namespace, stack.kube_version, stack.api_versions
            )
            key = _render_key(engine, chart, given, opts)
            cached = _cached_render(key)
            pending = None if cached else engine.submit(chart.archive, given, opts)
            jobs[comp.name].append(ChartJob(spec, chart, given, opts, key, cached, pending))
    return jobs


def helm_units(
    comp: Component, jobs: list[ChartJob], engine: HelmEngine
) -> tuple[list[Unit], list[ChartRender]]:
    """The component's chart units, from its jobs (`start`)."""
    units: list[Unit] = []
    renders: list[ChartRender] = []
    crd_owners: dict[str, _CrdSource] = {}
    for job in jobs:
        spec, chart, values, opts = job.spec, job.chart, job.values, job.opts
        render_key, cached = job.key, job.cached
        first = job.first()

        def judge(cached: _Kept | None = cached, first: RenderedChart = first) -> Proof:
            """The verdict a record keeps, under these rules; else the templates the engine
            evaluated are scanned (it holds for these values: the record's key has them)."""
            known = cached.proof if cached else None
            return known or prove(first.evaluated(), values_plain=first.values_plain)

        reference, reference_source, proof = _reference_digests(
            engine, chart, values, opts, first, judge
        )
        parsed, raw = _parse_output(comp, spec, first, cached.parsed if cached else None)
        if cached is None and reference == first.digests:
            _store_render(render_key, first, raw, proof)
        emitted = sum(1 for _, _, docs in parsed for d in docs if kind_of(d) is not None)
        controllers, crds, stubs = _split_chart(comp, spec, parsed)
        crds, shared = _dedupe_crds(comp, spec, parsed, crds, crd_owners)
        written = 0
        for suffix, docs in (("controller", controllers), ("crds", crds)):
            if not docs:  # an empty CRD file would ship as an empty unit
                continue
            text = dump_docs(docs)
            # count the documents the file really holds: a lost separator merges two
            written += len(_DOC_START.findall("\n" + text))
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
                proof,
            )
        )
    return units, renders
