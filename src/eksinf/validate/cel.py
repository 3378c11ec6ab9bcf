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

Parsing a rule builds celpy's grammar (~0.3 s) and parses the text; parsed rules are kept in a
cache file keyed by the engine version and the rule texts, so a second run parses nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import pickle
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from importlib import metadata
from pathlib import Path
from typing import Any, cast

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError

from ..atomic import write_file
from ..model.quantity import parse as parse_quantity

_OLD_SELF = re.compile(r"\boldSelf\b")
_UNDECLARED = re.compile(r"undeclared reference to '([^']+)'")
ENGINE = f"cel-python {metadata.version('cel-python')}"

_FORMAT = "rule -> pickled parse tree | parse error"  # in the cache key: a new layout, a new file
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


def _re2():
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


def _cache_file(rules: list[str]) -> Path:
    from ..charts import cache_dir

    key = hashlib.sha256("\0".join([ENGINE, _FORMAT, *sorted(set(rules))]).encode()).hexdigest()
    return cache_dir().parent / "cel" / f"{key[:32]}.pickle"


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
        # rule -> its parse tree, pickled (unpickled only when the rule runs), or why it failed
        self._parsed: dict[str, bytes | str] = {}
        self._programs: dict[str, Any] = {}
        self._seen: dict[tuple[str, str], Outcome] = {}
        self._cache = _cache_file(rules)
        with contextlib.suppress(OSError, pickle.UnpicklingError, EOFError, AttributeError):
            loaded = pickle.loads(self._cache.read_bytes())
            if isinstance(loaded, dict) and all(
                isinstance(v, bytes | str) for v in loaded.values()
            ):
                self._parsed = loaded
        missing = [r for r in dict.fromkeys(rules) if r not in self._parsed]
        for rule in missing:
            try:
                self._parsed[rule] = pickle.dumps(self._environment().compile(rule))
            except celpy.CELParseError as exc:
                self._parsed[rule] = f"the CEL engine cannot parse it: {str(exc).splitlines()[0]}"
        if missing:
            with contextlib.suppress(OSError):  # an unwritable cache costs a parse next time
                write_file(self._cache, pickle.dumps(self._parsed))

    def _environment(self) -> celpy.Environment:
        if self._env is None:
            self._env = celpy.Environment()
        return self._env

    def _program(self, rule: str) -> Any:
        program = self._programs.get(rule)
        if program is None:
            ast = pickle.loads(
                cast(bytes, self._parsed[rule])
            )  # a str (parse error) never gets here
            program = celpy.InterpretedRunner(self._env or _Parsed(), ast, FUNCTIONS)
            self._programs[rule] = program
        return program

    def evaluate(self, rule: str, value: Any) -> Outcome:
        """The rule's outcome for `self` = value. Raw and resolved units share most subtrees, so
        outcomes are kept per (rule, value)."""
        try:
            key = (rule, json.dumps(value, sort_keys=True))
        except (TypeError, ValueError):
            return self._evaluate(rule, value)
        outcome = self._seen.get(key)
        if outcome is None:
            outcome = self._seen[key] = self._evaluate(rule, value)
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
        if isinstance(parsed, str):
            return Outcome(NOT_EVALUATED, parsed)
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
