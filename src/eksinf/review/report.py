"""How a review (assemble.py) is printed: text, Markdown for a pull request, JSON.

Everything here is pure; `eksinf diff` (cli/review.py) gathers the snapshots.
"""

from __future__ import annotations

import json
from typing import Any

from ..model.checks import Finding
from .assemble import (
    OPS,
    ComponentReview,
    Entry,
    PoolChange,
    Prices,
    Review,
    gpu_totals,
    is_nodegroup,
    is_pool,
    profile_region,
    review,
    snapshot_source,
)
from .changes import CRD_KIND
from .cost import PoolCost
from .risks import CLASSES, risk_dict, severity
from .snapshot import INPUT_API
from .structural import FieldChange, crd_outline

__all__ = [
    "MARKDOWN_LIMIT",
    "MARKER",
    "Prices",
    "Review",
    "gpu_totals",
    "is_nodegroup",
    "is_pool",
    "profile_region",
    "review",
    "snapshot_source",
    "to_json",
    "to_markdown",
    "to_text",
]

MARKER = "<!-- eksinf-diff -->"  # the workflow finds its own sticky comment by this line
MARKDOWN_LIMIT = 65_000  # GitHub refuses comment bodies over 65,536 characters


def _value(value: Any, limit: int = 100) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else json.dumps(value)
    return text if len(text) <= limit else text[: limit - 4] + '..."'


def describe_field(f: FieldChange) -> list[str]:
    """Diff lines, `-` for what goes and `+` for what comes, so GitHub and terminals colour
    them. A list of plain values shows only the items removed and added."""
    if f.op == "added":
        return [f"+ {f.path}: {_value(f.new)}"]
    if f.op == "removed":
        return [f"- {f.path}: {_value(f.old)}"]
    if isinstance(f.old, list) and isinstance(f.new, list):
        gone = [v for v in f.old if v not in f.new]
        new = [v for v in f.new if v not in f.old]
        if gone or new:
            return ([f"- {f.path}: {_value(gone)} (items removed)"] if gone else []) + (
                [f"+ {f.path}: {_value(new)} (items added)"] if new else []
            )
    return [f"- {f.path}: {_value(f.old)}", f"+ {f.path}: {_value(f.new)}"]


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def cost_cells(cost: PoolCost | None, hours: int) -> tuple[str, str]:
    """(hourly, monthly) as printed: `-` for no pool, `unbounded`, `unknown (no price: TYPES;
    >= $x)` naming the types without a price, `unknown (REASON)`, or `$x`. Never a zero for an
    unknown."""
    if cost is None:
        return "-", "-"
    if cost.hourly is not None:
        return _money(cost.hourly), _money(cost.hourly * hours)
    if cost.reason.startswith("no limits"):
        return "unbounded", "unbounded"
    if cost.unpriced:
        floor = cost.at_least or 0.0
        names = ", ".join(cost.unpriced)
        if not floor:
            return f"unknown (no price: {names})", "unknown"
        return (
            f"unknown (no price: {names}; >= {_money(floor)})",
            f"unknown (>= {_money(floor * hours)})",
        )
    why = cost.reason.removeprefix("unknown: ")
    return f"unknown ({why})", "unknown"


def _signed(value: float) -> str:
    return f"{'+' if value >= 0 else '-'}{_money(abs(value))}"


def delta_line(rev: Review) -> str:
    delta, why = rev.monthly_delta()
    if delta is None:
        return f"monthly maximum delta: unknown (no price or no bound: {', '.join(why)})"
    return f"monthly maximum delta: {_signed(delta)}"


def gpu_lines(rev: Review) -> list[str]:
    """The GPU totals as plain lines (text and Markdown print the same)."""
    g = rev.gpus

    def n(value: int | None) -> str:
        return "unbounded" if value is None else str(value)

    lines = [
        f"GPUs requested by workloads: {g.requested('before')} -> {g.requested('after')}",
        f"GPU NodePools' maximum: {n(g.pool_maximum('before'))} -> {n(g.pool_maximum('after'))}",
    ]
    lines += [
        f"  {c.label}: {c.before if c.before is not None else '-'} -> "
        f"{c.after if c.after is not None else '-'}"
        for c in g.workloads
        if c.before != c.after
    ]
    lines += [f"  NodePool {c.label}: {n(c.before)} -> {n(c.after)}" for c in g.pools]
    return lines


