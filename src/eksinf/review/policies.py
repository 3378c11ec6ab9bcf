"""IAM policy documents as review reads them: the policies a resource holds, what they grant,
and, for new actions, the statement's Resource and Condition and whether the actions can take
effect there (the iam-widened risk class, risks.py)."""

from __future__ import annotations

import json
import re
from typing import Any

from eksinf.core.types import Doc, Docs

from ..model.checks import Finding
from .snapshot import POLICY_FILE_KIND, Resource
from .structural import join

IAM_GROUP = "iam.services.k8s.aws"
_PASSROLE = re.compile(r"^(\*|iam:\*|iam:pass\*|iam:passrole)$", re.IGNORECASE)


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def _parse_policy(value: Any) -> Doc | None:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def policies(resource: Resource | None) -> dict[str, tuple[str, Doc]]:
    """Policy documents a resource holds: path -> (trust | permissions, document)."""
    if resource is None:
        return {}
    if resource.kind == POLICY_FILE_KIND:
        doc = _parse_policy(resource.doc.get("policy"))
        return {"policy": ("permissions", doc)} if doc else {}
    if resource.group != IAM_GROUP:
        return {}
    spec = resource.doc.get("spec") or {}
    found: dict[str, tuple[str, Any]] = {
        "spec.assumeRolePolicyDocument": ("trust", spec.get("assumeRolePolicyDocument")),
        "spec.policyDocument": ("permissions", spec.get("policyDocument")),
    }
    for name, text in (spec.get("inlinePolicies") or {}).items():
        found[join("spec.inlinePolicies", name)] = ("permissions", text)
    out = {}
    for path, (role, raw) in found.items():
        doc = _parse_policy(raw)
        if doc is not None:
            out[path] = (role, doc)
    return out


def allow_statements(doc: Doc) -> Docs:
    return [
        s
        for s in as_list(doc.get("Statement"))
        if isinstance(s, dict) and s.get("Effect") == "Allow"
    ]


def grants(docs: dict[str, tuple[str, Doc]]) -> dict[str, set[Any]]:
    # str items, but (policy path, action) pairs under "passrole"
    out: dict[str, set[Any]] = {
        "actions": set(),
        "any-resource": set(),
        "passrole": set(),
        "principals": set(),
    }
    for path, (role, doc) in docs.items():
        for s in allow_statements(doc):
            actions = [str(a) for a in as_list(s.get("Action"))]
            if "NotAction" in s:
                actions.append(f"NotAction {json.dumps(s['NotAction'], sort_keys=True)}")
            if role == "trust":
                principal = s.get("Principal")
                if isinstance(principal, dict):
                    for kind, values in principal.items():
                        out["principals"] |= {f"{kind}: {v}" for v in as_list(values)}
                elif principal is not None:
                    out["principals"].add(str(principal))
                continue
            out["actions"] |= set(actions)
            if "*" in [str(r) for r in as_list(s.get("Resource"))] or "NotResource" in s:
                out["any-resource"] |= set(actions)
            if not s.get("Condition"):
                out["passrole"] |= {(path, a) for a in actions if _PASSROLE.match(a)}
    return out


def _statement_path(path: str, index: int, statement: Doc) -> str:
    sid = statement.get("Sid")
    return f"{path}(json).Statement[{f'Sid={sid}' if sid else index}]"


def in_context(path: str, index: int, statement: Doc, actions: list[str]) -> Finding:
    """A new-actions finding with the statement's Resource and Condition, and whether the actions
    can take effect there: an action none of whose resource ARNs the statement's Resource can
    match does nothing (flagged as a no-op, never hidden)."""
    more = f" (+{len(actions) - 8} more)" if len(actions) > 8 else ""
    reason = f"new action(s) allowed: {', '.join(actions[:8])}{more}"
    if "NotResource" in statement:
        where = f"NotResource {json.dumps(statement['NotResource'], sort_keys=True)}"
        effect = "not checked: the statement uses NotResource"
    else:
        resources = [str(r) for r in as_list(statement.get("Resource"))]
        where = json.dumps(resources if len(resources) != 1 else resources[0])
        mismatch, why_not = resource_mismatch(actions, resources)
        if why_not:
            effect = f"not checked: {why_not}"
        elif mismatch and set(mismatch) >= set(actions):
            effect = (
                "no: a no-op, "
                + "; ".join(f"{a} acts only on {mismatch[a]}" for a in actions)
                + f", which the Resource cannot match ({ANALYSER})"
            )
            reason += " (a no-op: the statement's Resource cannot match them)"
        elif mismatch:
            effect = (
                "partly: "
                + "; ".join(
                    f"{a} is a no-op (acts only on {mismatch[a]})" for a in sorted(mismatch)
                )
                + f"; the others can ({ANALYSER})"
            )
        else:
            effect = f"yes: the Resource can match every new action ({ANALYSER})"
    condition = statement.get("Condition")
    context = (
        ("Resource", where),
        ("Condition", json.dumps(condition, sort_keys=True) if condition else "none"),
        ("takes effect", effect),
    )
    return Finding(reason, element=_statement_path(path, index, statement), context=context)


ANALYSER = "parliament RESOURCE_MISMATCH"


def _pkg_resources_for_parliament() -> None:
    """parliament 1.6.4 finds its two data files with `pkg_resources.resource_filename`, and
    pkg_resources left setuptools in 81 (Python 3.12 venvs have no setuptools at all). Where it
    cannot be imported, that one function is provided from importlib.resources, which answers the
    same path for a package installed as files; nothing else of pkg_resources is offered."""
    import importlib.util
    import sys

    if sys.modules.get("pkg_resources") is not None:
        return
    try:
        if importlib.util.find_spec("pkg_resources") is not None:
            return
    except (ImportError, ValueError):  # a finder that refuses it: as absent
        pass
    import types
    from importlib import resources

    module = types.ModuleType("pkg_resources")

    def resource_filename(package: str, name: str) -> str:
        return str(resources.files(package).joinpath(name))

    module.resource_filename = resource_filename  # type: ignore[attr-defined]
    sys.modules["pkg_resources"] = module


def resource_mismatch(actions: list[str], resources: list[str]) -> tuple[dict[str, str], str]:
    """action -> the ARN form it acts on, for each action whose resources none of `resources`
    can match; and why nothing was checked ("" when it was). parliament (the IAM linter by
    Duo Labs) holds AWS's action-to-resource-type table; eksinf keeps none of its own."""
    _pkg_resources_for_parliament()
    try:
        import parliament
    except ImportError:
        return {}, "parliament is not installed"
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": actions, "Resource": resources}],
    }
    try:
        analysed = parliament.analyze_policy_string(json.dumps(policy))
    except Exception as exc:  # a linter failure must not stop the review; it is reported
        return {}, f"parliament failed ({type(exc).__name__})"
    out: dict[str, str] = {}
    for finding in analysed.findings:
        if finding.issue != "RESOURCE_MISMATCH":
            continue
        for item in as_list(finding.detail):
            if isinstance(item, dict) and "action" in item:
                form = item.get("required_format")
                out[str(item["action"])] = (
                    " or ".join(map(str, form)) if isinstance(form, list) else str(form)
                )
    return out, ""
