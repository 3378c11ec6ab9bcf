"""`eksinf validate`: the API server's admission of every unit, offline.

Each document is checked against the schema the server would use:

- a custom resource against the openAPIV3Schema of its CRD found in the stack (validate.structural)
  including the CRD's CEL rules (validate.cel);
- a built-in kind against the pinned Kubernetes version's schema (validate.core) and the
  server's semantic rules no schema says (validate.semantic);
- a kind the cluster provides, or that is never applied, against a schema shipped in the package
  (validate.core.PINNED);
- every kind's metadata (validate.meta).

A kind with none of these is invalid: the server knows no such resource.

Raw units hold `confighubplaceholder` where a profile link writes a value: there it is
`unresolved` (not checked), anywhere else it is invalid. Resolved units (the profile's values
written in, as the hub publishes them) must pass fully.

A document's verdict (its findings, empty when admitted, with the counts the report sums) is a
pure function of the document, the schema it is checked against, the paths links write in it,
and the code and libraries that check it. It is kept in the derived-data cache (space
`verdicts`, eksinf.core.cache: HMAC-checked plain JSON) under the sha256 of all of those, so a
run over documents checked before checks nothing again, and anything new or changed (other
bytes, another CRD schema, an edited eksinf) is checked by every rule. A missing, corrupt or
forged entry is recomputed.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from eksinf import links
from eksinf.build.validate import core, meta, semantic, structural
from eksinf.build.validate.structural import INVALID, NOT_EVALUATED, UNRESOLVED
from eksinf.core import cache
from eksinf.core.types import Doc, Docs
from eksinf.model import configs, paths, placeholder
from eksinf.model.resources import find_resource


@dataclass(frozen=True)
class Finding:
    status: str  # invalid | unresolved | not-evaluated
    unit: str  # where the document lives, e.g. configs/karpenter/nodepools.yaml
    resource: str  # apiVersion Kind namespace/name
    path: str
    rule: str
    value: Any
    message: str = ""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def line(self) -> str:
        value = repr(self.value)
        value = value if len(value) <= 120 else value[:117] + "..."
        tail = f": {self.message}" if self.message else ""
        return f"{self.status}: {self.unit} {self.resource} {self.path or '(object)'} [{self.rule}] value {value}{tail}"


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    units: int = 0
    resources: int = 0
    by_schema: dict[str, int] = field(default_factory=dict)  # crd | builtin | pinned
    rules_evaluated: int = 0
    transition_rules: int = 0

    def count(self, status: str) -> int:
        return sum(1 for f in self.findings if f.status == status)

    @property
    def ok(self) -> bool:
        return not self.count(INVALID)

    def merge(self, other: Report) -> None:
        self.findings += other.findings
        self.units += other.units
        self.resources += other.resources
        for key, value in other.by_schema.items():
            self.by_schema[key] = self.by_schema.get(key, 0) + value
        self.rules_evaluated += other.rules_evaluated
        self.transition_rules += other.transition_rules

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "units": self.units,
            "resources": self.resources,
            "schemas": dict(sorted(self.by_schema.items())),
            "invalid": self.count(INVALID),
            "unresolved": self.count(UNRESOLVED),
            "notEvaluated": self.count(NOT_EVALUATED),
            "celRulesEvaluated": self.rules_evaluated,
            "celTransitionRulesSkipped": self.transition_rules,
            "findings": [f.as_dict() for f in self.findings],
        }


@dataclass(frozen=True)
class Crd:
    schema: Doc
    source: str  # the unit holding the CRD


def _version_schema(version: Any) -> Any:  # the caller checks the schema is a mapping
    return (
        ((version.get("schema") or {}).get("openAPIV3Schema"))
        if isinstance(version, dict)
        else None
    )


def crds_of(units: dict[str, Docs]) -> dict[tuple[str, str], Crd]:
    """(apiVersion, kind) -> the served version's schema, for every CRD among `units`."""
    out: dict[tuple[str, str], Crd] = {}
    for key, docs in units.items():
        for doc in docs:
            if doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc.get("spec") or {}
            kind = (spec.get("names") or {}).get("kind")
            for version in spec.get("versions") or []:
                schema = _version_schema(version)
                if version.get("served", True) and isinstance(schema, dict):
                    out[(f"{spec.get('group')}/{version.get('name')}", str(kind))] = Crd(
                        schema, key
                    )
    return out


