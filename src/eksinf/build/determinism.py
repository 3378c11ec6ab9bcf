"""A static proof that a chart renders the same bytes every time, from its template text.

The render's determinism check (build/chartsplit.py) renders a chart a second time and compares
the outputs. A chart whose templates call only functions whose result depends on their arguments
alone needs no second render: Go's template language has no other source of change (a `range`
over a map walks it in key order; toYaml, toJson and toToml write maps in key order), and the
engine gets the same chart, values and options both times.

`prove` tokenises every template the engine evaluates (the chart's and its subcharts' templates/
files, `_helpers.tpl` included) as Go's text/template lexer does, and looks at every identifier
in function position. It proves a chart only when each one is a function known to be a pure
function of its arguments (PURE). Anything else leaves it unproven, and the second render runs:

- a function known to vary (VARYING: time, randomness, key generation with random salt or IV,
  the unsorted `keys` and `values` of a map, the cluster and the network);
- `tpl`, which evaluates text that is not in the chart's templates (usually a chart value);
- `include` of a computed template name, `printf` of a computed format or of `%p` (an
  address), and Helm's chart objects taken whole (`.Chart`, `.Subcharts`: printed, they show
  addresses);
- a function not in either table, text the scan cannot tokenise, or templates past the bound.

RULES names this rule set: it is part of every verdict, and of the key of a whole render kept in
the derived-data cache (build/render.py), so a change of the rules judges every chart afresh.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from eksinf.build import templatefuncs

RULES = "template-proof-1"
PROOF_SOURCE = "template proof"  # the determinism reference of a proven chart: its own render
MAX_TEMPLATE_BYTES = 8 << 20  # the shipped charts have ~0.3 MB of templates; past this, unproven

# Functions whose result may differ between two renders of the same inputs, by why, and those
# whose result is a function of their arguments: both read from the one table of functions.
VARYING: dict[str, tuple[str, ...]] = templatefuncs.varying()
PURE = templatefuncs.pure()
# Words of the template language itself; `template`, `block` and `define` take a literal name.
_KEYWORDS = frozenset((
    "if", "else", "end", "range", "with", "define", "template", "block", "break", "continue",
    "nil", "true", "false",
))  # fmt: skip
_NAMED = frozenset({"template", "block", "define", "include"})
# Helm's objects that hold pointers: Go prints a pointer inside a value as its address, so
# `{{ .Chart }}` or `{{ toString .Subcharts }}` differs from run to run. Their plain fields
# (`.Chart.Name`) are data.
_WHOLE_OBJECT = r"\.(?:Chart|Subcharts)$|\.Chart\.(?:Maintainers|Dependencies)$"

# One token inside an action, as Go's lexer reads it (lex.go). Numbers come before fields
# (`.5` is a number); a `-` followed by space is a trim marker.
_TOKEN = r"""(?P<space>\s+)
    |(?P<close>-?\}\})
    |(?P<comment>/\*.*?\*/)
    |(?P<string>"(?:[^"\\\n]|\\.)*"|`[^`]*`)
    |(?P<char>'(?:[^'\\\n]|\\.)+')
    |(?P<trim>-(?=\s))
    |(?P<number>[+-]?(?:\d|\.\d)[\w.]*(?:[eEpP][+-]\d+)?i?)
    |(?P<var>\$\w*)
    |(?P<field>(?:\.[^\W\d]\w*)+|\.)
    |(?P<ident>[^\W\d]\w*)
    |(?P<punct>:=|=|\||\(|\)|,)"""


@functools.cache
def _tokens() -> re.Pattern[str]:
    # compiled on first use: a render served from the cache imports this module, scans nothing
    return re.compile(_TOKEN, re.VERBOSE | re.DOTALL)


@dataclass(frozen=True)
class Proof:
    """A chart's verdict: `proven` when no template can render differently twice; `reason`
    says why (for an unproven chart, the first thing that left it unproven, and where)."""

    proven: bool
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {"rules": RULES, "proven": self.proven, "reason": self.reason}


def _varying_kind(name: str) -> str | None:
    return next((kind for kind, names in VARYING.items() if name in names), None)


def _doubt(text: str) -> tuple[int, str] | None:
    """The first thing in one template that may render differently twice: (offset, why)."""
    token_at = _tokens().match
    at = 0
    while True:
        start = text.find("{{", at)
        if start < 0:
            return None
        pos = start + 2
        pending = ""  # a word that must be followed by a literal: include, define, printf, ...
        while True:
            match = token_at(text, pos)
            if match is None:
                return start, "an action the scan cannot read"
            kind, token = match.lastgroup or "", match.group()
            pos = match.end()
            if kind in ("space", "comment", "trim"):
                continue
            if pending:
                if kind != "string":
                    return match.start(), f"{pending} of a computed {_literal(pending)}"
                if pending == "printf" and "%p" in token:
                    return match.start(), "printf of %p (an address)"
                pending = ""
            if kind == "close":
                break
            if kind == "field" and re.search(_WHOLE_OBJECT, token):
                return match.start(), f"takes {token} whole (printed, it shows memory addresses)"
            if kind == "ident":
                if token in _KEYWORDS:
                    pending = token if token in _NAMED else ""
                elif token == "printf":
                    pending = token
                elif token in PURE:
                    pending = token if token in _NAMED else ""
                else:
                    why = _varying_kind(token)
                    return match.start(), (
                        f"calls {token} ({why})" if why else f"calls {token}, not a known function"
                    )
        at = pos


def _literal(word: str) -> str:
    return "format" if word == "printf" else "template name"


@functools.lru_cache(maxsize=64)
def prove(templates: tuple[tuple[str, str], ...]) -> Proof:
    """Whether the chart whose templates are `templates` ((path, source) of every template the
    engine evaluates) renders the same bytes for the same inputs every time."""
    if sum(len(source) for _, source in templates) > MAX_TEMPLATE_BYTES:
        return Proof(False, f"templates past the scan's bound ({MAX_TEMPLATE_BYTES} bytes)")
    for path, source in templates:
        found = _doubt(source)
        if found is not None:
            offset, why = found
            line = source.count("\n", 0, offset) + 1
            return Proof(False, f"{path}:{line}: {why}")
    return Proof(True, f"{len(templates)} templates call pure functions only")
