"""The flattening guard: Helm features that do not survive `helm template` + Argo CD.

It reads resources, not text: a hazard names its component, unit file, resource and what to do.
A finding is allowed only by an entry in render/<component>/HAZARDS.allow that gives a reason.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from . import inside
from .errors import CONTRACT, EksinfError
from .render import ComponentOutput, RenderResult, output_digests, resource_id
from .stack import ALLOW_FILE, Stack
from .yamlio import load_source

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
        raw = _dedupe(_doc_hazards(output) + _template_hazards(output))
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