# ---- JSON ------------------------------------------------------------------------------------


def _resource_json(e: Entry) -> dict[str, Any]:
    r = e.change.resource
    out: dict[str, Any] = {
        "id": r.label,
        "apiVersion": r.api_version,
        "kind": r.kind,
        "namespace": r.namespace,
        "name": r.name,
        "file": r.unit,
        "input": r.api_version == INPUT_API,
        "change": e.change.op,
        "fields": [f.as_dict() for f in e.change.fields],
        "risks": [risk_dict(x) for x in e.risks],
    }
    if e.change.crd is not None:
        out["crd"] = e.change.crd.as_dict()
    elif r.kind == CRD_KIND:
        out["crd"] = {"versions": crd_outline(r.doc)}
    return out


def _finding_json(f: Finding) -> dict[str, Any]:
    return {
        **risk_dict(f),
        "marker": CLASSES[f.name].marker,
        "severity": severity(f.name),
        "component": f.places[0],
        "resource": f.places[1],
    }


def _count(value: int | None) -> int | str:
    return "unbounded" if value is None else value


def to_json(rev: Review) -> dict[str, Any]:
    prices = rev.price_table
    delta, unknown = rev.monthly_delta()
    return {
        "base": rev.base,
        "head": rev.head,
        "notes": list(rev.notes),
        "changed": not rev.empty,
        "summary": {**rev.counts(), "risks": rev.risk_counts()},
        "classes": [
            {"id": c.name, "title": c.title, "marker": c.marker, "severity": i}
            for i, c in enumerate(CLASSES.values())
        ],
        "findings": [_finding_json(f) for f in rev.findings],
        "gpus": {
            "requested": {
                "before": rev.gpus.requested("before"),
                "after": rev.gpus.requested("after"),
            },
            "nodePoolMaximum": {
                "before": _count(rev.gpus.pool_maximum("before")),
                "after": _count(rev.gpus.pool_maximum("after")),
            },
            "workloads": [
                {"resource": c.label, "before": c.before, "after": c.after}
                for c in rev.gpus.workloads
            ],
            "nodePools": [
                {"nodePool": c.label, "before": _count(c.before), "after": _count(c.after)}
                for c in rev.gpus.pools
            ],
        },
        "components": [
            {
                "component": c.name,
                "plane": c.plane,
                "resources": [_resource_json(e) for e in c.entries],
            }
            for c in rev.components
        ],
        "cost": {
            "region": rev.region,
            "priceSource": rev.price_source,
            "pricesAsOf": prices.as_of,
            "hoursPerMonth": prices.hours_per_month,
            "monthlyMaximumDelta": None if delta is None else round(delta, 2),
            "deltaUnknownBecause": list(unknown),
            "nodePools": [
                {
                    "component": p.component,
                    "nodePool": p.pool,
                    "before": p.before.as_dict(prices.hours_per_month) if p.before else None,
                    "after": p.after.as_dict(prices.hours_per_month) if p.after else None,
                }
                for p in rev.costs
            ],
        },
    }


# ---- text ------------------------------------------------------------------------------------

SAME_CHANGE = 3  # this many risk-free resources with identical field changes print as one block


def blocks(comp: ComponentReview) -> list[list[Entry]]:
    """The entries to print, in order; risk-free resources whose field changes are identical
    (a chart bump relabelling every object it renders) share one block."""
    shared: dict[str, list[Entry]] = {}
    out: list[list[Entry]] = []
    for e in comp.entries:
        c = e.change
        if c.op == "changed" and not e.risks and c.crd is None and c.fields:
            key = json.dumps([f.as_dict() for f in c.fields], sort_keys=True, default=str)
            if key in shared:
                shared[key].append(e)
                continue
            shared[key] = [e]
            out.append(shared[key])
        else:
            out.append([e])
    return [
        part
        for block in out
        for part in ([block] if len(block) >= SAME_CHANGE else [[e] for e in block])
    ]


TEXT_FIELDS = 40  # per resource; the JSON has every field


def _summary_line(rev: Review) -> str:
    counts = rev.counts()
    return (
        f"{counts['added']} added, {counts['removed']} removed, {counts['changed']} changed "
        f"in {len(rev.components)} component(s)"
    )