def cel_rules(crds: Iterable[Crd]) -> list[str]:
    found: list[str] = []

    def walk(node: Any, depth: int = 0) -> None:
        if depth > 64 or not isinstance(node, dict):  # bound the walk: schemas are trees
            return
        found.extend(v.get("rule", "") for v in node.get("x-kubernetes-validations") or [])
        for value in (node.get("properties") or {}).values():
            walk(value, depth + 1)
        for key in ("items", "additionalProperties"):
            walk(node.get(key), depth + 1)
        for key in ("allOf", "anyOf", "oneOf"):
            for sub in node.get(key) or []:
                walk(sub, depth + 1)

    for crd in crds:
        walk(crd.schema)
    return found


def _resource(doc: Doc) -> str:
    m = doc.get("metadata")
    m = m if isinstance(m, dict) else {}
    ns = m.get("namespace")
    return f"{doc.get('apiVersion')} {doc.get('kind')} {ns + '/' if ns else ''}{m.get('name', '?')}"


VERDICTS = "verdicts"  # the derived-data space of cached verdicts
# in the key: the entry's layout; a change of it is a change of key
_VERDICT_FORMAT = (
    b"verdict-1: {findings: [[status, resource, path, rule, value, message]], schema: "
    b"crd|builtin|pinned|'', rules: int, transitions: int, counted: [CEL rule]}"
)


@dataclass(frozen=True)
class Verdict:
    """One document's check, whoever the unit holding it: findings carry no unit."""

    findings: list[Finding]  # with unit ""
    schema: str  # crd | builtin | pinned | "" (no schema: the kind is refused)
    rules: int  # CEL rules evaluated
    transitions: int  # transition rules skipped
    counted: frozenset[str]  # the CEL rules that ran to a pass or a failure

    def to_json(self) -> bytes | None:
        """The entry's bytes, or None when JSON cannot hold it exactly (a value with an integer
        key, say): such a verdict is recomputed every run, never served different."""
        plain = {
            "findings": [
                [f.status, f.resource, f.path, f.rule, f.value, f.message] for f in self.findings
            ],
            "schema": self.schema,
            "rules": self.rules,
            "transitions": self.transitions,
            "counted": sorted(self.counted),
        }
        try:
            text = json.dumps(plain, separators=(",", ":"))
            if repr(json.loads(text)) != repr(plain):
                return None
        except (TypeError, ValueError, RecursionError):
            return None
        return text.encode()

    @staticmethod
    def from_json(data: bytes) -> Verdict | None:
        """The verdict an entry holds, or None if it is not one (then it is recomputed)."""
        try:
            plain = json.loads(data)
            findings = [
                Finding(status, "", resource, path, rule, value, message)
                for status, resource, path, rule, value, message in plain["findings"]
            ]
            verdict = Verdict(
                findings,
                plain["schema"],
                plain["rules"],
                plain["transitions"],
                frozenset(plain["counted"]),
            )
        except (ValueError, TypeError, KeyError, RecursionError):
            return None
        texts = [t for f in findings for t in (f.status, f.resource, f.path, f.rule, f.message)]
        ok = all(isinstance(t, str) for t in texts) and isinstance(verdict.schema, str)
        ok = ok and all(type(n) is int for n in (verdict.rules, verdict.transitions))
        return verdict if ok and all(isinstance(r, str) for r in verdict.counted) else None


def digest(value: Any) -> bytes:
    """sha256 of a parsed document or schema's `repr`, which names every type, key order and
    escape exactly (1, 1.0, True and "1" differ; so do a date and its text). Plain data only
    (what a YAML parse gives), so no `repr` holds an object's address."""
    return cache.key(repr(value).encode("utf-8", "backslashreplace")).encode()


