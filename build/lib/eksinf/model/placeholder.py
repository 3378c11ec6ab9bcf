"""What "unresolved" means: the one placeholder scan lint, links, the hub's gate and publish share.

The rule is ConfigHub's (confighub/sdk, yamlkit placeholder.go: PlaceHolderBlockApplyString and
PlaceHolderBlockApplyInt, IsPlaceholderValue): a string value containing `confighubplaceholder`
(named placeholders like `confighubplaceholder-http` included), or an integer equal to
+/-999999999. Keys are never scanned, and a look-alike such as `replaceme` is a plain value.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from eksinf.model import paths

PLACEHOLDER = "confighubplaceholder"
INT_PLACEHOLDER = 999999999


def is_placeholder(value: Any) -> bool:
    if isinstance(value, str):
        return PLACEHOLDER in value
    if isinstance(value, int) and not isinstance(value, bool):
        return value in (INT_PLACEHOLDER, -INT_PLACEHOLDER)
    return False


def scan(node: Any, prefix: tuple[str | int, ...] = ()) -> Iterator[str]:
    """Paths (paths.py grammar) of every placeholder value under `node`, in document order."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from scan(value, (*prefix, str(key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from scan(value, (*prefix, index))
    elif is_placeholder(node):
        yield paths.format_path(list(prefix))


def text_may_hold(text: str) -> bool:
    """Cheap pre-check on raw text: only text that passes it needs parsing and scanning."""
    return PLACEHOLDER in text or str(INT_PLACEHOLDER) in text