def _cost_lines(rev: Review) -> list[str]:
    hours = rev.price_table.hours_per_month
    lines = []
    for p in rev.costs:
        before, after = cost_cells(p.before, hours), cost_cells(p.after, hours)
        lines.append(
            f"  {_pool_label(p)}: max {before[0]}/h ({before[1]}/month) -> "
            f"{after[0]}/h ({after[1]}/month)"
        )
        for side, cost in (("before", p.before), ("after", p.after)):
            if cost is not None:
                lines.append(f"    {side}: {cost.reason}")
    lines.append(f"  {delta_line(rev)}")
    return lines


def _pool_label(p: PoolChange) -> str:
    return p.pool if p.pool.startswith("nodegroup/") else f"NodePool {p.pool}"


def cost_heading(rev: Review) -> str:
    return (
        f"Maximum cost of the NodePools and node groups changed (on-demand, {rev.region or 'region unknown'}; prices: "
        f"{rev.price_source})"
    )


def _finding_text(f: Finding, indent: str) -> list[str]:
    marker = CLASSES[f.name].marker
    at = f" {f.element}" if f.element else ""
    lines = [f"{indent}{marker} {f.name}: {f.places[1]}{at}", f"{indent}    {f.detail}"]
    lines += [f"{indent}    {k}: {v}" for k, v in f.context]
    return lines


def _should_show_gpus(rev: Review) -> bool:
    return rev.gpus.changed or bool(rev.costs)


def to_text(rev: Review, color: bool = False) -> str:
    if rev.empty:
        return f"no changes ({rev.base} -> {rev.head})\n" + "".join(
            f"note: {n}\n" for n in rev.notes
        )
    lines = [f"eksinf diff: {rev.base} -> {rev.head}"]
    lines += [f"note: {n}" for n in rev.notes]
    lines.append(_summary_line(rev))
    risks = rev.risk_counts()
    lines.append(
        "risks: "
        + (", ".join(f"{CLASSES[k].marker} {k} {v}" for k, v in risks.items()) if risks else "none")
    )
    if rev.findings:
        lines += ["", "findings, most severe first:"]
        for found in rev.findings:
            lines += _finding_text(found, "  ")
    if _should_show_gpus(rev):
        lines += ["", *gpu_lines(rev)]
    if rev.costs:
        lines += ["", cost_heading(rev) + ":", *_cost_lines(rev)]
    for comp in rev.components:
        lines.append("")
        lines.append(f"== {comp.plane} / {comp.name}")
        for block in blocks(comp):
            e = block[0]
            r = e.change.resource
            if len(block) > 1:
                lines.append(f"  changed  {len(block)} resources, each with the same change:")
                lines += [
                    f"           {x.change.resource.label}  ({x.change.resource.unit})"
                    for x in block
                ]
            else:
                lines.append(f"  {e.change.op:<8} {r.label}  ({r.unit})")
            for x in e.risks:
                at = f" {x.element}" if x.element else ""
                lines.append(f"    {CLASSES[x.name].marker} {x.name}{at}: {x.detail}")
            lines += _crd_lines(e, "    ")
            for f in e.change.fields[:TEXT_FIELDS]:
                lines += [f"    {line}" for line in describe_field(f)]
            if len(e.change.fields) > TEXT_FIELDS:
                lines.append(f"    ... {len(e.change.fields) - TEXT_FIELDS} more (--format json)")
    text = "\n".join(lines) + "\n"
    return paint(text) if color else text


# ANSI SGR codes: red, green, bold, yellow, reset
_RED, _GREEN, _BOLD, _YELLOW, _RESET = "\033[31m", "\033[32m", "\033[1m", "\033[33m", "\033[0m"
SEVERE = 2  # the first classes (AWS deletions, IAM widening) are printed in red, the rest yellow


