"""A static proof that a chart renders the same bytes every time, from its template text.

The render's determinism check (build/chartsplit.py) renders a chart a second time and compares
the outputs. A chart whose templates call only functions whose result depends on their arguments
alone, and never print Helm's root context, needs no second render: Go's template language has
no other source of change (a `range` over a map walks it in key order; toYaml, toJson and toToml
write maps in key order), and the engine gets the same chart, values and options both times.

`prove` parses every template the engine evaluates (build/templateparse.py: the chart's and
its enabled subcharts', as the engine reports them) and follows each value through it
(build/templateflow.py). A value is CLEAN (data: values, release, chart fields, strings), the ROOT
context (`$` at a file's top level, or `.` where it is bound to it), or holds the root context
somewhere (a dict of it, a merge with it). The root context holds `.Capabilities` as a Go
pointer: printed, it shows the pointer's address, which differs on every render. So:

- `$` is a template's data: the root context for a file, for a `define` what every `include`
  or `template` of its name passes (an include of a name made of data passes to every
  template, or, for `print ... "/x.yaml"`, to those whose name ends so: Helm's template set is
  the chart's files, all read here);
  `.` is `$` at a template's top level, the value of `with X`, an element of `range X`;
  variables are what every assignment gives them;
- the root's `.Values`, `.Release`, `.Template`, `.Files`, `.Chart.<field>` and
  `.Capabilities.<field>` are CLEAN; `.Capabilities` and `.Subcharts` are not;
- `dict`, `list`, `tuple`, `get`, `index`, `first`, `last`, `append`, `default`, `coalesce`,
  `ternary`, `required`, `and`, `or`, `deepCopy` and the map-changing `set`, `unset`, `merge`,
  `mergeOverwrite` carry the root context without printing it (`dict` keeps each key's value,
  so `(dict "root" $).root.Values` is CLEAN); `len`, `hasKey`, `empty`, `not`, `kindIs`,
  `kindOf`, `typeIs`, `typeOf` return CLEAN; `include` returns CLEAN text (the included
  template is judged where it prints). Any other function given the root context is a doubt,
  and so is an action that prints it. A map change that stores the root context into a map
  another value may share (anything but a map made in the same expression) is a doubt too, as
  a later read of that map would see it.

Any doubt leaves the chart unproven, and the second render runs:

- a function known to vary (VARYING: time, randomness, key generation with random salt or IV,
  the unsorted `keys` and `values` of a map unless only counted or sorted, the cluster and the
  network);
- `tpl`, which evaluates text that is not in the chart's templates, unless the text is a chart
  value as it is (a `.Values` field, the dot bound to one, `toString` of it), no template
  changes it (`set`, `merge`; followed by values path) and no value holds a template action
  (`values_plain`, as the engine reports it): then tpl returns the text as it is, and the
  verdict holds for those values only (`Proof.for_values`);
- `include` of a template name that may hold the root context; `printf` of a computed format, of
  `%p` (an address) or of `semver`'s pointer under a verb such as `%d` (its address); Helm's
  chart objects taken whole (`.Chart`, `.Subcharts`);
- a function not in either table, text the scan cannot read, or templates past the bound.

RULES names this rule set: it is part of every verdict, and of the key of a whole render kept in
the derived-data cache (build/render.py), so a change of the rules judges every chart afresh.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eksinf.build.templateparse import Parsed, ScanError

RULES = "template-proof-2"
PROOF_SOURCE = "template proof"  # the determinism reference of a proven chart: its own render
MAX_TEMPLATE_BYTES = 8 << 20  # the shipped charts have ~0.3 MB of templates; past this, unproven


@dataclass(frozen=True)
class Proof:
    """A chart's verdict: `proven` when no template can render differently twice; `reason`
    says why (for an unproven chart, the first thing that left it unproven, and where).
    `for_values`: the proof holds for the values it was given only (a `tpl` of a value is
    proven because no value holds a template action); a record keyed by them keeps it."""

    proven: bool
    reason: str
    for_values: bool = False

    def as_dict(self) -> dict[str, object]:
        return {
            "rules": RULES,
            "proven": self.proven,
            "reason": self.reason,
            "for_values": self.for_values,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Proof | None:
        """The verdict `as_dict` wrote, or None when it is under other rules."""
        if not isinstance(raw, dict) or raw.get("rules") != RULES:
            return None
        if not isinstance(raw.get("proven"), bool):
            return None
        return cls(raw["proven"], str(raw["reason"]), raw.get("for_values") is True)


@functools.lru_cache(maxsize=256)
def _parsed(source: str) -> Parsed | ScanError:
    from eksinf.build.templateparse import ScanError, parse

    try:
        return parse(source)
    except ScanError as exc:
        return exc


@functools.lru_cache(maxsize=64)
def prove(templates: tuple[tuple[str, str], ...], *, values_plain: bool = False) -> Proof:
    """Whether the chart whose templates are `templates` ((path, source) of every template the
    engine evaluates) renders the same bytes for the same inputs every time. `values_plain`:
    no string of the values the chart is rendered with holds `{{` (then a `tpl` of a value
    returns it unchanged); the verdict then holds for those values only."""
    # imported here: a render whose charts are all served from the cache proves nothing
    from eksinf.build.templateflow import first_doubt
    from eksinf.build.templateparse import Parsed, ScanError

    if sum(len(source) for _, source in templates) > MAX_TEMPLATE_BYTES:
        return Proof(False, f"templates past the scan's bound ({MAX_TEMPLATE_BYTES} bytes)")
    files: list[tuple[str, Parsed]] = []
    unread: list[tuple[int, int, int, str]] = []
    for file, (path, source) in enumerate(templates):
        parsed = _parsed(source)
        if isinstance(parsed, ScanError):
            unread.append((file, parsed.at, 0, parsed.why))
            parsed = Parsed((), ())  # its doubt decides; what it holds is not followed
        files.append((path, parsed))
    doubt, plain_tpl = first_doubt(files, values_plain)
    found = min((*unread, *filter(None, [doubt])), default=None)
    if found is not None:
        file, offset, _, why = found
        path, source = templates[file]
        line = source.count("\n", 0, offset) + 1
        return Proof(False, f"{path}:{line}: {why}")
    if plain_tpl:
        return Proof(True, f"{len(templates)} templates call pure functions only; tpl is given "
                     "values that hold no template action", for_values=True)  # fmt: skip
    return Proof(True, f"{len(templates)} templates call pure functions only")