# What a kind's verdicts depend on besides the document and eksinf's code: the CRD's schema (and
# the CEL libraries), else the built-in or pinned schema (validate.core.identity).


def crd_schema_key(schema_digest: bytes) -> bytes:
    return b"crd\0" + schema_digest + b"\0" + "\0".join(core.libraries()).encode()


def schemas_key(builtin_dir: str, api: str, kind: str) -> bytes:
    return b"schemas\0" + core.identity(builtin_dir, api, kind).encode()


def verdict_key(schema: bytes, doc_digest: bytes, bound: frozenset[str], raw: bool) -> str:
    """The cache key of one document's verdict: the entry's layout, eksinf's version and code,
    Python, the schema's key, the document, how it is checked (raw: its placeholders may stand
    at `bound`, the paths links write; resolved: none may remain)."""
    from eksinf import __version__

    return cache.key(
        _VERDICT_FORMAT,
        f"eksinf {__version__}, Python {sys.version}".encode(),
        cache.code_digest().encode(),
        schema,
        doc_digest,
        b"raw" if raw else b"resolved",
        "\0".join(sorted(bound)).encode(),
    )


class Admission:
    """Checks documents against the schemas of one stack (its CRDs) at one Kubernetes version."""

    def __init__(self, crds: dict[tuple[str, str], Crd], kube_version: str) -> None:
        self.crds = crds
        self.builtin_dir = core.schema_dir(kube_version)
        self._cel: Any = None
        self._memo: dict[int, tuple[Doc, Verdict]] = {}
        self._counted: set[str] = set()  # distinct CEL rules run to a pass or a failure
        self._schema_keys: dict[tuple[str, str], bytes] = {}
        self._fresh: dict[str, bytes] = {}  # verdicts checked this run, written by `save`
        # during check_units: (id(doc), bound, raw) -> verdict key, and the entries read
        self._keys: dict[tuple[int, frozenset[str], bool], str] = {}
        self._found: dict[str, bytes] = {}

    @property
    def distinct_rules(self) -> int:
        return len(self._counted)

    def _evaluate(self, counted: set[str]) -> Callable[[str, Any], tuple[str, str]]:
        if self._cel is None:
            from eksinf.build.validate.cel import (
                Engine,  # celpy loads only when a custom resource is checked
            )

            self._cel = Engine(cel_rules(self.crds.values()))
        engine = self._cel

        def evaluate(rule: str, value: Any) -> tuple[str, str]:
            outcome = engine.evaluate(rule, value, counted)
            return outcome.status, outcome.detail

        return evaluate

    def _schema_key(self, api: str, kind: str) -> bytes:
        found = self._schema_keys.get((api, kind))
        if found is None:
            crd = self.crds.get((api, kind))
            if crd is not None:
                found = crd_schema_key(digest(crd.schema))
            else:
                found = schemas_key(self.builtin_dir, api, kind)
            self._schema_keys[(api, kind)] = found
        return found

    def _verdict_key(self, doc: Doc, bound: frozenset[str], raw: bool) -> str:
        schema = self._schema_key(str(doc.get("apiVersion")), str(doc.get("kind")))
        return verdict_key(schema, digest(doc), bound, raw)

    def check_units(
        self,
        units: dict[str, Docs],
        label: Callable[[str], str],
        bound: dict[tuple[str, int], frozenset[str]] | None = None,
    ) -> Report:
        """`units` keyed `component/unit`; `bound[(key, index)]` = the paths links write in that
        document (raw units). Without `bound`, every placeholder is invalid (resolved units)."""
        report = Report()
        raw = bound is not None
        todo = []
        for key, docs in units.items():
            report.units += 1
            for index, doc in enumerate(docs):
                if not isinstance(doc, dict) or not doc.get("kind"):
                    continue
                report.resources += 1
                todo.append((label(key), doc, (bound or {}).get((key, index), frozenset())))
        self._prefetch([(doc, where, raw) for _, doc, where in todo])
        for unit, doc, where in todo:
            self.check_doc(report, unit, doc, where, raw)
        self._keys, self._found = {}, {}
        self.save()
        return report

    def _prefetch(self, docs: list[tuple[Doc, frozenset[str], bool]]) -> None:
        """The cached verdicts of `docs`, read in one pass over the cache (not the memo's)."""
        if not cache.enabled():
            return
        for doc, bound, raw in docs:
            memo = self._memo.get(id(doc))
            if memo is None or memo[0] is not doc:
                self._keys[(id(doc), bound, raw)] = self._verdict_key(doc, bound, raw)
        wanted = [k for k in dict.fromkeys(self._keys.values()) if k not in self._fresh]
        self._found = cache.get_many(VERDICTS, wanted)

    def save(self) -> None:
        """Write the verdicts checked since the last save to the cache (best-effort)."""
        if self._fresh:
            cache.put_many(VERDICTS, self._fresh)
            self._fresh = {}

    def check_doc(
        self, report: Report, unit: str, doc: Doc, bound: frozenset[str], raw: bool
    ) -> None:
        """Check one document, or take its verdict from the cache. A document without
        placeholders gets the same findings whether raw or resolved; resolving shares the
        documents no link touches, so those are checked once (the memo keeps the document
        itself, so its id is not reused)."""
        memo = self._memo.get(id(doc))
        if memo is not None and memo[0] is doc:
            verdict = memo[1]
        else:
            verdict = self._verdict(doc, bound, raw)
            if not placeholder.scan(doc):
                self._memo[id(doc)] = (doc, verdict)
        report.findings += [dataclasses.replace(f, unit=unit) for f in verdict.findings]
        if verdict.schema:
            report.by_schema[verdict.schema] = report.by_schema.get(verdict.schema, 0) + 1
        report.rules_evaluated += verdict.rules
        report.transition_rules += verdict.transitions
        self._counted |= verdict.counted

    def _verdict(self, doc: Doc, bound: frozenset[str], raw: bool) -> Verdict:
        entry = None
        if cache.enabled():
            entry = self._keys.get((id(doc), bound, raw))
            if entry is not None:  # looked up by _prefetch
                data = self._fresh.get(entry) or self._found.get(entry)
            else:
                entry = self._verdict_key(doc, bound, raw)
                data = self._fresh.get(entry) or cache.get(VERDICTS, entry)
            found = Verdict.from_json(data) if data is not None else None
            if found is not None:
                return found
        part, counted = Report(), set[str]()
        self._check_doc(part, "", doc, bound, raw, set(placeholder.scan(doc)), counted)
        verdict = Verdict(
            part.findings,
            next(iter(part.by_schema), ""),
            part.rules_evaluated,
            part.transition_rules,
            frozenset(counted),
        )
        data = verdict.to_json() if entry is not None else None
        if entry is not None and data is not None:
            self._fresh[entry] = data
        return verdict

    def _check_doc(
        self,
        report: Report,
        unit: str,
        doc: Doc,
        bound: frozenset[str],
        raw: bool,
        held: set[str],
        counted: set[str],
    ) -> None:
        resource = _resource(doc)

        def add(status: str, path: Any, rule: str, value: Any, message: str = "") -> None:
            text = path if isinstance(path, str) else paths.format_path(list(path))
            report.findings.append(Finding(status, unit, resource, text, rule, value, message))

        for path in sorted(held):
            if path in bound:
                add(UNRESOLVED, path, "bound by a profile link", paths.get(doc, path))
            else:
                add(
                    INVALID,
                    path,
                    "placeholder outside a binding" if raw else "placeholder in a resolved unit",
                    paths.get(doc, path),
                    "no profile link writes this path, so it would ship unresolved"
                    if raw
                    else "the profile resolves no value here",
                )
        for parts, rule, value, message in meta.problems(doc):
            if paths.format_path(list(parts)) not in held:
                add(INVALID, parts, rule, value, message)

        api, kind = str(doc.get("apiVersion")), str(doc.get("kind"))
        crd = self.crds.get((api, kind))
        if crd is not None:
            report.by_schema["crd"] = report.by_schema.get("crd", 0) + 1
            result = structural.check(crd.schema, doc, self._evaluate(counted))
            report.rules_evaluated += result.rules_evaluated
            report.transition_rules += result.transition_rules
            for v in result.violations:
                add(v.status, v.path, v.rule, v.value, v.message)
            return
        validator = core.builtin_validator(self.builtin_dir, api, kind)
        source = "builtin"
        if validator is None:
            validator, source = core.pinned_validator(api, kind), "pinned"
        if validator is None:
            add(
                INVALID,
                "",
                "known kind",
                f"{api} {kind}",
                "no CRD in the stack, no built-in schema at this Kubernetes version and no "
                "pinned schema: the API server would refuse the kind",
            )
            return
        report.by_schema[source] = report.by_schema.get(source, 0) + 1
        for error_parts, rule, value, message in core.errors(validator, doc):
            text = paths.format_path(error_parts)
            if text in held or placeholder.is_placeholder(value):
                continue  # reported above, as unresolved or as a stray placeholder
            add(INVALID, text, rule, value, message)
        if source == "builtin":
            for where, rule, value, message in semantic.problems(doc):
                text = paths.format_path(where)
                if text not in held and not placeholder.is_placeholder(value):
                    add(INVALID, text, rule, value, message)


