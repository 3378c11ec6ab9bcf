"""`eksinf components`' listing: its rows (the --json report) and its table."""

from __future__ import annotations

from typing import Any

from ..model.stack import Stack

COMPONENT_COLUMNS = ("component", "plane", "order", "render", "charts", "description")


def component_rows(stack: Stack, plane: str | None) -> list[dict[str, Any]]:
    """`eksinf components`' rows: the stack's components in apply order (of one plane)."""
    return [
        {
            "name": c.name,
            "plane": c.plane,
            "order": c.order,
            "render": c.render,
            "charts": [f"{s.chart} {s.version}" for s in c.charts],
            "description": c.description,
        }
        for c in stack.select(plane=plane)
    ]


def components_table(rows: list[dict[str, Any]]) -> tuple[list[dict[str, str]], tuple[str, ...]]:
    """The rows as the table's cells, and its columns."""
    cells = [
        {
            "component": r["name"],
            "plane": r["plane"],
            "order": str(r["order"]),
            "render": r["render"],
            "charts": ", ".join(r["charts"]) or "-",
            "description": r["description"],
        }
        for r in rows
    ]
    return cells, COMPONENT_COLUMNS
