"""Render a stack into units: one YAML file per unit, per component.

Pure steps (`render_stack`) build everything in memory; `build.write.write_configs` is the only
writer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eksinf import __version__
from eksinf.build.determinism import PROOF_SOURCE, RULES, Proof
from eksinf.build.helm import EngineThread, HelmEngine, RenderedChart, default_engine
from eksinf.build.inputs import inputs_digest
from eksinf.build.units import (
    ChartRender,
    ComponentOutput,
    ManifestRender,
    RenderResult,
    Unit,
    copy_units,
    with_handwritten,
)
from eksinf.core import cache
from eksinf.core.types import Doc
from eksinf.errors import EksinfError
from eksinf.model.stack import Component, Stack

if TYPE_CHECKING:
    from eksinf.build.chartsplit import ChartJob

# A render served from the cache (`_cached_result`) needs none of the chart, manifest or split
# modules: they are imported where a render misses the cache, so a warm run never loads them.


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
    # no key for a cache that is off (it hashes every module of eksinf)
    whole = None if components or not cache.enabled() else _result_key(inputs, engine)
    if whole is not None:
        cached = _cached_result(stack, whole)
        if cached is not None:
            for output in cached.outputs:
                _report(output, progress)
            return cached
    from eksinf.build.chartsplit import start, values_files  # the miss path only (see imports)

    done: dict[str, ComponentOutput | EksinfError] = {}
    thread = EngineThread(engine) if engine is not None else None  # the library starts loading
    with thread or contextlib.nullcontext():
        # hand-written units and values are parsed and checked before any chart is fetched, so
        # a refused input leaves the chart cache as it was
        handwritten = {comp.name: copy_units(stack, comp) for comp in chosen}
        charted = [comp for comp in chosen if comp.render == "helm"]
        files = {comp.name: {spec.name: values_files(stack, comp, spec) for spec in comp.charts}
                 for comp in charted}  # fmt: skip
        # The engine's thread, once its library has loaded, reads the values as Helm does, then
        # fetches the charts and starts rendering each one the cache lacks (`start`); pinned
        # manifests need no engine, so they are split meanwhile.
        started = thread.call(start, stack, charted, files, mirror, thread) if thread else None

        def outcome(
            comp: Component, jobs_of: list[ChartJob], on: EngineThread | None
        ) -> ComponentOutput | EksinfError:
            """A component's output, or the input error that stopped it (raised in stack
            order, below)."""
            try:
                return _render_component(stack, comp, handwritten[comp.name], jobs_of, mirror, on)
            except EksinfError as exc:
                return exc

        manifest_first = sorted(chosen, key=lambda c: c.render != "manifest")
        for comp in manifest_first:
            if comp.render != "manifest":
                break
            done[comp.name] = outcome(comp, [], None)
        # a value Helm refuses, or a chart that cannot be fetched, is raised before any split
        # chart: each comes before any other failure
        jobs: dict[str, list[ChartJob]] = started.result() if started else {}
        # Reported, and a failure raised, in stack order all the same: a component's error
        # waits until every component before it is done, so the first failing one is named.
        reported = 0
        for comp in manifest_first:
            if comp.name not in done:
                done[comp.name] = outcome(comp, jobs.get(comp.name, []), thread)
            while reported < len(chosen) and chosen[reported].name in done:
                ready = done[chosen[reported].name]
                if isinstance(ready, EksinfError):
                    raise ready
                _report(ready, progress)
                reported += 1
    outputs = [out for comp in chosen if isinstance(out := done[comp.name], ComponentOutput)]
    provenance = _provenance(stack, engine, inputs, outputs)
    result = RenderResult(stack, tuple(outputs), provenance, partial=bool(components))
    if whole is not None and _store_result(whole, result):
        result = dataclasses.replace(result, key=whole)
    return result


def _render_component(
    stack: Stack,
    comp: Component,
    handwritten: list[Unit],
    jobs: list[ChartJob],
    mirror: Path | None,
    engine: EngineThread | None,
) -> ComponentOutput:
    """One component's units: copied, split from pinned manifests, or split from its charts
    (`jobs`: each chart's, made ready before any component was split)."""
    from eksinf.build import manifests  # the miss path only (see the imports)
    from eksinf.build.chartsplit import helm_units
    from eksinf.build.manifestsplit import manifest_units

    if comp.render == "copy":
        return ComponentOutput(comp, tuple(handwritten))
    if comp.render == "manifest":
        pinned = manifests.read_lock(stack)
        manifest_mirror = manifests.mirror_dir(mirror, stack.root)
        fetched = {
            s.name: manifests.resolve(stack, s, manifest_mirror, pinned) for s in comp.manifests
        }
        units, made = manifest_units(stack, comp, fetched)
        units = with_handwritten(comp, units, handwritten, "manifest")
        return ComponentOutput(comp, tuple(units), manifests=tuple(made))
    assert engine is not None  # need_helm: a helm component is being rendered
    units, renders = helm_units(comp, jobs, engine)
    units = with_handwritten(comp, units, handwritten, "chart")
    return ComponentOutput(comp, tuple(units), tuple(renders))


def _provenance(
    stack: Stack, engine: HelmEngine | None, inputs: str, outputs: list[ComponentOutput]
) -> dict[str, Any]:
    """The provenance record: tool, engine, cluster version, inputs digest, every pinned source."""
    return {
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
        b"render-result-4",
        cache.code_digest().encode(),
        RULES.encode(),  # which charts were proven deterministic, so rendered once
        inputs.encode(),
        identity.encode(),
    )


def _store_result(key: str, result: RenderResult) -> bool:
    """Keep a whole render under `key` (its record's JSON, a newline, its texts); whether it
    was kept (only a deterministic one is)."""
    charts = [r for o in result.outputs for r in o.charts]
    if any(r.first.digests != r.reference for r in charts):
        return False  # a non-deterministic chart is rendered (and reported) every time
    texts = cache.Texts()
    record = {
        "provenance": result.provenance,
        "outputs": [
            {
                "component": o.component.name,
                "units": [[u.filename, texts.put(u.text)] for u in o.units],
                "charts": [
                    {
                        "name": r.spec.name,
                        "sha256": r.sha256,
                        "resources": r.resources,
                        "crds": r.crds,
                        "crd_stubs": list(r.crd_stubs),
                        "shared_crds": r.shared_crds,
                        "first": r.first.to_record(texts),
                        "reference": r.reference,
                        "checked": r.reference_source,
                        # why the chart was rendered once or twice
                        "proof": r.proof.as_dict() if r.proof else None,
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
    try:  # JSON escapes every newline: the one newline in the entry ends the record
        head = json.dumps(record, ensure_ascii=False).encode()
    except (ValueError, TypeError):  # not plain data: rendered each time
        return False
    cache.put_parts("render", key, texts.entry(head))
    return True


def _cached_result(stack: Stack, key: str) -> RenderResult | None:
    data = cache.get("render", key)
    if data is None:
        return None
    try:
        head, texts = cache.Texts.split(data)
        record = json.loads(head)
        outputs = tuple(_cached_output(stack, o, texts) for o in record["outputs"])
        if not texts.done():
            return None
        if [o.component.name for o in outputs] != [c.name for c in stack.components]:
            return None
        return RenderResult(stack, outputs, record["provenance"], key=key)
    except (ValueError, TypeError, KeyError, IndexError, EksinfError):
        return None  # unreadable or from another stack shape: render afresh


def _cached_output(stack: Stack, raw: Doc, texts: cache.Texts) -> ComponentOutput:
    comp = stack.component(raw["component"])
    charts = {s.name: s for s in comp.charts}
    specs = {s.name: s for s in comp.manifests}
    units = tuple(
        Unit(comp.name, filename, texts.take(size))  # parsed when a stage asks (see Unit)
        for filename, size in raw["units"]
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
            RenderedChart.from_record(r["first"], texts),
            dict(r["reference"]),
            # a proven chart's reference is its own render; any other was checked when kept
            PROOF_SOURCE if r["checked"] == PROOF_SOURCE else "recorded render",
            Proof.from_dict(r["proof"]),
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
