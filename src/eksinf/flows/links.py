"""The link commands' flows: `links list`, `links resolve` and `lint`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.outdir import claim, write_tree
from ..core.roundtrip import edit_text
from ..links import Binding, apply_bindings, load_bindings, resolve_units, unresolved
from ..model.configs import read_configs, units_by_key
from ..model.stack import Stack

__all__ = ["Binding", "Resolved", "lint_stack", "lint_table", "load_bindings", "resolve"]


@dataclass(frozen=True)
class Resolved:
    out: Path
    units: list[str]  # <key>.yaml, sorted
    bindings: int
    unresolved: list[str]

    def as_json(self) -> dict[str, Any]:
        return {
            "written": str(self.out),
            "units": self.units,
            "bindings": self.bindings,
            "unresolved": self.unresolved,
        }


def resolve(stack: Stack, profile: Path, out: Path) -> Resolved:
    """Write the committed units with `profile`'s values resolved in under `out` (replaced
    atomically; never the stack, its sources or configs/). Nothing under configs/ changes."""
    from ..model.profile import load_profile  # jsonschema: loaded only by the commands that check

    owned = claim(out, stack.root)  # before any work
    spec = load_profile(stack, profile).spec
    bindings = load_bindings(stack)
    committed = read_configs(stack.configs_dir)
    resolved = resolve_units(units_by_key(committed), spec, bindings)
    # each unit as committed, its bound values written in and nothing else re-written (its
    # comments, quoting and key order kept): the bytes the hub's resolve gives
    texts = {}
    for unit in committed:
        mine = [b for b in bindings if b.unit_key == unit.key]

        def bind(docs: list[Any], mine: list[Binding] = mine) -> bool:
            return bool(apply_bindings(docs, spec, mine))

        edited = edit_text(unit.text, bind, f"configs/{unit.key}.yaml")
        texts[f"{unit.key}.yaml"] = unit.text if edited is None else edited
    write_tree(owned, texts)
    return Resolved(out, sorted(f"{k}.yaml" for k in resolved), len(bindings), unresolved(resolved))


def lint_table() -> list[dict[str, str]]:
    """The table of lint checks."""
    from .. import lint

    return list(lint.table())


def lint_stack(stack: Stack) -> Any:
    """Lint the committed configs/ (a report with `.findings` and `.as_dict()`)."""
    from .. import lint

    return lint.lint_stack(stack)