def bound_paths(
    units: dict[str, Docs], bindings: list[links.Binding]
) -> dict[tuple[str, int], frozenset[str]]:
    """(unit key, document index) -> the paths profile links write there (canonical form)."""
    out: dict[tuple[str, int], set[str]] = {}
    for binding in bindings:
        docs = units.get(binding.unit_key) or []
        doc = find_resource(docs, binding.kind, binding.name)
        if doc is None:
            continue  # lint reports a binding that points nowhere
        index = next(i for i, d in enumerate(docs) if d is doc)
        try:
            target = paths.format_path(paths.parse(links.target_path(binding, doc)))
        except paths.PathError:
            continue
        out.setdefault((binding.unit_key, index), set()).add(target)
    return {k: frozenset(v) for k, v in out.items()}


@dataclass
class StackReport:
    raw: Report
    resolved: Report
    profile: str  # the profile whose values the resolved units carry
    distinct_rules: int = 0  # different CEL rules evaluated (celRulesEvaluated counts runs)

    @property
    def total(self) -> Report:
        out = Report()
        out.merge(self.raw)
        out.merge(self.resolved)
        return out

    def as_dict(self) -> dict[str, Any]:
        total = self.total.as_dict()
        total.pop("findings")
        return {
            **total,
            "celRulesDistinct": self.distinct_rules,
            "profile": self.profile,
            "raw": self.raw.as_dict(),
            "resolved": self.resolved.as_dict(),
        }


