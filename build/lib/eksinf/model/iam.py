"""Who a role's trust policy admits, decided as IAM decides it.

The rules are IAM's (IAM User Guide, "IAM JSON policy elements: Condition operators" and
"Single-valued vs. multivalued context keys"):
- operators in one Condition block are ANDed, and so are the keys under one operator; the
  values listed for one key are ORed (for a negated operator: none may match);
- `StringEquals` is exact and case-sensitive; `StringLike` is case-sensitive with `*` (any run
  of characters, `:` and `/` included) and `?` (exactly one character) anywhere in the value;
  `...IgnoreCase` folds case; `StringNot...` negate;
- a key absent from the request makes a condition false, except under a negated operator
  (true), `...IfExists` (true) and `ForAllValues:` (true); `ForAnyValue:` needs one request
  value to match;
- condition key names are case-insensitive; an explicit Deny wins over any Allow.

A request here is what an assume-role call carries: the principal (a service, or a federated
OIDC provider), the action, and its context keys (`<issuer>:sub`, `aws:RequestTag/...`).
Keys the caller cannot know (an issuer's `amr`, a source ARN) make the answer None: unknown,
never a pass and never a finding.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

POD_IDENTITY_SERVICE = "pods.eks.amazonaws.com"
# The Pod Identity agent assumes the role and tags the session; a trust without TagSession
# fails at credential time, long after the association looked fine.
POD_IDENTITY_ACTIONS = ("sts:AssumeRole", "sts:TagSession")
WEB_IDENTITY_ACTION = "sts:AssumeRoleWithWebIdentity"
SA_PREFIX = "system:serviceaccount:"  # the `sub` of a Kubernetes ServiceAccount token


def subject(namespace: str, name: str) -> str:
    return f"{SA_PREFIX}{namespace}:{name}"


def like(pattern: str, value: str) -> bool:
    """IAM's StringLike: `*` any run of characters, `?` exactly one, everything else literal."""
    parts = [".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern]
    return re.fullmatch("".join(parts), value, re.DOTALL) is not None


_MATCHERS: dict[str, Callable[[str, str], bool]] = {
    "stringequals": lambda p, v: p == v,
    "stringequalsignorecase": lambda p, v: p.lower() == v.lower(),
    "stringlike": like,
}
_NEGATED = {"stringnotequals": "stringequals", "stringnotequalsignorecase": "stringequalsignorecase", "stringnotlike": "stringlike"}  # fmt: skip


def statements(document: Any) -> list[dict[str, Any]]:
    """The statements of a policy given as a dict, JSON text or IAM's URL-encoded text."""
    if isinstance(document, str):
        try:
            document = json.loads(urllib.parse.unquote(document))
        except json.JSONDecodeError:
            return []
    found = document.get("Statement") if isinstance(document, dict) else None
    found = [found] if isinstance(found, dict) else found if isinstance(found, list) else []
    return [s for s in found if isinstance(s, dict)]


def as_list(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) else list(value or [])


def _condition(op: str, key_values: Any, request: Mapping[str, list[str]]) -> bool | None:
    """One operator over its keys (ANDed); None when it depends on a key or an operator this
    evaluator does not know."""
    name = op.lower()
    qualifier = ""
    if ":" in name:
        qualifier, name = name.split(":", 1)
    if_exists = name.endswith("ifexists")
    name = name.removesuffix("ifexists")
    negated = name in _NEGATED
    matcher = _MATCHERS.get(_NEGATED.get(name, name))
    if matcher is None or qualifier not in ("", "foranyvalue", "forallvalues"):
        return None
    results: list[bool | None] = []
    for key, wanted in (key_values or {}).items():
        got = request.get(str(key).lower())
        if got is None:  # unknown to the caller, so unknown to us
            results.append(None)
            continue
        patterns = [str(p) for p in as_list(wanted)]
        # negated: a request value matches when it matches none of the listed values
        matches = [any(matcher(p, v) for p in patterns) is not negated for v in got]
        if not got:  # the key is absent from this request
            results.append(negated or if_exists or qualifier == "forallvalues")
        elif qualifier == "forallvalues":
            results.append(all(matches))
        else:  # plain (single-valued) or ForAnyValue
            results.append(any(matches))
    if False in results:
        return False
    return None if None in results else True


@dataclass(frozen=True)
class Request:
    """An assume-role request: who asks, for what, with which context keys.

    `context` maps a lower-cased key to its values; an empty list means the key is absent from
    the request, and a key not listed is unknown to the caller. `suffixes` answers keys by
    their ending (`:sub` of whichever issuer), since an IRSA trust names the issuer."""

    action: str
    service: str = ""
    federated: bool = False
    provider: str = ""  # the issuer host a federated request comes from ("" = any)
    context: Mapping[str, list[str]] = field(default_factory=dict)
    suffixes: Mapping[str, list[str]] = field(default_factory=dict)

    def keys(self, statement: dict[str, Any]) -> dict[str, list[str]]:
        known = dict(self.context)
        for block in (statement.get("Condition") or {}).values():
            for key in block or {}:
                low = str(key).lower()
                for suffix, values in self.suffixes.items():
                    if low.endswith(suffix):
                        known.setdefault(low, values)
        return known


def _principal_matches(statement: dict[str, Any], request: Request) -> bool:
    principal = statement.get("Principal")
    if principal == "*":
        return True
    if not isinstance(principal, dict):
        return False
    if request.service:
        return request.service in as_list(principal.get("Service"))
    if request.federated:
        wanted = f":oidc-provider/{request.provider}" if request.provider else ":oidc-provider/"
        found = [str(p) for p in as_list(principal.get("Federated"))]
        return any(p.endswith(wanted) if request.provider else wanted in p for p in found)
    return False


def _action_matches(statement: dict[str, Any], action: str) -> bool:
    return any(like(str(a).lower(), action.lower()) for a in as_list(statement.get("Action")))


def admits(document: Any, request: Request) -> bool | None:
    """Does the trust let this request assume the role? True, False, or None (unknown)."""
    allowed: list[bool | None] = []
    denied: list[bool | None] = []
    for statement in statements(document):
        if not (
            _principal_matches(statement, request) and _action_matches(statement, request.action)
        ):
            continue
        keys = request.keys(statement)
        results = [
            _condition(op, key_values, keys)
            for op, key_values in (statement.get("Condition") or {}).items()
        ]
        verdict: bool | None = False if False in results else None if None in results else True
        (denied if statement.get("Effect") == "Deny" else allowed).append(verdict)
    if True in denied:
        return False
    if True in allowed:
        return None if None in denied else True
    return None if None in allowed else False


def irsa_request(namespace: str, name: str, issuer: str = "") -> Request:
    """A ServiceAccount's token exchanged through IRSA: `sub` is the account, `aud` is STS.
    With the cluster's issuer (host/path, no scheme) only that provider's trust counts."""
    return Request(
        WEB_IDENTITY_ACTION,
        federated=True,
        provider=issuer,
        suffixes={":sub": [subject(namespace, name)], ":aud": ["sts.amazonaws.com"]},
    )


def providers(document: Any) -> list[str]:
    """The OIDC issuers (host/path) a trust's Federated principals name."""
    found: list[str] = []
    for statement in statements(document):
        principal = statement.get("Principal")
        if isinstance(principal, dict):
            for arn in as_list(principal.get("Federated")):
                if ":oidc-provider/" in str(arn):
                    found.append(str(arn).split(":oidc-provider/", 1)[1])
    return sorted(set(found))


def pod_identity_request(namespace: str, name: str, action: str) -> Request:
    """The Pod Identity agent assuming the role for a ServiceAccount: it tags the session with
    the account's namespace and name (EKS Pod Identity session tags)."""
    return Request(
        action,
        service=POD_IDENTITY_SERVICE,
        context={
            "aws:requesttag/kubernetes-namespace": [namespace],
            "aws:requesttag/kubernetes-service-account": [name],
        },
    )


def trusted_actions(document: Any, service: str) -> tuple[str, ...]:
    """The actions an assume-role policy allows `service` (wildcards expanded to what we need)."""
    granted: set[str] = set()
    for statement in statements(document):
        principal = statement.get("Principal") or {}
        services = as_list(principal.get("Service")) if isinstance(principal, dict) else []
        if statement.get("Effect") != "Allow" or service not in services:
            continue
        for action in as_list(statement.get("Action")):
            if action in ("*", "sts:*"):
                granted.update(POD_IDENTITY_ACTIONS)
            else:
                granted.add(action)
    return tuple(sorted(granted))


def subjects(document: Any) -> list[str]:
    """Every ServiceAccount `sub` value (or pattern) an IRSA trust names."""
    found: list[str] = []
    for statement in statements(document):
        for block in (statement.get("Condition") or {}).values():
            for key, values in (block or {}).items():
                if str(key).lower().endswith(":sub"):
                    found += [str(v) for v in as_list(values) if str(v).startswith(SA_PREFIX)]
    return found
