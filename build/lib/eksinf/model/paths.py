"""The path grammar links and functions use to address a field inside a resource.

A path is dot-separated segments. A numeric segment indexes a list. A literal dot inside a key is
written `~1` and a literal tilde `~0` (as in ConfigHub), so `metadata.labels.karpenter~1sh/discovery`
addresses the key `karpenter.sh/discovery`. An unescaped dot would instead address a nested key
`karpenter` -> `sh/discovery`, which is the silent failure `eksinf lint` exists to catch.
"""

from __future__ import annotations

from typing import Any

from eksinf.errors import CONTRACT, EksinfError

Segment = str | int


class PathError(EksinfError):
    """A path that is malformed or does not exist in the document it is applied to."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message, hint, CONTRACT)


def escape(key: str) -> str:
    return key.replace("~", "~0").replace(".", "~1")


def unescape(segment: str) -> str:
    return segment.replace("~1", ".").replace("~0", "~")


def parse(path: str) -> list[Segment]:
    if not path or path.startswith(".") or path.endswith(".") or ".." in path:
        raise PathError(f"malformed path {path!r}: empty segment", "Separate keys with one dot.")
    out: list[Segment] = []
    for raw in path.split("."):
        out.append(int(raw) if raw.isdigit() else unescape(raw))
    return out


def format_path(segments: list[Segment]) -> str:
    return ".".join(str(s) if isinstance(s, int) else escape(s) for s in segments)


def _step(node: Any, seg: Segment, path: str, done: list[Segment]) -> Any:
    where = format_path(done) or "(root)"
    if isinstance(node, list):
        if not isinstance(seg, int):
            raise PathError(f"{path}: {where} is a list; segment {seg!r} must be an index")
        if seg >= len(node):
            raise PathError(f"{path}: {where} has {len(node)} items; index {seg} is out of range")
        return node[seg]
    if isinstance(node, dict):
        key: Any = seg if seg in node else str(seg)
        if key not in node:
            raise PathError(f"{path}: {where} has no key {seg!r}")
        return node[key]
    raise PathError(f"{path}: {where} is a {type(node).__name__}, not a map or list")


def get(doc: Any, path: str) -> Any:
    node = doc
    done: list[Segment] = []
    for seg in parse(path):
        node = _step(node, seg, path, done)
        done.append(seg)
    return node


def exists(doc: Any, path: str) -> bool:
    try:
        get(doc, path)
    except PathError:
        return False
    return True


def set_existing(doc: Any, path: str, value: Any) -> bool:
    """Write `value` at an existing path. Returns whether the value changed."""
    segments = parse(path)
    parent = doc
    for index, seg in enumerate(segments[:-1]):
        parent = _step(parent, seg, path, segments[:index])
    last = segments[-1]
    current = _step(parent, last, path, segments[:-1])
    if current == value:
        return False
    if isinstance(parent, list):
        parent[int(last)] = value
    else:
        parent[last if last in parent else str(last)] = value
    return True


def unescaped_dot_suspect(doc: Any, path: str) -> str | None:
    """If a missing path would exist with a dot escaped, return the escaped spelling.

    `spec.tags.karpenter.sh/discovery` fails to resolve; `spec.tags.karpenter~1sh/discovery`
    resolves: the author forgot to escape a dot inside a key.
    """
    raw = path.split(".")
    for i in range(len(raw) - 1):
        for j in range(i + 2, len(raw) + 1):
            candidate = ".".join(raw[:i] + ["~1".join(raw[i:j])] + raw[j:])
            if candidate != path and exists(doc, candidate):
                return candidate
    return None
