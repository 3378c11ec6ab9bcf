"""Resolving a TransformPaths link: read named values from the upstream unit, write them into
the downstream unit at paths or through setter functions.

The link body has ConfigHub's JSON shape (UpstreamPaths, DownstreamPaths, DownstreamSetters), so
the same body is stored by LocalHub and sent to `cub link create --from-stdin` by CubHub.
"""

from __future__ import annotations

import re
from typing import Any

from .. import paths
from ..errors import CONTRACT, EksinfError
from ..model.resources import resource_name, resource_type
from . import functions

_PARAM = re.compile(r"\{\{\s*\.Params\.([A-Za-z0-9_]+)\s*\}\}")
_WHERE_RESOURCE = re.compile(r"ConfigHub\.(ResourceType|ResourceName)\s*=\s*'([^']*)'")


def _find(docs: list[dict], resource: dict[str, str], what: str) -> dict:
    rtype, rname = resource.get("ResourceType", ""), resource.get("ResourceName", "")
    for doc in docs:
        if resource_type(doc) == rtype and resource_name(doc) == rname:
            return doc
    raise EksinfError(
        f"{what}: no resource {rtype} {rname}",
        "The unit no longer holds the resource this binding names: fix the binding file "
        "or the unit, then resolve again.",
        CONTRACT,
    )


def render_template(expression: str, params: dict[str, Any], what: str) -> str:
    def value(match: re.Match) -> str:
        name = match.group(1)
        if name not in params:
            raise EksinfError(
                f"{what}: expression uses unknown parameter {name!r}", exit_code=CONTRACT
            )
        return str(params[name])

    return _PARAM.sub(value, expression)


def _typed(expression: str, params: dict[str, Any], data_type: str, what: str) -> Any:
    whole = _PARAM.fullmatch(expression.strip())
    if whole and data_type not in ("", "string"):
        return params[whole.group(1)]
    text = render_template(expression, params, what)
    if data_type == "int":
        return int(text)
    if data_type == "bool":
        return text == "true"
    return text


def upstream_params(docs: list[dict], body: dict[str, Any], what: str) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for entry in body.get("UpstreamPaths") or []:
        doc = _find(docs, entry.get("Resource") or {}, f"{what} upstream {entry.get('Name')}")
        try:
            params[entry["Name"]] = paths.get(doc, entry["Path"])
        except paths.PathError as exc:
            raise EksinfError(
                f"{what}: upstream value {entry['Name']}: {exc}", exit_code=CONTRACT
            ) from exc
    return params


def _where_resource(docs: list[dict], clause: str) -> list[dict]:
    wanted = dict(_WHERE_RESOURCE.findall(clause or ""))
    return [
        d
        for d in docs
        if ("ResourceType" not in wanted or resource_type(d) == wanted["ResourceType"])
        and ("ResourceName" not in wanted or resource_name(d) == wanted["ResourceName"])
    ]


def apply(docs: list[dict], body: dict[str, Any], params: dict[str, Any], what: str) -> bool:
    """Write the link's values into `docs` in place. Returns whether anything changed."""
    changed = False
    for entry in body.get("DownstreamPaths") or []:
        doc = _find(docs, entry.get("Resource") or {}, f"{what} path {entry.get('Path')}")
        value = _typed(entry.get("Expression", ""), params, entry.get("DataType", "string"), what)
        try:  # a link never creates a field: a created field is the silent failure links exist to stop
            changed |= paths.set_existing(doc, entry["Path"], value)
        except paths.PathError as exc:
            raise EksinfError(f"{what}: {exc}", exc.hint, CONTRACT) from exc
    for setter in body.get("DownstreamSetters") or []:
        call = setter.get("FunctionInvocation") or {}
        selected = _where_resource(docs, call.get("WhereResource", ""))
        if not selected:
            raise EksinfError(
                f"{what}: setter {call.get('FunctionName')} matches no resource "
                f"({call.get('WhereResource')})",
                "Fix the binding's resource, or the unit.",
                CONTRACT,
            )
        args = [
            render_template(str(a.get("Value", "")), params, what)
            for a in call.get("Arguments") or []
        ]
        changed |= functions.function_for(call.get("FunctionName", ""))(selected, args)
    return changed
