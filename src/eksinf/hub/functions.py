"""Hub functions: pure edits of a unit's documents.

Each mutating function takes the parsed documents of one unit and the string arguments the CLI
or a link setter passed, edits the documents in place and returns whether anything changed.
A function that matches no resource changes nothing (so the unit gets no new revision).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eksinf.core.types import Doc, Docs
from eksinf.model import paths

from ..errors import USAGE, EksinfError
from ..model.resources import WORKLOAD_KINDS, containers, resource_type

SCALABLE_KINDS = ("Deployment", "ReplicaSet", "StatefulSet")


def _containers(doc: Doc, name: str) -> Docs:
    if doc.get("kind") not in WORKLOAD_KINDS:
        return []
    return [container for _, _, container in containers(doc, name)]


# ---- mutating functions ---------------------------------------------------------------------


def _want(args: list[str], count: int, usage: str, *, at_least: bool = False) -> None:
    if len(args) < count or (not at_least and len(args) != count):
        raise EksinfError(f"wrong arguments {args!r}: expected {usage}", exit_code=USAGE)


def set_replicas(docs: Docs, args: list[str]) -> bool:
    _want(args, 1, "REPLICAS")
    if not args[0].isdigit():
        raise EksinfError(f"set-replicas: {args[0]!r} is not an integer >= 0", exit_code=USAGE)
    replicas = int(args[0])
    changed = False
    for doc in docs:
        if doc.get("kind") in SCALABLE_KINDS and str(doc.get("apiVersion")) == "apps/v1":
            spec = doc.setdefault("spec", {})
            if spec.get("replicas") != replicas:
                spec["replicas"] = replicas
                changed = True
    return changed


def _upsert_env(container: Doc, name: str, value: str, *, create: bool) -> bool:
    env = container.setdefault("env", []) if create else container.get("env") or []
    for entry in env:
        if entry.get("name") == name:
            if entry.get("value") == value and "valueFrom" not in entry:
                return False
            entry.pop("valueFrom", None)
            entry["value"] = value
            return True
    if not create:
        return False
    env.append({"name": name, "value": value})
    return True


def set_env_var(docs: Docs, args: list[str]) -> bool:
    """Change an EXISTING env var by name in the named container ('*' = any container)."""
    _want(args, 3, "CONTAINER NAME VALUE")
    container_name, name, value = args
    changed = False
    for doc in docs:
        for container in _containers(doc, container_name):
            changed |= _upsert_env(container, name, value, create=False)
    return changed


def set_env(docs: Docs, args: list[str]) -> bool:
    """Upsert env vars `KEY=VALUE` in the named container; an empty value removes the var."""
    _want(args, 2, "CONTAINER KEY=VALUE...", at_least=True)
    container_name, pairs = args[0], args[1:]
    changed = False
    for pair in pairs:
        if "=" not in pair:
            raise EksinfError(f"set-env: {pair!r} is not KEY=VALUE", exit_code=USAGE)
    for doc in docs:
        for container in _containers(doc, container_name):
            for pair in pairs:
                key, value = pair.split("=", 1)
                if value:
                    changed |= _upsert_env(container, key, value, create=True)
                else:
                    before = container.get("env") or []
                    after = [e for e in before if e.get("name") != key]
                    if len(after) != len(before):
                        container["env"] = after
                        changed = True
    return changed


def set_annotation(docs: Docs, args: list[str]) -> bool:
    _want(args, 2, "KEY VALUE")
    key, value = args
    changed = False
    for doc in docs:
        meta = doc.setdefault("metadata", {})
        annotations = meta.get("annotations") or {}
        if annotations.get(key) != value:
            annotations[key] = value
            meta["annotations"] = annotations
            changed = True
    return changed


def set_path(doc: Any, path: str, value: Any) -> bool:
    """Write `value` at `path`, creating missing map keys on the way (ConfigHub's rule for
    set-*-path and link writes). List indices must exist. Returns whether the value changed."""
    segments = paths.parse(path)
    node = doc
    for index, seg in enumerate(segments[:-1]):
        if isinstance(node, dict) and seg not in node and str(seg) not in node:
            node[str(seg)] = {}
        node = paths.get(node, paths.format_path([seg]))
        if node is None:
            raise paths.PathError(f"{path}: {paths.format_path(segments[: index + 1])} is null")
    last = segments[-1]
    if isinstance(node, dict) and last not in node and str(last) not in node:
        node[str(last)] = value
        return True
    return paths.set_existing(node, paths.format_path([last]), value)


def set_bool_path(docs: Docs, args: list[str]) -> bool:
    _want(args, 3, "RESOURCE-TYPE PATH true|false")
    rtype, path, raw = args
    if raw not in ("true", "false"):
        raise EksinfError(f"set-bool-path: {raw!r} is not true or false", exit_code=USAGE)
    changed = False
    for doc in docs:
        if resource_type(doc) == rtype:
            changed |= set_path(doc, path, raw == "true")
    return changed


def set_string_path(docs: Docs, args: list[str]) -> bool:
    """ConfigHub's set-string-path: a string at a path of every resource of one type
    (teardown zeroes NodePool limits with it)."""
    _want(args, 3, "RESOURCE-TYPE PATH VALUE")
    rtype, path, value = args
    changed = False
    for doc in docs:
        if resource_type(doc) == rtype:
            changed |= set_path(doc, path, value)
    return changed


def set_image(docs: Docs, args: list[str]) -> bool:
    _want(args, 2, "CONTAINER IMAGE")
    container_name, image = args
    changed = False
    for doc in docs:
        for container in _containers(doc, container_name):
            if container.get("image") != image:
                container["image"] = image
                changed = True
    return changed


MUTATING: dict[str, Callable[[Docs, list[str]], bool]] = {
    "set-replicas": set_replicas,
    "set-env": set_env,
    "set-env-var": set_env_var,
    "set-annotation": set_annotation,
    "set-bool-path": set_bool_path,
    "set-string-path": set_string_path,
    "set-image": set_image,
}


def function_for(name: str) -> Callable[[Docs, list[str]], bool]:
    try:
        return MUTATING[name]
    except KeyError:
        raise EksinfError(
            f"unknown function {name!r}",
            f"Known functions: {', '.join(sorted(MUTATING))}.",
            USAGE,
        ) from None
