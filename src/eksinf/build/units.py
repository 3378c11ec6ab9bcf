"""What a render hands on: units, per-chart and per-manifest records, a component's output and
the whole result; and a component's handwritten units under render/<component>/."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from eksinf.build.determinism import Proof
from eksinf.build.helm import RenderedChart
from eksinf.core import cache, inside
from eksinf.core.types import Doc
from eksinf.core.yamlio import load_docs, load_mapping_docs, read_source_text
from eksinf.errors import CONTRACT, EksinfError
from eksinf.model.configs import SYNC_WAVE
from eksinf.model.stack import ChartSpec, Component, ManifestSpec, Stack

CRD_WAVE = "-20"
CONTROLLER_WAVE = "-10"
PROVENANCE_FILE = "provenance.json"
UNIT_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class Unit:
    """One committed file: its name is the unit's identity, its documents are its content.

    A render made its documents and its text together (`parsed`); a render read back from the
    cache has the text only, and its documents are parsed when a stage first asks for them (a
    warm render or verify whose stages read what they derive from the render under its key,
    RenderResult.key, never does)."""

    component: str
    filename: str
    text: str
    parsed: tuple[Doc, ...] | None = field(default=None, compare=False, repr=False)

    @functools.cached_property
    def docs(self) -> tuple[Doc, ...]:
        if self.parsed is not None:
            return self.parsed
        return tuple(load_docs(self.text, f"configs/{self.component}/{self.filename}"))

    @property
    def slug(self) -> str:
        return self.filename.rsplit(".", 1)[0]


@dataclass(frozen=True)
class ChartRender:
    """One chart of a component as rendered: its pin, what it emitted, and what the guard and the
    determinism check read."""

    spec: ChartSpec
    sha256: str
    origin: str
    resources: int
    crds: int
    crd_stubs: tuple[str, ...]  # crds/ files that hold a string, not a CRD (see chartsplit)
    # CRDs this chart emits that an earlier chart of the component already wrote (see
    # chartsplit): CRD name -> the unit that holds it. Counted by the conservation check.
    shared_crds: dict[str, str]
    first: RenderedChart
    # sha256 per output file of an independent render of the same inputs (determinism check):
    # a second render now, or the record of an earlier run that rendered twice and agreed.
    reference: dict[str, str]
    reference_source: str  # "second render" | "recorded render" | PROOF_SOURCE
    # the static proof's verdict on the chart's templates (build/determinism.py); None when it
    # was not asked: an earlier run's record of the same inputs was the reference
    proof: Proof | None


@dataclass(frozen=True)
class ManifestRender:
    """One pinned upstream manifest of a component as split: its pin and what it held."""

    spec: ManifestSpec
    sha256: str
    origin: str
    resources: int
    crds: int
    excluded: tuple[str, ...]


@dataclass(frozen=True)
class ComponentOutput:
    """One component's render: its units, and the charts and manifests they came from."""

    component: Component
    units: tuple[Unit, ...]
    charts: tuple[ChartRender, ...] = ()
    manifests: tuple[ManifestRender, ...] = ()


@dataclass(frozen=True)
class RenderResult:
    """A whole render in memory (or, `partial`, some of its components) with its provenance
    record."""

    stack: Stack
    outputs: tuple[ComponentOutput, ...]
    provenance: dict[str, Any] = field(default_factory=dict)
    partial: bool = False  # only some components were rendered (guard/verify --component)
    # The derived-data key this whole render is kept under (build/render.py), which decides
    # every byte of it: what is derived from the render alone (the guard's findings) is kept
    # under it too. "" when it is not kept (partial, non-deterministic, or the cache off). A
    # bundle's guard keys the committed units it reads the same way (publish/bundle.py).
    key: str = ""

    def files(self) -> dict[str, str]:
        """Relative path under configs/ -> text, including the provenance record.

        A partial render has no provenance record: it describes the whole stack.
        """
        out = {f"{o.component.name}/{u.filename}": u.text for o in self.outputs for u in o.units}
        if not self.partial:
            out[PROVENANCE_FILE] = json.dumps(self.provenance, indent=2, sort_keys=True) + "\n"
        return out


T = TypeVar("T")
DERIVED_SPACE = "render-derived"
_DERIVED_FORMAT = b"render-derived-1"


def kept(
    result: RenderResult,
    name: str,
    compute: Callable[[], T],
    encode: Callable[[T], Any],
    decode: Callable[[Any], T],
) -> T:
    """`compute()`, a value derived from `result` alone (its units, charts, stack inputs) and
    eksinf's code, which the render's key decides (RenderResult.key): kept under that key as
    JSON (`encode`), read back with `decode`. Without a key, or when what is kept is not what
    `decode` reads (it raises), it is computed afresh."""
    entry = cache.key(_DERIVED_FORMAT, name.encode(), result.key.encode()) if result.key else None
    if entry is not None:
        data = cache.get(DERIVED_SPACE, entry)
        if data is not None:
            try:
                return decode(json.loads(data))
            except (ValueError, TypeError, KeyError, IndexError, AttributeError):
                pass
    value = compute()
    if entry is not None:
        cache.put(DERIVED_SPACE, entry, json.dumps(encode(value)).encode())
    return value


def kind_of(doc: Any) -> str | None:
    return doc.get("kind") if isinstance(doc, dict) else None


def resource_id(doc: Doc) -> str:
    """`Kind/namespace/name`, or `Kind/name` for cluster-scoped objects."""
    meta = doc.get("metadata") or {}
    ns = meta.get("namespace")
    name = meta.get("name", "?")
    return f"{doc.get('kind')}/{ns}/{name}" if ns else f"{doc.get('kind')}/{name}"


def stamp_wave(doc: Doc, wave: str) -> Doc:
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


def copy_units(stack: Stack, comp: Component) -> list[Unit]:
    units = []
    for path in source_files(stack, comp):
        label = str(path.relative_to(stack.root))
        text = read_source_text(path, label, base=stack.root)
        # units refuse anchors: they do not survive flattening (docs/flattening.md); and plain
        # scalars YAML readers disagree on (`y`, `0755`): the author says which one is meant
        docs = load_mapping_docs(path, text, label=label, aliases=False, ambiguous=False)
        units.append(Unit(comp.name, path.name, text, tuple(docs)))
    return units


def with_handwritten(
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
