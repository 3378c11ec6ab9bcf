"""A release's admission: the units a hub space publishes, checked before they are published.

A release is resolved: every value is written in, so a placeholder anywhere is invalid. Custom
resources are checked against the stack's committed CRDs (a release of the karpenter space
carries Karpenter's CRDs, but the aws-network release needs ACK's from ack-controllers) and, for
a release holding a kind those do not serve, the pinned CRDs the target cluster provides
(validate.provided): only then are they read, so a release that needs none (every eks-kind
release) needs neither their cache nor the offline mirror.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

from eksinf.build.validate import core
from eksinf.build.validate.admission import (
    VERDICTS,
    Admission,
    Crd,
    Report,
    Verdict,
    crd_schema_key,
    crds_of,
    digest,
    schemas_key,
    verdict_key,
)
from eksinf.build.validate.provided import cluster_crd_units
from eksinf.core import cache
from eksinf.core.types import Docs
from eksinf.model import configs

# A unit text's index: what the admission of its documents needs to find their cached verdicts
# (each checked document's apiVersion, kind and digest; each served CRD version's schema digest,
# as crds_of reads it), so a release whose verdicts are all cached parses no YAML. Derived data
# of the text alone, kept in the derived-data cache like the verdicts.
INDEX = "unit-index"
_INDEX_FORMAT = (
    b"unit-index-1: {docs: [[apiVersion, kind, digest]] per checked document, "
    b"crds: [[apiVersion, kind, schema digest]] as crds_of}"
)


def _index_key(text: str) -> str:
    return cache.key(
        _INDEX_FORMAT,
        f"Python {sys.version}".encode(),
        cache.code_digest().encode(),  # the YAML reader and the digests are eksinf's code
        "\0".join(core.libraries()).encode(),
        text.encode("utf-8", "surrogatepass"),
    )


def _index(docs: list[Any]) -> bytes:
    """The index of one unit's documents, as parsed."""
    plain = {
        "docs": [
            [str(d.get("apiVersion")), str(d.get("kind")), digest(d).decode()]
            for d in docs
            if isinstance(d, dict) and d.get("kind")
        ],
        "crds": [
            [api, kind, digest(crd.schema).decode()]
            for (api, kind), crd in crds_of({"": [d for d in docs if isinstance(d, dict)]}).items()
        ],
    }
    return json.dumps(plain, separators=(",", ":")).encode()


def _read_index(data: bytes | None) -> dict[str, list[list[str]]] | None:
    if data is None:
        return None
    try:
        plain = json.loads(data)
        rows = [row for part in ("docs", "crds") for row in plain[part]]
    except (ValueError, TypeError, KeyError, RecursionError):
        return None
    ok = all(
        isinstance(row, list) and len(row) == 3 and all(isinstance(v, str) for v in row)
        for row in rows
    )
    return plain if ok else None


