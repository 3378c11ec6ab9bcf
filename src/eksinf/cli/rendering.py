"""What `eksinf render`, `verify` and `guard` do and print, without typer: the argument layer
(build.py) and the plain forms answered before it loads (quick.py) call these same functions,
so both print the same lines."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from eksinf.flows.build import (
    RenderResult,
    claim,
    commit_of,
    disable_cache,
    drift,
    duplicate_ids,
    guard,
    mirror_dir,
    render_stack,
    write_configs,
)

from ..errors import CONTRACT, FAILURE, EksinfError
from ..model.stack import Stack
from .output import echo, progress
from .runstate import emit_json

DIFF_LINES = 60  # verify prints this much of a drift's diff unless --full


def _quiet(_message: str) -> None:
    return None


def render_of(
    stack: Stack, mirror: Path | None, quiet: bool = False, components: list[str] | None = None
) -> RenderResult:
    """The stack rendered in memory (progress on stderr unless `quiet`)."""
    return render_stack(
        stack,
        mirror_dir(mirror, stack.root),
        progress=_quiet if quiet else progress,
        components=components or None,
    )


def report_guard(report: guard.GuardReport, *, quiet_allowed: bool = False) -> None:
    for f in report.findings:
        where = (
            f"{f.component}: {f.resource}"
            if f.file == f.resource
            else (f"{f.component}/{f.file}: {f.resource}")
        )
        if f.allowed:
            if not quiet_allowed:
                progress(f"allowed: {f.hazard} {where} (render/{f.component}/HAZARDS.allow)")
            continue
        detail = f" [{f.detail}]" if f.detail else ""
        progress(f"HAZARD {f.hazard}: {where}{detail}")
        progress(f"  {f.explanation}")
        progress(f"  fix: {f.fix}")
    for a in report.unused_allows:
        progress(
            f"warning: render/{a.component}/HAZARDS.allow: entry {a.hazard} {a.resource} matches nothing"
        )


def guard_failure(report: guard.GuardReport) -> EksinfError:
    names = sorted({f.component for f in report.blocking})
    return EksinfError(
        f"flattening guard: {len(report.blocking)} unhandled hazard(s) in {', '.join(names)}",
        hint="Fix each one, or allow it in render/<component>/HAZARDS.allow with "
        "`hazard`, `resource` and a `reason` (see docs/flattening.md).",
        exit_code=CONTRACT,
    )


def render(
    load: Callable[[], Stack],
    mirror: Path | None,
    out: Path | None,
    skip_guard: bool,
    json_out: bool,
) -> None:
    """`eksinf render`: `load` opens the stack (timed with the rest)."""
    started = time.perf_counter()
    stack = load()
    if out is None or out.resolve() == stack.configs_dir:
        stack.refuse_writes("render", "configs/ and aws-objects.lock")
    claim(out or stack.configs_dir, stack.root, allow_configs=True)  # refuse before any work
    result = render_of(stack, mirror, quiet=json_out)
    report = guard.check(result)
    report_guard(report)
    if not report.ok and not skip_guard:
        raise guard_failure(report)
    target = write_configs(result, out)
    units = sum(len(o.units) for o in result.outputs)
    if json_out:
        emit_json(
            {
                "written": str(target),
                "units": sorted(p for p in result.files() if p != "provenance.json"),
                "provenance": result.provenance,
                # document conservation per chart: emitted = written + shared (written once)
                "charts": [
                    {
                        "component": o.component.name,
                        "chart": r.spec.name,
                        "resources": r.resources,
                        "crds": r.crds,
                        "sharedCrds": r.shared_crds,
                    }
                    for o in result.outputs
                    for r in o.charts
                ],
                "sourceCommit": commit_of(result.stack.root),
                "hazards": [f.as_dict() for f in report.findings],
            }
        )
        return
    progress(
        f"rendered {units} units from {len(result.outputs)} components into {target} "
        f"in {time.perf_counter() - started:.2f}s"
    )


def verify(
    load: Callable[[], Stack],
    mirror: Path | None,
    full: bool,
    components: list[str] | None,
    json_out: bool,
) -> None:
    """`eksinf verify`: `load` opens the stack (timed with the rest)."""
    started = time.perf_counter()
    if full:
        disable_cache()
    result = render_of(load(), mirror, quiet=True, components=components)
    report = guard.check(result)
    changes = drift(result)
    dupes = duplicate_ids(result)
    if json_out:
        emit_json(
            {
                **changes.as_dict(),
                "guard": {"ok": report.ok},
                "duplicateIds": [d.message for d in dupes],
            }
        )
    elif not changes.clean:
        lines = changes.diff if full else changes.diff[:DIFF_LINES]
        echo("".join(lines), nl=False)
        if len(changes.diff) > len(lines):
            echo(f"... {len(changes.diff) - len(lines)} more diff lines (use --full)")
    if not report.ok:
        report_guard(report, quiet_allowed=True)
        raise guard_failure(report)
    if dupes:
        for d in dupes:
            progress(f"duplicate resource id: {d.message}")
        raise EksinfError(
            f"{len(dupes)} resource id(s) appear more than once in a plane: {dupes[0].message}",
            hint="Each object must live in one unit: remove the copy, or rename one of them.",
            exit_code=CONTRACT,
        )
    if not changes.clean:
        raise EksinfError(
            f"configs/ is out of sync with its sources: {len(changes.changed)} changed, "
            f"{len(changes.added)} missing, {len(changes.removed)} stale",
            hint="Run `eksinf render` and commit the result.",
            exit_code=FAILURE,
        )
    if not json_out:
        progress(
            f"configs/ is in sync with its sources ({changes.checked} files, "
            f"{time.perf_counter() - started:.2f}s)"
        )