def validate_stack(stack: Any) -> StackReport:
    """Every committed unit as rendered (raw) and as the hub publishes it (resolved with the
    stack's profile; the hub plane is never published)."""
    units = configs.read_units(stack.configs_dir)
    bindings = links.load_bindings(stack)
    from eksinf.build.validate.provided import cluster_crd_units

    admission = Admission(
        {**crds_of(cluster_crd_units(stack)), **crds_of(units)}, stack.kube_version
    )
    raw = admission.check_units(
        units, lambda key: f"configs/{key}.yaml", bound_paths(units, bindings)
    )
    profile_name, published = published_units(stack, units, bindings)
    resolved = admission.check_units(
        published, lambda key: f"resolved({profile_name}) configs/{key}.yaml"
    )
    return StackReport(raw, resolved, profile_name, admission.distinct_rules)


def published_units(
    stack: Any, units: dict[str, Docs], bindings: list[links.Binding]
) -> tuple[str, dict[str, Docs]]:
    """(profile name, the units as the hub publishes them): the profile's values written in
    through the bindings, the hub plane left out (it is never published)."""
    from eksinf.model.profile import load_profile

    profile = load_profile(stack)
    planes = {c.name: c.plane for c in stack.components}
    return profile.name, {
        key: docs
        for key, docs in links.resolve_units(units, profile.spec, bindings).items()
        if planes.get(key.split("/")[0]) != "hub"
    }
