"""`eksinf addon-schemas refresh`: record eks:DescribeAddonConfiguration for the version each
Addon unit pins, so lint checks configurationValues offline."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..aws import addons, contract
from ..core.atomic import write_file
from ..links import load_bindings
from ..model import addons as recorded
from .context import StackContext


@dataclass(frozen=True)
class RefreshOptions:
    record: Path | None = None  # default: the package's addon-schemas.json
    dry_run: bool = False


@dataclass(frozen=True)
class Refreshed:
    record: Path
    refresh: addons.Refresh
    written: bool

    @property
    def dirty(self) -> bool:
        return self.refresh.dirty

    def as_json(self) -> dict[str, Any]:
        return {**self.refresh.as_json(), "record": str(self.record), "written": self.written}


def refresh(ctx: StackContext, opts: RefreshOptions) -> Refreshed:
    stack = ctx.stack
    scope = ctx.scope
    path = opts.record or recorded.RECORD
    session = ctx.session
    needs = contract.stack_needs(stack.configs_dir, ctx.profile.spec, load_bindings(stack))
    result = addons.refresh(session, scope.region, needs.addons, recorded.load_records(path))
    written = result.dirty and not opts.dry_run
    if written:
        write_file(path, recorded.records_bytes(result.records))
    return Refreshed(path, result, written)
