"""The small where-clause language hub commands accept to select spaces and units.

Grammar: `cond [AND cond]...`, where cond is `Field = 'v'`, `Field != 'v'`, `Field LIKE 'a%'`
or `Field IN ('a', 'b')`. Fields: `Slug`, `Space`, `Kind` (any resource in the unit),
`Labels.<key>`, `Target`. It is ConfigHub's subset that eksinf and its users need, nothing more.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import USAGE, EksinfError

FIELDS = ("Slug", "Space", "Kind", "Target")
_COND = re.compile(
    r"\s*(?P<field>[A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z0-9_./-]+)?)\s*"
    r"(?:(?P<op>!=|=|LIKE)\s*'(?P<value>[^']*)'|IN\s*\((?P<values>[^)]*)\))\s*",
    re.IGNORECASE,
)
_AND = re.compile(r"\s+AND\s+", re.IGNORECASE)


@dataclass(frozen=True)
class Condition:
    field: str
    op: str  # "=", "!=", "LIKE", "IN"
    values: tuple[str, ...]

    def matches(self, actual: set[str]) -> bool:
        if self.op == "=":
            return self.values[0] in actual
        if self.op == "!=":
            return self.values[0] not in actual
        if self.op == "IN":
            return bool(actual & set(self.values))
        pattern = re.compile(
            "^" + ".*".join(re.escape(part) for part in self.values[0].split("%")) + "$"
        )
        return any(pattern.match(v) for v in actual)


def parse(where: str) -> tuple[Condition, ...]:
    conditions = []
    for part in _AND.split(where.strip()):
        match = _COND.fullmatch(part)
        if not match:
            raise EksinfError(
                f"where-clause {where!r}: cannot parse {part.strip()!r}",
                "Write conditions like Slug = 'x', Kind = 'Deployment', Labels.Component = "
                "'karpenter', Slug LIKE 'nvidia%' or Slug IN ('a', 'b'), joined by AND.",
                USAGE,
            )
        name = match["field"]
        if name not in FIELDS and not name.startswith("Labels."):
            raise EksinfError(
                f"where-clause {where!r}: unknown field {name!r}",
                f"Use one of {', '.join(FIELDS)} or Labels.<key>.",
                USAGE,
            )
        if match["values"] is not None:
            values = tuple(v.strip().strip("'") for v in match["values"].split(",") if v.strip())
            conditions.append(Condition(name, "IN", values))
        else:
            conditions.append(Condition(name, match["op"].upper(), (match["value"],)))
    return tuple(conditions)


def select(
    items: Iterable[Any], where: str | None, attribute: Callable[[Any, str], Iterable[str]]
) -> list[Any]:
    """Items for which every condition holds; `attribute(item, field)` gives the field's values."""
    if not where:
        return list(items)
    conditions = parse(where)
    return [i for i in items if all(c.matches(set(attribute(i, c.field))) for c in conditions)]
