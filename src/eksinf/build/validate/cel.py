"""CRD `x-kubernetes-validations` rules, evaluated as the API server does on create.

The CEL engine is cel-python (`celpy`). It implements CEL's standard definitions; the API server
also binds Kubernetes' CEL libraries, so the ones the stack's CRDs call are added here with the
Kubernetes semantics (k8s.io/apiserver/pkg/cel/library and cel-go's strings extension):

- regex: `s.find(re)` (first match or ""), `s.findAll(re)`;
- strings: `s.split(sep)`, `s.lowerAscii()`, `s.upperAscii()`, `s.trim()`, `s.replace(a, b)`,
  `s.indexOf(sub)`, `s.lastIndexOf(sub)`, `list.join(sep)`;
- lists: `l.isSorted()`, `l.sum()`, `l.min()`, `l.max()`, `l.indexOf(x)`, `l.lastIndexOf(x)`;
- quantities: `quantity(s)`, `isQuantity(s)`, and on a quantity `isInteger()`, `asInteger()`,
  `asApproximateFloat()`, `sign()`, `add(q)`, `sub(q)`, `compareTo(q)`, `isLessThan(q)`,
  `isGreaterThan(q)`.

A rule that calls anything else the engine lacks is `not-evaluated` (with its text), never a
pass. A transition rule (it reads `oldSelf`) only runs on update; on create the API server skips
it, and so does this check (`transition`). An evaluation error (a missing key, `int('x')`) is a
failure, as it is on the server.

Parsing a rule builds celpy's grammar (~0.3 s) and parses the text; parsed rules are kept in the
derived-data cache (eksinf.core.cache, HMAC-checked) keyed by the engine version and the rule texts,
so a second run parses nothing. A parse tree is kept as plain JSON (each node's rule or token
with its position), never in a format that builds objects when read, and rebuilt into lark's
tree when the rule first runs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from importlib import metadata
from typing import Any, cast

import celpy
import lark
from celpy import celtypes
from celpy.evaluation import CELEvalError

from eksinf.core import cache
from eksinf.model.quantity import parse as parse_quantity

_OLD_SELF = re.compile(r"\boldSelf\b")
_UNDECLARED = re.compile(r"undeclared reference to '([^']+)'")
ENGINE = f"cel-python {metadata.version('cel-python')}"

_FORMAT = "cel-2: rule -> {tree: JSON text of the parse tree} | {error: text}"  # in the key
PASS, FAIL, NOT_EVALUATED, TRANSITION = "pass", "fail", "not-evaluated", "transition"


@dataclass(frozen=True)
class Outcome:
    status: str  # pass | fail | not-evaluated | transition
    detail: str = ""  # why it failed or was not evaluated


# ---- the Kubernetes CEL libraries -------------------------------------------------------------


class Quantity(celtypes.StringType):
    """A Kubernetes quantity as CEL sees it (library `quantity`): compared by value."""

    value: Decimal

    def __new__(cls, text: str) -> Quantity:
        parsed = parse_quantity(str(text))
        if parsed is None:
            raise ValueError(f"invalid quantity {text!r}")
        out = cast(Quantity, super().__new__(cls, str(text)))
        out.value = parsed
        return out


def _re2() -> Any:  # re2 ships no type information
    import re2  # celpy's own regex engine (RE2 syntax, as the API server's)

    return re2


def _find(text: Any, pattern: Any) -> Any:
    match = _re2().search(str(pattern), str(text))
    return celtypes.StringType(match.group(0) if match else "")


def _find_all(text: Any, pattern: Any, limit: Any = -1) -> Any:
    found = [m.group(0) for m in _re2().finditer(str(pattern), str(text))]
    if int(limit) >= 0:
        found = found[: int(limit)]
    return celtypes.ListType([celtypes.StringType(s) for s in found])


def _split(text: Any, sep: Any, limit: Any = -1) -> Any:
    limit = int(limit)
    if limit == 0:
        return celtypes.ListType([])
    parts = str(text).split(str(sep), limit - 1) if limit > 0 else str(text).split(str(sep))
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _index_of(container: Any, item: Any, start: Any = 0) -> Any:
    if isinstance(container, celtypes.ListType):
        for index, value in enumerate(container):
            if value == item:
                return celtypes.IntType(index)
        return celtypes.IntType(-1)
    return celtypes.IntType(str(container).find(str(item), int(start)))


def _last_index_of(container: Any, item: Any) -> Any:
    if isinstance(container, celtypes.ListType):
        for index in range(len(container) - 1, -1, -1):
            if container[index] == item:
                return celtypes.IntType(index)
        return celtypes.IntType(-1)
    return celtypes.IntType(str(container).rfind(str(item)))


def _join(items: Any, sep: Any = "") -> Any:
    return celtypes.StringType(str(sep).join(str(i) for i in items))


def _is_quantity(text: Any) -> Any:
    return celtypes.BoolType(parse_quantity(str(text)) is not None)


def _quantity(text: Any) -> Any:
    return Quantity(str(text))


def _as_quantity(value: Any) -> Quantity:
    return value if isinstance(value, Quantity) else Quantity(str(value))


def _compare(a: Any, b: Any) -> int:
    left, right = _as_quantity(a).value, _as_quantity(b).value
    return (left > right) - (left < right)


def _quantity_of(value: Decimal) -> Quantity:
    text = format(value.normalize(), "f")
    return Quantity(text)


def _as_integer(q: Any) -> Any:
    value = _as_quantity(q).value
    if value != value.to_integral_value() or abs(value) > 2**63 - 1:
        raise ValueError(f"quantity {q} is not an int64")
    return celtypes.IntType(int(value))


FUNCTIONS: dict[str, Any] = {
    "find": _find,
    "findAll": _find_all,
    "split": _split,
    "lowerAscii": lambda s: celtypes.StringType(str(s).lower()),
    "upperAscii": lambda s: celtypes.StringType(str(s).upper()),
    "trim": lambda s: celtypes.StringType(str(s).strip()),
    "replace": lambda s, a, b, n=-1: celtypes.StringType(str(s).replace(str(a), str(b), int(n))),
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "join": _join,
    "isSorted": lambda items: celtypes.BoolType(list(items) == sorted(items)),
    "sum": lambda items: sum(items[1:], items[0]) if items else celtypes.IntType(0),
    "min": lambda items: min(items),
    "max": lambda items: max(items),
    "isQuantity": _is_quantity,
    "quantity": _quantity,
    "isInteger": lambda q: celtypes.BoolType(
        _as_quantity(q).value == _as_quantity(q).value.to_integral_value()
    ),
    "asInteger": _as_integer,
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(_as_quantity(q).value)),
    "sign": lambda q: celtypes.IntType(_compare(q, "0")),
    "add": lambda q, o: _quantity_of(_as_quantity(q).value + _as_quantity(o).value),
    "sub": lambda q, o: _quantity_of(_as_quantity(q).value - _as_quantity(o).value),
    "compareTo": lambda q, o: celtypes.IntType(_compare(q, o)),
    "isLessThan": lambda q, o: celtypes.BoolType(_compare(q, o) < 0),
    "isGreaterThan": lambda q, o: celtypes.BoolType(_compare(q, o) > 0),
}


# ---- compiling and evaluating ------------------------------------------------------------------


# A parse tree as JSON lists: a token is [0, type, value, start_pos, line, column, end_line,
# end_column, end_pos]; a tree is [1, its rule (a token, or a string), [children...], meta], where
# meta is null or the values of _META_FIELDS in order (null for a field lark did not set).
_TOKEN_FIELDS = ("start_pos", "line", "column", "end_line", "end_column", "end_pos")
_META_FIELDS = (
    "empty",
    "line",
    "column",
    "start_pos",
    "end_line",
    "end_column",
    "end_pos",
    "container_line",
    "container_column",
    "container_start_pos",
    "container_end_line",
    "container_end_column",
    "container_end_pos",
)
_TOKEN, _TREE = 0, 1


def tree_to_plain(node: Any) -> Any:
    """A lark parse tree as JSON-ready lists (the inverse of `tree_from_plain`)."""
    if isinstance(node, lark.Token):
        return [_TOKEN, node.type, str(node), *(getattr(node, f) for f in _TOKEN_FIELDS)]
    meta = node._meta  # lark makes a Meta on first access; keep an absent one absent
    return [
        _TREE,
        tree_to_plain(node.data) if isinstance(node.data, lark.Token) else node.data,
        [tree_to_plain(c) for c in node.children],
        None if meta is None else [getattr(meta, f, None) for f in _META_FIELDS],
    ]


def tree_from_plain(plain: Any) -> Any:
    """The lark tree `tree_to_plain` described; TypeError, ValueError or IndexError when it is
    not one. (Entries are HMAC-checked, so this guards against another layout, not forgery.)"""
    if plain[0] == _TOKEN:
        if len(plain) != 3 + len(_TOKEN_FIELDS):
            raise ValueError("not a token")
        return lark.Token(*plain[1:])
    if plain[0] != _TREE or len(plain) != 4:
        raise ValueError("not a tree")
    _, rule, children, values = plain
    meta = None
    if values is not None:
        meta = lark.tree.Meta()
        meta.__dict__.update(
            (f, v) for f, v in zip(_META_FIELDS, values, strict=True) if v is not None
        )
    return lark.Tree(
        rule if isinstance(rule, str) else tree_from_plain(rule),
        [tree_from_plain(c) for c in children],
        meta,
    )


def _cache_key(rules: list[str]) -> str:
    return cache.key(ENGINE.encode(), _FORMAT.encode(), *(r.encode() for r in sorted(set(rules))))


class _Parsed(celpy.Environment):
    """The environment of rules parsed earlier (from the cache). celpy's Environment builds its
    grammar in __init__ (~0.3 s); a runner only reads the package and annotations."""

    def __init__(self) -> None:
        self.logger = logging.getLogger("celpy.Environment")
        self.package = None
        self.annotations = dict(celpy.googleapis)
        self.runner_class = celpy.InterpretedRunner


class Engine:
    """Compiled rules, each compiled once, evaluated per object."""

    def __init__(self, rules: list[str]) -> None:
        self._env: celpy.Environment | None = None
        # rule -> {"tree": its parse tree as JSON text (read and rebuilt only when the rule
        # runs: a run evaluates some of the rules it loads)} or {"error": why}
        self._parsed: dict[str, dict[str, Any]] = {}
        self._programs: dict[str, Any] = {}
        self._seen: dict[tuple[str, str], Outcome] = {}
        entry = _cache_key(rules)
        with contextlib.suppress(ValueError, RecursionError):
            loaded = json.loads(cache.get("cel", entry) or b"null")
            if isinstance(loaded, dict) and all(
                isinstance(v, dict)
                and (isinstance(v.get("error"), str) or isinstance(v.get("tree"), str))
                for v in loaded.values()
            ):
                self._parsed = loaded
        missing = [r for r in dict.fromkeys(rules) if r not in self._parsed]
        for rule in missing:
            try:
                tree = tree_to_plain(self._environment().compile(rule))
                self._parsed[rule] = {"tree": json.dumps(tree, separators=(",", ":"))}
            except celpy.CELParseError as exc:
                error = f"the CEL engine cannot parse it: {str(exc).splitlines()[0]}"
                self._parsed[rule] = {"error": error}
        if missing:
            with contextlib.suppress(ValueError, RecursionError):
                cache.put("cel", entry, json.dumps(self._parsed).encode())

    def _environment(self) -> celpy.Environment:
        if self._env is None:
            self._env = celpy.Environment()
        return self._env

    def _program(self, rule: str) -> Any:
        program = self._programs.get(rule)
        if program is None:
            text = self._parsed[rule]["tree"]  # a parse error never gets here
            try:
                ast = tree_from_plain(json.loads(text))
            except (TypeError, ValueError, IndexError, KeyError, RecursionError):
                ast = self._environment().compile(rule)  # a damaged entry: parse it again
            program = celpy.InterpretedRunner(self._env or _Parsed(), ast, FUNCTIONS)
            self._programs[rule] = program
        return program

    def evaluate(self, rule: str, value: Any, counted: set[str] | None = None) -> Outcome:
        """The rule's outcome for `self` = value. Raw and resolved units share most subtrees, so
        outcomes are kept per (rule, value). `counted` gets the rule when this evaluation counts
        towards `distinct_evaluated` (a caller's share of it)."""
        try:
            key = (rule, json.dumps(value, sort_keys=True))
        except (TypeError, ValueError):
            return self._evaluate(rule, value)
        outcome = self._seen.get(key)
        if outcome is None:
            outcome = self._seen[key] = self._evaluate(rule, value)
        if counted is not None and outcome.status in (PASS, FAIL):
            counted.add(rule)
        return outcome

    @property
    def distinct_evaluated(self) -> int:
        """How many different rules ran to a pass or a failure at least once."""
        return len({rule for (rule, _), o in self._seen.items() if o.status in (PASS, FAIL)})

    def _evaluate(self, rule: str, value: Any) -> Outcome:
        if _OLD_SELF.search(rule):
            return Outcome(
                TRANSITION, "a transition rule (reads oldSelf): the server runs it on update only"
            )
        parsed = self._parsed.get(rule)
        if parsed is not None and "error" in parsed:
            return Outcome(NOT_EVALUATED, str(parsed["error"]))
        if parsed is None:  # not among the rules this engine was built for: a caller bug
            raise KeyError(rule)
        program = self._program(rule)  # outside the try: a broken program is a bug, not a verdict
        try:
            result = program.evaluate({"self": celpy.json_to_cel(value)})
        except CELEvalError as exc:
            return self._error(exc)
        except (
            ValueError,
            TypeError,
            KeyError,
            IndexError,
            ArithmeticError,
            InvalidOperation,
        ) as exc:
            return Outcome(FAIL, f"evaluation error: {exc}")
        if isinstance(result, CELEvalError):
            return self._error(result)
        if not isinstance(result, celtypes.BoolType):
            return Outcome(FAIL, f"the rule returned {type(result).__name__}, not a bool")
        return Outcome(PASS) if bool(result) else Outcome(FAIL)

    @staticmethod
    def _error(exc: CELEvalError) -> Outcome:
        message = str(exc.args[0]) if exc.args else str(exc)
        undeclared = _UNDECLARED.match(message)
        if undeclared:
            return Outcome(
                NOT_EVALUATED, f"the CEL engine has no function or variable {undeclared.group(1)!r}"
            )
        return Outcome(FAIL, f"evaluation error: {message}")
