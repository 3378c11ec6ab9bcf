"""A pinned upstream manifest split into units like a chart."""

from __future__ import annotations

import yaml

from eksinf.build.manifests import ResolvedManifest
from eksinf.build.units import CONTROLLER_WAVE, CRD_WAVE, ManifestRender, Unit, kind_of, stamp_wave
from eksinf.core import yamlsplice
from eksinf.core.types import Doc
from eksinf.core.yamldump import dump_docs
from eksinf.core.yamlio import load_docs
from eksinf.errors import CONTRACT, EksinfError
from eksinf.model.resources import CLUSTER_SCOPED_KINDS
from eksinf.model.stack import Component, Stack


def manifest_units(
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
        # each document's own text, to write the stamps into (None: the stream is not one the
        # splicer reads exactly, and every document is written again)
        texts = yamlsplice.documents(manifest.text, len(docs))
        controllers: list[Doc] = []
        crds: list[Doc] = []
        excluded: list[str] = []
        spliced: dict[int, yamlsplice.Splice | None] = {}
        for index, doc in enumerate(docs):
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
            before = yamlsplice.metadata_copy(doc) if texts is not None else None
            if doc["kind"] not in CLUSTER_SCOPED_KINDS:
                doc.setdefault("metadata", {}).setdefault("namespace", spec.namespace)
            if doc["kind"] == "CustomResourceDefinition":
                crds.append(stamp_wave(doc, CRD_WAVE))
            else:
                controllers.append(stamp_wave(doc, CONTROLLER_WAVE))
            if texts is not None:
                spliced[id(doc)] = yamlsplice.splice(texts[index], doc, before)
        missing = sorted(set(spec.exclude) - set(excluded))
        if missing:
            raise EksinfError(
                f"components.yaml: component {comp.name} manifest {spec.name} excludes "
                f"{', '.join(missing)}, which {label} does not hold",
                hint="Remove the stale exclude entry (the upstream manifest changed).",
                exit_code=CONTRACT,
            )
        checked = dict(zip(spliced, yamlsplice.verify(list(spliced.values())), strict=True))
        for suffix, part in (("controller", controllers), ("crds", crds)):
            if part:
                text = _unit_text(part, checked)
                units.append(Unit(comp.name, f"{spec.name}-{suffix}.yaml", text, tuple(part)))
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


def _unit_text(docs: list[Doc], spliced: dict[int, yamlsplice.Splice | None]) -> str:
    """The documents as upstream wrote them, with their stamps spliced in; those the splicer
    does not handle are written by the one writer. Either way each begins with `---`."""
    if not any(spliced.get(id(doc)) for doc in docs):
        return dump_docs(docs)
    out: list[str] = []
    for doc in docs:
        made = spliced.get(id(doc))
        if made is None:
            out.append(dump_docs([doc]))
        else:
            out.append("---\n")
            out.extend(made.pieces)
    return "".join(out)
