"""The built-in kinds' semantic validation: what the API server refuses that no schema says.

The OpenAPI schemas type a field; the server's Go validation (k8s.io/kubernetes/pkg/apis/
{core,apps,policy}/validation at the pinned minor) then relates fields to each other and checks
names. Each rule here is one of those checks, found by running a corpus of broken units through
a real kube-apiserver v1.31 (tests/test_validate_server.py): a small function registered with
`@rule(name, kinds)` that yields (path parts, value, message), the message in the server's
words. Paths are eksinf's (`spec.template.spec.containers.0.name`); the server writes
`spec.template.spec.containers[0].name`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from eksinf.build.validate.meta import dns1123_label
from eksinf.core.types import Doc
from eksinf.model import quantity
from eksinf.model.resources import POD_SPEC_KEYS

Problem = tuple[list[str | int], Any, str]  # path parts, value, message
Check = Callable[[Doc], Iterator[Problem]]


@dataclass(frozen=True)
class Rule:
    name: str
    kinds: frozenset[tuple[str, str]]  # (apiVersion, kind)
    check: Check


RULES: list[Rule] = []
POD_KINDS = (
    ("v1", "Pod"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "ReplicaSet"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
)
SELECTOR_KINDS = POD_KINDS[1:5]  # apps/v1 workloads: the selector must select the template


def rule(name: str, *kinds: tuple[str, str]) -> Callable[[Check], Check]:
    def register(check: Check) -> Check:
        RULES.append(Rule(name, frozenset(kinds), check))
        return check

    return register


def problems(doc: Doc) -> Iterator[tuple[list[str | int], str, Any, str]]:
    """(path parts, rule, value, message) per semantic refusal of a built-in document."""
    key = (str(doc.get("apiVersion")), str(doc.get("kind")))
    for registered in RULES:
        if key in registered.kinds:
            for parts, value, message in registered.check(doc):
                yield parts, registered.name, value, message


def _dict(node: Any) -> Doc:
    return node if isinstance(node, dict) else {}


def _list(node: Any) -> list[Any]:
    return node if isinstance(node, list) else []


def _pod(doc: Doc) -> tuple[list[str], Doc]:
    keys = list(POD_SPEC_KEYS.get(str(doc.get("kind")), ()))
    node: Any = doc
    for key in keys:
        node = _dict(node).get(key)
    return keys, _dict(node)


def _containers(doc: Doc) -> Iterator[tuple[list[str | int], Doc]]:
    base, spec = _pod(doc)
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for index, item in enumerate(_list(spec.get(group))):
            if isinstance(item, dict):
                yield [*base, group, index], item


@rule("requests within limits", *POD_KINDS)
def requests_within_limits(doc: Doc) -> Iterator[Problem]:
    for at, container in _containers(doc):
        resources = _dict(container.get("resources"))
        limits = _dict(resources.get("limits"))
        for name, requested in _dict(resources.get("requests")).items():
            want, cap = quantity.parse(requested), quantity.parse(limits.get(name))
            if want is not None and cap is not None and want > cap:
                yield (
                    [*at, "resources", "requests"],  # where the server reports it
                    requested,
                    f"must be less than or equal to {name} limit of {limits[name]}",
                )


_RFC1123 = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character"
)


def _label(value: str) -> str | None:
    """A DNS-1123 label's problem, in the server's words."""
    problem = dns1123_label(value)
    if problem is None:
        return None
    return _RFC1123 if len(value) <= 63 else problem


@rule("container name", *POD_KINDS)
def container_name(doc: Doc) -> Iterator[Problem]:
    for at, container in _containers(doc):
        name = container.get("name")
        problem = _label(name) if isinstance(name, str) else None
        if problem:
            yield [*at, "name"], name, problem


_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


@rule("env var name", *POD_KINDS)
def env_var_name(doc: Doc) -> Iterator[Problem]:
    for at, container in _containers(doc):
        for index, env in enumerate(_list(container.get("env"))):
            name = _dict(env).get("name")
            if isinstance(name, str) and not _ENV_NAME.match(name):
                yield (
                    [*at, "env", index, "name"],
                    name,
                    "a valid environment variable name must consist of alphabetic characters, "
                    "digits, '_', '-', or '.', and must not start with a digit",
                )


def iana_svc_name(value: str) -> str | None:
    """IsValidPortName (IANA_SVC_NAME, RFC 6335): why `value` is not one, or None."""
    if len(value) > 15:
        return "must be no more than 15 characters"
    if not re.fullmatch(r"[-a-z0-9]+", value):
        return "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"
    if not re.search(r"[a-z]", value):
        return "must contain at least one letter (a-z)"
    if "--" in value:
        return "must not contain consecutive hyphens"
    if value.startswith("-") or value.endswith("-"):
        return "must not begin or end with a hyphen"
    return None


def _port_range(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool) and not 1 <= value <= 65535:
        return "must be between 1 and 65535, inclusive"
    return None


@rule("container port", *POD_KINDS)
def container_port(doc: Doc) -> Iterator[Problem]:
    for at, container in _containers(doc):
        for index, port in enumerate(_list(container.get("ports"))):
            port = _dict(port)
            name = port.get("name")
            problem = iana_svc_name(name) if isinstance(name, str) and name else None
            if problem:
                yield [*at, "ports", index, "name"], name, problem
            for key in ("containerPort", "hostPort"):
                value = port.get(key)
                if value == 0:  # unset: no host port, but a container port is required
                    if key == "containerPort":
                        yield [*at, "ports", index, key], value, "Required value"
                    continue
                problem = _port_range(value)
                if problem:
                    yield [*at, "ports", index, key], value, problem


@rule("restart policy", *SELECTOR_KINDS)
def restart_policy(doc: Doc) -> Iterator[Problem]:
    base, spec = _pod(doc)
    policy = spec.get("restartPolicy")
    if policy is not None and policy != "Always":
        yield [*base, "restartPolicy"], policy, 'supported values: "Always"'


def _selects(selector: Doc, labels: Doc) -> bool:
    key: Any  # a matchLabels key, then a matchExpressions one as the document gives it
    for key, value in _dict(selector.get("matchLabels")).items():
        if labels.get(key) != value:
            return False
    for expr in _list(selector.get("matchExpressions")):
        expr = _dict(expr)
        key, op, values = expr.get("key"), expr.get("operator"), _list(expr.get("values"))
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


@rule("selector matches template", *SELECTOR_KINDS)
def selector_matches(doc: Doc) -> Iterator[Problem]:
    spec = _dict(doc.get("spec"))
    selector = spec.get("selector")
    labels = _dict(_dict(_dict(spec.get("template")).get("metadata")).get("labels"))
    if isinstance(selector, dict) and selector and not _selects(selector, labels):
        yield (
            ["spec", "template", "metadata", "labels"],
            labels,
            "`selector` does not match template `labels`",
        )


@rule("service ports", ("v1", "Service"))
def service_ports(doc: Doc) -> Iterator[Problem]:
    spec = _dict(doc.get("spec"))
    kind = spec.get("type") or "ClusterIP"
    for index, port in enumerate(_list(spec.get("ports"))):
        port = _dict(port)
        at: list[str | int] = ["spec", "ports", index]
        name = port.get("name")
        problem = _label(name) if isinstance(name, str) and name else None
        if problem:
            yield [*at, "name"], name, problem
        problem = _port_range(port.get("port"))
        if problem:
            yield [*at, "port"], port.get("port"), problem
        target = port.get("targetPort")
        if isinstance(target, str):
            problem = iana_svc_name(target)
            if problem:
                yield [*at, "targetPort"], target, problem
        elif target != 0:  # 0 (or absent) defaults to `port`
            problem = _port_range(target)
            if problem:
                yield [*at, "targetPort"], target, problem
        node_port = port.get("nodePort")
        if node_port and kind == "ClusterIP":
            yield [*at, "nodePort"], node_port, "may not be used when `type` is 'ClusterIP'"
        elif node_port:
            problem = _port_range(node_port)
            if problem:
                yield [*at, "nodePort"], node_port, problem


@rule("disruption budget", ("policy/v1", "PodDisruptionBudget"))
def disruption_budget(doc: Doc) -> Iterator[Problem]:
    spec = _dict(doc.get("spec"))
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        yield ["spec"], spec, "minAvailable and maxUnavailable cannot be both set"


def _zero(value: Any) -> bool:
    return value in (0, "0", "0%")


@rule("rolling update", ("apps/v1", "DaemonSet"), ("apps/v1", "Deployment"))
def rolling_update(doc: Doc) -> Iterator[Problem]:
    spec = _dict(doc.get("spec"))
    key = "updateStrategy" if doc.get("kind") == "DaemonSet" else "strategy"
    strategy = _dict(spec.get(key))
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return
    rolling = _dict(strategy.get("rollingUpdate"))
    # the server's defaults: a DaemonSet surges 0 and loses 1, a Deployment 25% and 25%
    surge_default, unavailable_default = (0, 1) if doc.get("kind") == "DaemonSet" else ("25%",) * 2
    unavailable = rolling.get("maxUnavailable", unavailable_default)
    if _zero(unavailable) and _zero(rolling.get("maxSurge", surge_default)):
        yield (
            ["spec", key, "rollingUpdate", "maxUnavailable"],
            unavailable,
            # the two kinds' validations word it differently
            "cannot be 0 when maxSurge is 0"
            if doc.get("kind") == "DaemonSet"
            else "may not be 0 when `maxSurge` is 0",
        )
