"""The flattening guard: Helm features that do not survive `helm template` + Argo CD.

It reads resources, not text: a hazard names its component, unit file, resource and what to do.
A finding is allowed only by an entry in render/<component>/HAZARDS.allow that gives a reason.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from eksinf.build.render import (
    ComponentOutput,
    RenderResult,
    chart_values,
    output_digests,
    resource_id,
)
from eksinf.core import inside
from eksinf.core.yamlio import load_source
from eksinf.errors import CONTRACT, EksinfError
from eksinf.model.stack import ALLOW_FILE, Stack

# hazard -> (what goes wrong, what to do)
HAZARDS: dict[str, tuple[str, str]] = {
    "helm-hook": (
        "Helm hooks never fire without Helm; Argo CD applies this as a plain resource",
        "translate it to an Argo CD hook (argocd.argoproj.io/hook: PreSync/PostSync) or drop it",
    ),
    "resource-policy-keep": (
        "helm.sh/resource-policy: keep means nothing to Argo CD, which will prune or delete it",
        "add argocd.argoproj.io/sync-options: Delete=false,Prune=false to the resource",
    ),
    "bare-job": (
        "a Job/CronJob outside an Argo CD hook is immutable: a changed spec fails to sync",
        "make it an Argo CD hook with a delete policy, or make re-creation safe",
    ),
    "webhook-ca-bundle": (
        "the admission webhook's caBundle is empty or injected at install time; flattened, it "
        "has no CA and every matching API request fails",
        "ship the CA in the values, or run cert-manager's cainjector on the cluster",
    ),
    "lookup": (
        "the template calls lookup, which returns nothing when rendering offline",
        "pass the value explicitly in the chart values",
    ),
    "non-deterministic": (
        "two renders of the same inputs differ (randAlphaNum, genCA, now, ...); every render "
        "would be a diff",
        "set the value explicitly in the chart values, or generate it out of band",
    ),
    "secret": (
        "a Secret in committed output leaks its data and is refused by the hub",
        "create the Secret out of band (for example with `eksinf creds`) and reference it",
    ),
    "crd-stub": (
        "a file under the chart's crds/ holds a path, not a CRD (a symlink lost when the chart "
        "was packaged); this CRD will not be installed",
        "install the CRDs from their own chart or component, or pin an archive with real CRDs",
    ),
    "tpl-value": (
        "a chart value holds a template action, and the chart passes the value through tpl, so "
        "the action runs at render: lookup and DNS return nothing offline, time, random and "
        "crypto functions give other output on every render",
        "write the value out literally in the values file (generate secrets and certificates "
        "out of band)",
    ),
    "capabilities-branch": (
        "a template branches on .Capabilities, which reflects the pinned render version, not "
        "the cluster",
        "check the branch taken at RENDER_KUBE_VERSION/RENDER_API_VERSIONS is the one you want",
    ),
}

_COMMENT = re.compile(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", re.DOTALL)
_ACTION = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_LOOKUP = re.compile(r"(^|[\s(|])lookup\s")
_BRANCH = re.compile(r"^-?\s*(if|else\s+if|with)\b.*\.Capabilities\b", re.DOTALL)
_TPL = re.compile(r"(?:^|[\s(|])tpl\s")
# a helper that renders a value with tpl (Bitnami's common.tplvalues.render and its copies)
_TPL_HELPER = re.compile(r"include\s+\"[^\"]*tpl[^\"]*\"")
_VALUES_REF = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)*)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|`[^`]*`')
# what a value's action may not reach when tpl evaluates it at render time, by kind
_TPL_FUNCTIONS = {
    "lookup": ("lookup", "getHostByName"),
    "time": (
        "now", "date", "dateInZone", "date_in_zone", "dateModify", "mustDateModify",
        "date_modify", "ago", "unixEpoch", "htmlDate", "htmlDateInZone",
    ),
    "random": (
        "randAlphaNum", "randAlpha", "randNumeric", "randAscii", "randInt", "randBytes",
        "uuidv4", "shuffle",
    ),
    "crypto": (
        "genCA", "genCAWithKey", "genPrivateKey", "genSelfSignedCert",
        "genSelfSignedCertWithKey", "genSignedCert", "genSignedCertWithKey", "derivePassword",
        "htpasswd", "bcrypt", "encryptAES", "decryptAES", "buildCustomCert",
    ),
}  # fmt: skip
_CALL = re.compile(
    r"(?<![.$\w])("
    + "|".join(sorted((f for fs in _TPL_FUNCTIONS.values() for f in fs), key=len, reverse=True))
    + r")(?![\w.])"
)
_HOOK_ANNOTATION = "helm.sh/hook"
_ARGO_HOOK = "argocd.argoproj.io/hook"


@dataclass(frozen=True)
class Finding:
    component: str
    file: str  # unit file, or chart template path
    resource: str  # Kind/namespace/name, or the template path for template-level hazards
    hazard: str
    detail: str = ""
    allowed_reason: str | None = None

    @property
    def allowed(self) -> bool:
        return self.allowed_reason is not None

    @property
    def explanation(self) -> str:
        return HAZARDS[self.hazard][0]

    @property
    def fix(self) -> str:
        return HAZARDS[self.hazard][1]

    def as_dict(self) -> dict:
        return {
            "component": self.component,
            "file": self.file,
            "resource": self.resource,
            "hazard": self.hazard,
            "detail": self.detail,
            "explanation": self.explanation,
            "fix": self.fix,
            "allowed": self.allowed,
            "reason": self.allowed_reason,
        }


@dataclass(frozen=True)
class AllowEntry:
    component: str
    hazard: str
    resource: str
    reason: str


@dataclass(frozen=True)
class GuardReport:
    findings: tuple[Finding, ...]
    unused_allows: tuple[AllowEntry, ...]

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if not f.allowed]

    @property
    def ok(self) -> bool:
        return not self.blocking


def load_allows(stack: Stack, component: str) -> list[AllowEntry]:
    path = stack.render_dir / component / ALLOW_FILE
    if not os.path.lexists(path):
        return []
    inside.check(path.relative_to(stack.root), stack.root, stack.root)  # no link on the way
    label = f"render/{component}/{ALLOW_FILE}"
    docs = load_source(path, label=label)
    items = docs[0] if docs else []
    if not isinstance(items, list):
        raise EksinfError(
            f"{label}: expected a list of {{hazard, resource, reason}} entries",
            exit_code=CONTRACT,
        )
    entries = []
    for index, item in enumerate(items, start=1):
        where = f"{label}: entry {index}"
        if not isinstance(item, dict):
            raise EksinfError(f"{where}: expected a mapping", exit_code=CONTRACT)
        hazard, resource, reason = item.get("hazard"), item.get("resource"), item.get("reason")
        if hazard not in HAZARDS:
            raise EksinfError(
                f"{where}: unknown hazard {hazard!r}",
                hint=f"Known hazards: {', '.join(HAZARDS)}.",
                exit_code=CONTRACT,
            )
        if not isinstance(resource, str) or not resource:
            raise EksinfError(
                f"{where}: missing resource",
                hint="Name the resource as Kind/namespace/name (or the template path).",
                exit_code=CONTRACT,
            )
        if not isinstance(reason, str) or not reason.strip():
            raise EksinfError(
                f"{where} ({hazard} {resource}): an allow entry needs a reason",
                hint="Say why this hazard is safe here, in a `reason:` field.",
                exit_code=CONTRACT,
            )
        entries.append(AllowEntry(component, hazard, resource, reason.strip()))
    return entries


def _doc_hazards(output: ComponentOutput) -> list[Finding]:
    found = []
    name = output.component.name
    for unit in output.units:
        for doc in unit.docs:
            kind = doc.get("kind")
            meta = doc.get("metadata") or {}
            annotations = meta.get("annotations") or {}
            rid = resource_id(doc)

            def add(hazard: str, detail: str = "", rid: str = rid, file: str = unit.filename):
                found.append(Finding(name, file, rid, hazard, detail))

            if _HOOK_ANNOTATION in annotations:
                add("helm-hook", f"helm.sh/hook: {annotations[_HOOK_ANNOTATION]}")
            if annotations.get("helm.sh/resource-policy") == "keep":
                options = str(annotations.get("argocd.argoproj.io/sync-options", ""))
                if not ("Delete=false" in options and "Prune=false" in options):
                    add("resource-policy-keep")
            if kind in ("Job", "CronJob") and _ARGO_HOOK not in annotations:
                add("bare-job")
            if kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
                injected = any(k.startswith("cert-manager.io/inject-ca") for k in annotations)
                empty = [
                    w.get("name", "?")
                    for w in doc.get("webhooks") or []
                    if not ((w.get("clientConfig") or {}).get("caBundle"))
                ]
                if injected or empty:
                    why = "CA injected by cert-manager" if injected else "empty caBundle"
                    add("webhook-ca-bundle", f"{why}: {', '.join(empty) or 'all webhooks'}")
            if kind == "Secret":
                add("secret")
    return found


def _template_hazards(output: ComponentOutput) -> list[Finding]:
    found = []
    name = output.component.name
    for render in output.charts:
        for path, source in render.first.templates:
            text = _COMMENT.sub("", source)
            for match in _ACTION.finditer(text):
                action = match.group(1)
                line = text.count("\n", 0, match.start()) + 1
                if _LOOKUP.search(action):
                    found.append(Finding(name, path, path, "lookup", f"line {line}"))
                if _BRANCH.search(action):
                    found.append(Finding(name, path, path, "capabilities-branch", f"line {line}"))
        for stub in render.crd_stubs:
            path = stub.split(" -> ", 1)[0]
            found.append(Finding(name, path, path, "crd-stub", stub.split(" -> ", 1)[1]))
        first, reference = output_digests(render.first), render.reference
        changed = sorted(p for p in set(first) | set(reference) if first.get(p) != reference.get(p))
        for path in changed:
            detail = f"differs from a {render.reference_source} of the same inputs"
            found.append(Finding(name, path, path, "non-deterministic", detail))
    return found


def _tpl_paths(templates: tuple[tuple[str, str], ...]) -> tuple[str, set[str] | None] | None:
    """Where a chart evaluates values with tpl: (the first template doing so, the `.Values`
    paths its tpl actions name, or None when one of them renders a variable, whose value may
    be any value). None when the chart never calls tpl."""
    first = ""
    paths: set[str] | None = set()
    for path, source in templates:
        text = _COMMENT.sub("", source)
        for match in _ACTION.finditer(text):
            action = match.group(1)
            if not (_TPL.search(action) or _TPL_HELPER.search(action)):
                continue
            if not first:
                line = text.count("\n", 0, match.start()) + 1
                first = f"{path}:{line}"
            refs = [m.group(1).lstrip(".") for m in _VALUES_REF.finditer(action)]
            if not refs or (paths is not None and "" in refs):
                paths = None  # `tpl $x $` or `tpl (toYaml .Values) .`: any value
            elif paths is not None:
                paths.update(refs)
    return (first, paths) if first else None


def _value_strings(node: object, path: str = "") -> list[tuple[str, str]]:
    """(dotted path, text) of every string in a values tree, keys included."""
    out: list[tuple[str, str]] = []
    stack: list[tuple[object, str]] = [(node, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            out.append((where, item))
        elif isinstance(item, dict):
            for key, value in item.items():
                sub = f"{where}.{key}" if where else str(key)
                stack.append((value, sub))
                if isinstance(key, str) and "{{" in key:
                    out.append((sub, key))
        elif isinstance(item, list):
            stack.extend((value, f"{where}.{i}") for i, value in enumerate(item))
    return sorted(out)


def _tpl_hazards(output: ComponentOutput, stack: Stack) -> list[Finding]:
    """Values whose template actions reach lookup, time, random or crypto functions, in a
    chart that passes values through tpl. The render's determinism check cannot see these:
    lookup is empty on both renders, and `now | date "2006-01-02"` agrees within a day."""
    found = []
    name = output.component.name
    for render in output.charts:
        where = _tpl_paths(render.first.templates)
        if where is None:
            continue
        template, paths = where
        values = chart_values(stack, output.component, render.spec, helm=False)
        for path, text in _value_strings(values):
            if "{{" not in text:
                continue
            if paths is not None and not any(
                path == p or path.startswith(p + ".") or p.startswith(path + ".") for p in paths
            ):
                continue
            calls = sorted(
                {
                    call
                    for action in _ACTION.finditer(_COMMENT.sub("", text))
                    for call in _CALL.findall(_STRING.sub('""', action.group(1)))
                }
            )
            if calls:
                kinds = sorted(k for k, fs in _TPL_FUNCTIONS.items() if set(fs) & set(calls))
                detail = (
                    f"{text!r} calls {', '.join(calls)} ({', '.join(kinds)}), evaluated by "
                    f"tpl in {template}"
                )
                resource = f"{render.spec.name} values .{path}"
                found.append(Finding(name, template, resource, "tpl-value", detail))
    return found


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple] = set()
    out = []
    for f in findings:
        key = (f.component, f.file, f.resource, f.hazard)
        if key not in seen:  # one finding per place, even if a template repeats the construct
            seen.add(key)
            out.append(f)
    return out


def check(result: RenderResult) -> GuardReport:
    """Find every hazard in a render and apply each component's allow file."""
    findings: list[Finding] = []
    unused: list[AllowEntry] = []
    for output in result.outputs:
        raw = _dedupe(
            _doc_hazards(output) + _template_hazards(output) + _tpl_hazards(output, result.stack)
        )
        allows = load_allows(result.stack, output.component.name)
        used: set[AllowEntry] = set()
        for finding in raw:
            entry = next(
                (
                    a
                    for a in allows
                    if a.hazard == finding.hazard and a.resource == finding.resource
                ),
                None,
            )
            if entry is not None:
                used.add(entry)
                finding = Finding(**{**finding.__dict__, "allowed_reason": entry.reason})
            findings.append(finding)
        unused += [a for a in allows if a not in used]
    return GuardReport(tuple(findings), tuple(unused))
