"""The one key style of eksinf's JSON output: camelCase, as Kubernetes writes JSON
(tests/test_json_shapes.py checks every read command's output)."""

from __future__ import annotations

from typing import Any


def camel(name: str) -> str:
    """`dry_run` -> `dryRun`: a Python field name as a JSON key."""
    first, *rest = name.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


def camel_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """A report's fields (its `__dict__`) under camelCase keys; values are left as they are."""
    return {camel(key): value for key, value in fields.items()}