class ReleaseGate:
    """The admission of one stack's releases, for a command that publishes several: the stack's
    committed units are read once, and releases whose CRDs are the committed ones share one
    Admission (one CEL engine over the CRDs' rules, one memo of checked documents)."""

    def __init__(self, stack: Any) -> None:
        self.stack = stack
        self._committed: dict[tuple[str, str], Crd] | None = None
        self._admissions: dict[tuple[tuple[tuple[str, str], int], ...], Admission] = {}
        self._committed_index: dict[tuple[str, str], str] | None = None

    def _committed_digests(self) -> dict[tuple[str, str], str] | None:
        """The committed CRDs' schema digests, from the units' texts and their indexes (a unit
        without one is parsed and indexed); None when one cannot be indexed."""
        if self._committed_index is None:
            found: dict[tuple[str, str], str] = {}
            for component in configs.components_of(self.stack.configs_dir):
                texts = configs.component_texts(self.stack.configs_dir, component)
                keys = [_index_key(text) for _, text in texts]
                cached = cache.get_many(INDEX, keys)
                for (name, text), key in zip(texts, keys, strict=True):
                    index = _read_index(cached.get(key))
                    if index is None:
                        data = _index(list(configs.parse_unit(component, name, text).docs))
                        index = _read_index(data)
                        if index is None:  # a bug, not a state: admit the long way
                            return None
                        cache.put(INDEX, key, data)
                    found.update({(api, kind): d for api, kind, d in index["crds"]})
            self._committed_index = found
        return self._committed_index

    def remember(self, texts: dict[str, str], units: dict[str, Docs]) -> None:
        """Index the texts of a release whose documents `check` is given, so that the next
        admission of the same texts can take every verdict from the cache (`check_texts`)."""
        if cache.enabled():
            cache.put_many(
                INDEX, {_index_key(texts[slug]): _index(docs) for slug, docs in units.items()}
            )

    def check_texts(self, space: str, texts: dict[str, str]) -> Report | None:
        """The report `check` gives for the release whose units have these texts, when every
        document's verdict is in the cache; None otherwise (then parse, `check` and
        `remember`). Nothing is checked here: a verdict is found by the same key `check`
        stores it under, or the release goes the whole way."""
        if not cache.enabled():
            return None
        committed = self._committed_digests()
        if committed is None:
            return None
        keys = {slug: _index_key(text) for slug, text in texts.items()}
        cached = cache.get_many(INDEX, list(keys.values()))
        indexes = {slug: _read_index(cached.get(key)) for slug, key in keys.items()}
        crds = dict(committed)
        for index in indexes.values():
            if index is None:
                return None
            crds.update({(api, kind): d for api, kind, d in index["crds"]})
        builtin = core.schema_dir(self.stack.kube_version)
        wanted: list[tuple[str, str]] = []  # (slug, verdict key) per checked document
        for slug, index in indexes.items():
            for api, kind, doc_digest in index["docs"] if index is not None else ():
                if (api, kind) in crds:
                    schema = crd_schema_key(crds[(api, kind)].encode())
                elif core.has_builtin(builtin, api, kind) or (api, kind) in core.PINNED:
                    schema = schemas_key(builtin, api, kind)
                else:
                    return None  # the cluster's own CRDs may serve it: `check` reads them
                wanted.append((slug, verdict_key(schema, doc_digest.encode(), frozenset(), False)))
        found = cache.get_many(VERDICTS, list(dict.fromkeys(k for _, k in wanted)))
        report = Report(units=len(texts), resources=len(wanted))
        for slug, key in wanted:
            verdict = Verdict.from_json(found[key]) if key in found else None
            if verdict is None:
                return None
            unit = f"release {space}/{slug}.yaml"
            report.findings += [dataclasses.replace(f, unit=unit) for f in verdict.findings]
            if verdict.schema:
                report.by_schema[verdict.schema] = report.by_schema.get(verdict.schema, 0) + 1
            report.rules_evaluated += verdict.rules
            report.transition_rules += verdict.transitions
        return report

    def check(self, space: str, units: dict[str, Docs]) -> Report:
        """`units`: slug -> documents, as the space would publish them."""
        if self._committed is None:
            self._committed = crds_of(configs.read_units(self.stack.configs_dir))
        committed = self._committed
        # a release's own CRD whose schema equals the committed one's is taken as that one, so
        # the releases of one stack share an Admission (keyed below by the CRD objects)
        own = {
            key: committed[key] if key in committed and committed[key].schema == crd.schema else crd
            for key, crd in crds_of(units).items()
        }
        crds = {**committed, **own}
        builtin = core.schema_dir(self.stack.kube_version)
        unserved = {
            (str(d.get("apiVersion")), str(d.get("kind")))
            for docs in units.values()
            for d in docs
            if isinstance(d, dict) and d.get("kind")
        } - set(crds)
        if any(not core.has_builtin(builtin, *key) and key not in core.PINNED for key in unserved):
            crds = {**crds_of(cluster_crd_units(self.stack)), **crds}
        identity = tuple(sorted((key, id(crd)) for key, crd in crds.items()))
        admission = self._admissions.get(identity)
        if admission is None:
            admission = self._admissions[identity] = Admission(crds, self.stack.kube_version)
        return admission.check_units(units, lambda slug: f"release {space}/{slug}.yaml")
