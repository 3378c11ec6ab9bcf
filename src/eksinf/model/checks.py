"""The one check kernel: a `Rule` judges a context and yields `Finding`s; the kernel stamps each
finding with its rule's name, severity and docs anchor, so a rule never spells its own name.

Every family (lint, the cluster contract, the flattening guard, review's risk classes) keeps one
explicit table: a tuple of rules in one module, run in table order by `run`, and rendered for its
docs page by `markdown` (a test compares each page's generated table with it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

# A finding's status: most families report only failures; the contract reports every element.
PASS, FAIL, WARN, UNKNOWN, SKIPPED = "pass", "fail", "warn", "unknown", "skipped"
STATUSES = (PASS, FAIL, WARN, UNKNOWN, SKIPPED)
# A rule's severity: a required (or error) rule's failure blocks; an advisory one's only warns.
REQUIRED, ADVISORY, ERROR = "required", "advisory", "error"
SEVERITIES = (REQUIRED, ADVISORY, ERROR)

C = TypeVar("C")  # what a family's rules judge (its context)
R = TypeVar("R")  # a row of a docs table


@dataclass(frozen=True)
class Finding:
    """One judgement of one rule. `name`, `severity` and `anchor` are the rule's (stamped by
    `Rule.run`); the rule supplies the rest."""

    detail: str  # the message: what was found
    element: str = ""  # what it is about: a contract element, a resource, a field path
    fix: str = ""  # what fixes it ("" when nothing needs fixing)
    status: str = FAIL
    call: str = ""  # how it was established (the contract: the calls that prove it)
    places: tuple[str, ...] = ()  # where, in files: "configs/<c>/<u>.yaml Kind ns/name path"
    context: tuple[tuple[str, str], ...] = ()  # what a reader needs beside it, as labelled pairs
    # a finer kind than the rule, when one rule reports several (lint's `taint-gpu` under
    # `taints`): what the family prints instead of the name ("" prints the name)
    code: str = ""
    name: str = ""  # the rule's
    severity: str = ""  # the rule's (a skipped finding is advisory)
    anchor: str = ""  # the rule's

    @property
    def label(self) -> str:
        """What the finding is printed as: its code, else its rule's name."""
        return self.code or self.name

    # lint's words for the same two: a finding's check (its label) and its message
    @property
    def check(self) -> str:
        return self.label

    @property
    def message(self) -> str:
        return self.detail

    @property
    def blocks(self) -> bool:
        """A failure (or an unread element) of a rule whose failures block."""
        return self.severity in (REQUIRED, ERROR) and self.status in (FAIL, UNKNOWN)


RuleFn = Callable[[C], Iterable[Finding]]


@dataclass(frozen=True)
class Rule(Generic[C]):
    """One row of a family's table. The docs columns a family does not use stay empty."""

    name: str
    severity: str
    family: str
    summary: str  # the first paragraph of the function's docstring
    anchor: str
    fn: RuleFn[C] = field(repr=False, compare=False)
    element: str = ""  # what must hold (the contract: what the cluster must have)
    call: str = ""  # what proves it
    fix: str = ""
    why: str = ""  # why it blocks (or only warns)
    kinds: tuple[str, ...] = ()  # the target kinds it judges (the contract)
    domain: str = ""  # lint: where it lives (identity, network, ...); the guard: the scope it reads
    title: str = ""  # a heading for its findings (review)
    marker: str = ""  # a one-character mark for its findings (review)
    also: tuple[str, ...] = ()  # further names the table lists for it (one pass judges both)

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.also)

    def stamp(self, found: Finding) -> Finding:
        severity = ADVISORY if found.status == SKIPPED else self.severity
        return replace(found, name=self.name, severity=severity, anchor=self.anchor)

    def run(self, ctx: C) -> list[Finding]:
        """The rule's findings for `ctx`, each stamped with the rule's name, severity, anchor."""
        return [self.stamp(f) for f in self.fn(ctx)]


def summary_of(fn: Callable[..., Any]) -> str:
    return " ".join((fn.__doc__ or "").split("\n\n")[0].split())


def rule(
    name: str,
    *,
    family: str,
    severity: str,
    anchor: str,
    **docs: Any,
) -> Callable[[RuleFn[C]], Rule[C]]:
    """Make a function a rule: `@rule("name", family=..., severity=..., anchor=...)`. The result
    is the `Rule` (list it in the family's table); its summary is the docstring's first
    paragraph."""
    assert severity in SEVERITIES, severity

    def make(fn: RuleFn[C]) -> Rule[C]:
        return Rule(name, severity, family, summary_of(fn), anchor, fn, **docs)

    return make


def run(rules: Iterable[Rule[C]], ctx: C) -> list[Finding]:
    """Every finding of every rule, in table order."""
    return [f for r in rules for f in r.run(ctx)]


def check_table(rules: Sequence[Rule[Any]]) -> None:
    """A table names each rule once, all of one family."""
    names = [n for r in rules for n in r.names]
    assert len(set(names)) == len(names), f"a rule is listed twice: {names}"
    assert len({r.family for r in rules}) <= 1, "a table holds one family"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(rows: Iterable[R], columns: Sequence[tuple[str, Callable[[R], str]]]) -> str:
    """A family's docs table: one row per rule (or per row of the family's listing), `columns`
    as (heading, its cell of a row)."""
    lines = [
        "| " + " | ".join(h for h, _ in columns) + " |",
        "|" + "---|" * len(columns),
    ]
    for r in rows:
        lines.append("| " + " | ".join(cell(get(r)) for _, get in columns) + " |")
    return "\n".join(lines) + "\n"


def replace_generated(doc: str, table: str, begin: str, end: str) -> str:
    """`doc` with the text between its `begin` and `end` markers replaced by `table`."""
    head, rest = doc.split(begin, 1)
    return head + begin + table + end + rest.split(end, 1)[1]


def generated(doc: str, begin: str, end: str) -> str:
    """The text between `begin` and `end` in `doc` (what tests compare with `markdown`)."""
    return doc.split(begin, 1)[1].split(end, 1)[0]
