"""What a plain YAML scalar means to Kubernetes, to YAML 1.2 and to YAML 1.1.

Kubernetes (kubectl, the API server, Argo CD) and Helm read YAML with sigs.k8s.io/yaml, which
resolves plain scalars with go-yaml v2's table (resolve.go) and converts the result to JSON.
That table is YAML 1.1-like but not YAML 1.1: `y`/`n`/`on`/`off` are booleans, `0755` is octal,
`0o17`, `0b101` and `1e3` are numbers, underscores are dropped from numbers, `1:30` is text.
A YAML 1.2 reader (core schema) takes `y`, `on`, `1_000` and `0b101` as text and `0755` as 755;
a YAML 1.1 reader (PyYAML) takes `1e3` and `0o17` as text and `1:30` as 90.

eksinf reads machine-written YAML (Helm output, committed units, bundles, the hub) as
Kubernetes does (`kube_scalar`), so a value means to eksinf what it means to the cluster; refuses
in hand-written units and the profile a plain scalar those readers disagree on (`ambiguity`);
and writes a string in quotes whenever any of them would read its plain form as something else
(`plain_is_text`).
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

import yaml

# go-yaml v2's resolveMap: consulted first, whatever the scalar starts with
KUBE_WORDS: dict[str, Any] = {
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE"), True),
    **dict.fromkeys(("on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE"), False),
    **dict.fromkeys(("off", "Off", "OFF"), False),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
}
MERGE = "<<"
# go-yaml v2's yamlStyleFloat
_KUBE_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?\Z")
# Go's strconv.ParseInt with base 0 (underscores already dropped): a leading 0 means octal
_GO_INT = re.compile(r"([-+]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)\Z")
_BASES = {"x": 16, "o": 8, "b": 2}


def _go_int(text: str) -> int | None:
    match = _GO_INT.match(text)
    if match is None:
        return None
    sign, body = match.groups()
    if len(body) > 1 and body[1] in "xXoObB":
        value = int(body[2:], _BASES[body[1].lower()])
    else:
        value = int(body, 8 if body.startswith("0") else 10)
    value = -value if sign == "-" else value
    # ParseInt (int64), else ParseUint (uint64, no sign)
    if -(1 << 63) <= value < 1 << 63 or (not sign and value < 1 << 64):
        return value
    return None


@functools.lru_cache(maxsize=65536)
def kube_scalar(text: str) -> Any:
    """A plain scalar as Kubernetes and Helm read it: None, bool, int, float or the text."""
    if text in KUBE_WORDS:
        return KUBE_WORDS[text]
    first = text[:1]
    if first == ".":
        return _float(text)
    if first and first in "+-0123456789":
        plain = text.replace("_", "")
        number = _go_int(plain)
        if number is not None:
            return number
        value = _float(plain)
        # not a number: go-yaml keeps the text as written, underscores included
        return text if isinstance(value, str) else value
    return text


def _float(text: str) -> Any:
    # strconv.ParseFloat fails on an overflow (1e400): go-yaml then keeps the text
    if _KUBE_FLOAT.match(text):
        value = float(text)
        if not math.isinf(value):
            return value
    return text


_CORE_NULL = re.compile(r"(?:null|Null|NULL|~|)\Z")
_CORE_INT = re.compile(r"[-+]?[0-9]+\Z")
_CORE_OCT = re.compile(r"0o[0-7]+\Z")
_CORE_HEX = re.compile(r"0x[0-9a-fA-F]+\Z")
_CORE_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?\Z")
_CORE_INF = re.compile(r"([-+]?)\.(?:inf|Inf|INF)\Z")
_CORE_NAN = re.compile(r"\.(?:nan|NaN|NAN)\Z")


def core_scalar(text: str) -> Any:
    """A plain scalar as a YAML 1.2 reader reads it (the core schema)."""
    if _CORE_NULL.match(text):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if _CORE_INT.match(text):
        return int(text)
    if _CORE_OCT.match(text):
        return int(text[2:], 8)
    if _CORE_HEX.match(text):
        return int(text[2:], 16)
    if _CORE_FLOAT.match(text):
        return float(text)
    inf = _CORE_INF.match(text)
    if inf:
        return -math.inf if inf.group(1) == "-" else math.inf
    if _CORE_NAN.match(text):
        return math.nan
    return text


class _Yaml11(yaml.resolver.Resolver):
    """PyYAML's YAML 1.1 resolver, with dates kept as text as everywhere in eksinf."""


_Yaml11.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items()
}
_YAML11 = _Yaml11()
_CONSTRUCT = yaml.constructor.SafeConstructor()


def yaml11_scalar(text: str) -> Any:
    """A plain scalar as a YAML 1.1 reader (PyYAML) reads it."""
    tag = _YAML11.resolve(yaml.ScalarNode, text, (True, False))
    if tag == "tag:yaml.org,2002:str":
        return text
    try:
        return _CONSTRUCT.construct_object(yaml.ScalarNode(tag, text))
    except (yaml.YAMLError, ValueError):
        return text


def same(a: Any, b: Any) -> bool:
    """Whether two readings are one value of one type (NaN included)."""
    if type(a) is not type(b):
        return False
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


def same_tree(a: Any, b: Any) -> bool:
    """Whether two parses are one reading: `same` at every leaf and key, and mappings in one key
    order (`==` takes 1 for true and ignores order; a writer or a reader would not)."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return len(a) == len(b) and all(
            same(ka, kb) and same_tree(va, vb)
            for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
        )
    if type(a) is list:
        return len(a) == len(b) and all(same_tree(x, y) for x, y in zip(a, b, strict=True))
    return same(a, b)


def shown(value: Any) -> str:
    """A reading as the user would write it unambiguously (JSON, which all readers agree on)."""
    if isinstance(value, float) and not math.isfinite(value):
        return {math.inf: ".inf", -math.inf: "-.inf"}.get(value, ".nan")
    return json.dumps(value)


@functools.lru_cache(maxsize=65536)
def ambiguity(text: str) -> str | None:
    """How the readers disagree on a plain scalar (None when they agree), e.g.
    `Kubernetes reads true, YAML 1.2 readers "y"`."""
    kube = kube_scalar(text)
    core = core_scalar(text)
    old = yaml11_scalar(text)
    if same(kube, core) and same(kube, old):
        return None
    parts = [f"Kubernetes and Helm read {shown(kube)}"]
    if not same(core, kube):
        parts.append(f"YAML 1.2 readers {shown(core)}")
    if not same(old, kube):
        parts.append(f"YAML 1.1 readers {shown(old)}")
    return ", ".join(parts)


@functools.lru_cache(maxsize=65536)
def plain_is_text(text: str) -> bool:
    """Whether a string can be written without quotes: Kubernetes and YAML 1.2 readers both
    read it back as this text (the YAML 1.1 writer checks its own reading)."""
    return type(kube_scalar(text)) is str and type(core_scalar(text)) is str


def json_key(value: Any) -> str:
    """The JSON object key sigs.k8s.io/yaml makes of a mapping key: keys that differ in YAML
    (`on` and `true`, `0x10` and `16`) become the same key, and only one survives."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return shown(value)