def paint(text: str) -> str:
    """ANSI colour for a terminal: `-` lines red, `+` lines green, findings by severity,
    component headings bold. Applied after the text is built, so the facts cannot differ."""
    markers = {c.marker: i for i, c in enumerate(CLASSES.values())}
    out = []
    for line in text.splitlines():
        bare = line.lstrip()
        colour = ""
        if bare.startswith("- "):
            colour = _RED
        elif bare.startswith("+ "):
            colour = _GREEN
        elif line.startswith("== "):
            colour = _BOLD
        else:
            first = bare.split(" ", 1)[0]
            if first in markers:
                colour = _RED + _BOLD if markers[first] < SEVERE else _YELLOW
        out.append(f"{colour}{line}{_RESET}" if colour and line else line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def _crd_lines(e: Entry, indent: str) -> list[str]:
    s = e.change.crd
    if s is None:
        if e.change.resource.kind == CRD_KIND and e.change.op != "changed":
            return [f"{indent}{line}" for line in crd_outline(e.change.resource.doc)]
        return []
    out = []
    if s.versions_added or s.versions_removed:
        out.append(
            f"versions: added {', '.join(s.versions_added) or '-'}; removed "
            f"{', '.join(s.versions_removed) or '-'}"
        )
    out += [f"served: {line}" for line in s.served]
    if s.storage_changed:
        out.append(f"storage: {', '.join(s.storage_before)} -> {', '.join(s.storage_after)}")
    if s.fields_added or s.fields_removed or s.fields_changed:
        out.append(
            f"schema: {len(s.fields_added)} field(s) added, {len(s.fields_removed)} removed, "
            f"{s.fields_changed} changed"
        )
        for name in s.fields_added[:10]:
            out.append(f"  + {name}")
        for name in s.fields_removed[:10]:
            out.append(f"  - {name}")
    return [f"{indent}{line}" for line in out]


# ---- Markdown --------------------------------------------------------------------------------

MD_FIELDS = 25


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _md_component(comp: ComponentReview) -> tuple[str, list[tuple[str, int]]]:
    """A component's collapsible section: its opening lines, then each block with the number of
    resources it shows (so a section can be cut between blocks)."""
    ops = {op: sum(1 for e in comp.entries if e.change.op == op) for op in OPS}
    counts = ", ".join(f"{n} {op}" for op, n in ops.items() if n)
    flags = f" · {', '.join(comp.classes)}" if comp.classes else ""
    opening = (
        f"<details>\n<summary><b>{comp.name}</b> ({comp.plane}): {counts}{flags}</summary>\n\n"
    )
    parts = []
    for block in blocks(comp):
        e = block[0]
        r = e.change.resource
        if len(block) > 1:
            names = ", ".join(f"`{x.change.resource.label}`" for x in block)
            lines = [f"**changed** {len(block)} resources, each with the same change: {names}"]
        else:
            lines = [f"**{e.change.op}** `{r.label}` in `{r.unit}`"]
        lines.append("")
        for x in e.risks:
            at = f" `{x.element}`" if x.element else ""
            lines.append(f"- {CLASSES[x.name].marker} **{x.name}**{at}: {_md_escape(x.detail)}")
        body = _crd_lines(e, "")
        body += [line for f in e.change.fields[:MD_FIELDS] for line in describe_field(f)]
        if len(e.change.fields) > MD_FIELDS:
            body.append(
                f"... {len(e.change.fields) - MD_FIELDS} more field changes in the JSON report"
            )
        if body:
            lines += ["", "```diff", *body, "```"]
        lines.append("")
        parts.append(("\n".join(lines) + "\n", len(block)))
    return opening, parts


_MD_CLOSE = "</details>\n"


MD_FINDINGS = 60  # findings listed per part of the comment (open, collapsed); the JSON has all


def _md_code(text: str) -> str:
    return f"`{text.replace('`', chr(39))}`"


def _md_finding(f: Finding) -> list[str]:
    at = f" {_md_code(f.element)}" if f.element else ""
    lines = [
        f"- {CLASSES[f.name].marker} **{f.name}** {_md_code(f.places[1])}{at}: "
        f"{_md_escape(f.detail)}"
    ]
    lines += [f"  - {k}: {_md_code(v)}" for k, v in f.context]
    return lines


def _md_findings(rev: Review) -> list[str]:
    """The most severe class's findings in full, the rest collapsed."""
    found = rev.findings
    if not found:
        return []
    top = found[0].name
    first = [f for f in found if f.name == top]
    rest = found[len(first) :]
    cls = CLASSES[top]
    out = [f"#### {cls.marker} Highest risk: `{cls.name}` · {cls.title}", ""]
    out += [line for f in first[:MD_FINDINGS] for line in _md_finding(f)]
    if len(first) > MD_FINDINGS:
        out.append(f"- ... {len(first) - MD_FINDINGS} more `{top}` in the JSON report")
    out.append("")
    if rest:
        classes = ", ".join(
            f"{CLASSES[c].marker} {c} {sum(1 for f in rest if f.name == c)}"
            for c in dict.fromkeys(f.name for f in rest)
        )
        out += [
            "<details>",
            f"<summary>{len(rest)} more finding(s), most severe first: {classes}</summary>",
            "",
        ]
        out += [line for f in rest[:MD_FINDINGS] for line in _md_finding(f)]
        if len(rest) > MD_FINDINGS:
            out.append(f"- ... {len(rest) - MD_FINDINGS} more in the JSON report")
        out += ["", "</details>", ""]
    return out


def to_markdown(rev: Review, details: str | None = None, limit: int = MARKDOWN_LIMIT) -> str:
    """The pull-request comment: what a reviewer must read first, open (summary, the highest
    risk's findings, GPU totals, cost), then everything else collapsed (the other findings, one
    section per component with its field changes as coloured `diff` blocks).

    Always under `limit` characters: what does not fit is cut between resources, counted, and
    pointed to the full JSON report (`details`, a URL, when the workflow has one).
    """
    pointer = details or "`eksinf diff --format json`"
    head = [MARKER, f"### eksinf diff: `{rev.base}` → `{rev.head}`", ""]
    head += [f"> {n}" for n in rev.notes]
    if rev.empty:
        return "\n".join([*head, "", "no changes", ""])
    head += [_summary_line(rev), ""]
    risks = rev.risk_counts()
    head += ["| | risk | resources | what |", "|---|---|---:|---|"]
    for cls in CLASSES.values():
        if cls.name in risks:
            head.append(f"| {cls.marker} | `{cls.name}` | {risks[cls.name]} | {cls.title} |")
    if not risks:
        head.append("| | none | 0 | no risk class matched |")
    head.append("")
    head += _md_findings(rev)
    if _should_show_gpus(rev):
        g = gpu_lines(rev)
        head += [f"**{g[0]}** · **{g[1]}**", ""]
        if g[2:]:
            head += ["```diff", *(_gpu_diff(line.strip()) for line in g[2:]), "```", ""]
    if rev.costs:
        hours = rev.price_table.hours_per_month
        head += [
            f"**{cost_heading(rev)}:**",
            "",
            "| pool | before $/h | after $/h | before $/month | after $/month |",
            "|---|---:|---:|---:|---:|",
        ]
        for p in rev.costs:
            b, a = cost_cells(p.before, hours), cost_cells(p.after, hours)
            head.append(
                f"| `{p.component}/{p.pool}` | {_md_escape(b[0])} | {_md_escape(a[0])} | "
                f"{_md_escape(b[1])} | {_md_escape(a[1])} |"
            )
        head += ["", f"**{delta_line(rev)}**", ""]
    text = "\n".join(head) + "\n"
    left = len(rev.entries)
    tail = len(_md_truncated(left, pointer))  # the longest the pointer can be
    for comp in rev.components:
        opening, parts = _md_component(comp)
        section = opening
        shown = 0
        for block, count in parts:
            if len(text) + len(section) + len(block) + len(_MD_CLOSE) + tail > limit:
                break
            section += block
            shown += count
        if shown:
            text += section + _MD_CLOSE
            left -= shown
        if shown < sum(count for _, count in parts):
            break
    if left:
        text += _md_truncated(left, pointer)
    return text


def _md_truncated(count: int, pointer: str) -> str:
    return (
        f"\n**Truncated:** {count} more resource change(s) do not fit in one comment; "
        f"the full report is {pointer}.\n"
    )


def _gpu_diff(line: str) -> str:
    """`label: 2 -> 4` as a diff line: `+` when it grows, `-` when it shrinks, ` ` otherwise."""
    label, _, change = line.rpartition(": ")
    old, _, new = change.partition(" -> ")

    def value(text: str) -> float:
        return float("inf") if text == "unbounded" else 0.0 if text == "-" else float(text)

    try:
        mark = "+" if value(new) > value(old) else "-" if value(new) < value(old) else " "
    except ValueError:
        mark = " "
    return f"{mark} {label}: {change}"
