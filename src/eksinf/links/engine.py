"""The link engine: the one place a profile value is written into a unit.

Every caller goes through here: `eksinf lint` and `eksinf links resolve` (through
`resolve_units`), the hub's link-profile (through `link_body`, ConfigHub's TransformPaths shape)
and the embedded hub's resolve (through `apply_link`). So what lint approves is, by construction,
what the hub writes and publishes. What counts as unresolved is `model.placeholder.scan`.

The rules, in one place:
- a link carries a scalar: a string, an integer or a boolean (ConfigHub's link data types);
- a path link writes the value as it is; a setter writes an env var, whose value Kubernetes
  requires to be a string, so it writes the value's text (`true`, `5`, `us-west-2`);
- a link never creates a field, container or env var, and never replaces a `valueFrom`: a
  created field is exactly the silent failure links exist to prevent.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from eksinf.model import paths

from ..errors import CONTRACT, EksinfError
from ..model import placeholder
from ..model.resources import (
    find_resource,
    pod_spec,
    pod_spec_path,
    resource_label,
    resource_name,
    resource_type,
    split_name,
)
from .bindings import Binding

Scalar = str | int | bool
_PARAM = re.compile(r"\{\{\s*\.Params\.([A-Za-z0-9_]+)\s*\}\}")
_WHERE_RESOURCE = re.compile(r"ConfigHub\.(ResourceType|ResourceName)\s*=\s*'([^']*)'")
SET_ENV_VAR = "set-env-var"


@dataclass(frozen=True)
class Target:
    """Where one link writes inside one resource: a path, or an env var of a named container."""

    path: str | None = None
    container: str | None = None
    env: str | None = None

    @classmethod
    def of(cls, binding: Binding) -> Target:
        return cls(binding.path, binding.container, binding.env)


# ---- values -----------------------------------------------------------------------------------


def profile_value(spec: dict[str, Any], source: str) -> Scalar:
    """The scalar at `source` in the profile's spec (PathError naming it when absent or not a
    scalar)."""
    try:
        value = paths.get(spec, source)
    except paths.PathError as exc:
        raise paths.PathError(f"profile spec.{source}: {exc.message}", exc.hint) from exc
    if not isinstance(value, str | int | bool):
        raise paths.PathError(
            f"profile spec.{source} is a {type(value).__name__}, not a string, integer or boolean",
            "A link carries one scalar; bind an element (e.g. availabilityZones.0).",
        )
    return value


def data_type(value: Scalar) -> str:
    """ConfigHub's DataType of a link value."""
    if isinstance(value, bool):
        return "bool"
    return "int" if isinstance(value, int) else "string"


def text_of(value: Scalar) -> str:
    """A scalar as env-var text: booleans as YAML and Go templates spell them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ---- the write --------------------------------------------------------------------------------


def setter_path(doc: dict[str, Any], container: str, env: str) -> str:
    """The positional path a setter writes today, e.g. `spec.template.spec.containers.0.env.5.value`.

    Raises PathError naming what is missing (the container, or the env var in it).
    """
    spec = pod_spec(doc)
    if spec is None:
        raise paths.PathError(f"{doc.get('kind')} has no pod template to set env vars in")
    base = pod_spec_path(doc)
    for field in ("containers", "initContainers"):
        for ci, item in enumerate(spec.get(field) or []):
            if item.get("name") != container:
                continue
            names = []
            for ei, var in enumerate(item.get("env") or []):
                names.append(var.get("name"))
                if var.get("name") == env:
                    if "value" not in var:
                        raise paths.PathError(
                            f"container {container!r} env var {env!r} has no literal value "
                            "(valueFrom?)"
                        )
                    return f"{base}.{field}.{ci}.env.{ei}.value"
            have = ", ".join(n for n in names if n) or "none"
            raise paths.PathError(
                f"container {container!r} has no env var {env!r} (it has: {have})",
                "A setter changes an existing variable; add it to the source with the placeholder.",
            )
    have = ", ".join(c.get("name", "?") for c in spec.get("containers") or [])
    raise paths.PathError(f"no container named {container!r} (containers: {have or 'none'})")


def target_path(target: Target | Binding, doc: dict[str, Any]) -> str:
    """The concrete path a target writes in `doc` (setters resolved to today's position)."""
    if target.path is not None:
        return target.path
    return setter_path(doc, target.container or "", target.env or "")


def write(doc: dict[str, Any], target: Target, value: Scalar) -> bool:
    """Write one link value into one resource document. Returns whether anything changed.

    Raises PathError (exit 3) when the path, container or env var does not exist.
    """
    if target.path is not None:
        return paths.set_existing(doc, target.path, value)
    return paths.set_existing(doc, target_path(target, doc), text_of(value))


# ---- lint and `links resolve`: bindings applied to units directly ------------------------------


def _contract(binding: Binding, message: str, hint: str) -> EksinfError:
    return EksinfError(f"{binding.where}: {message}", hint=hint, exit_code=CONTRACT)


def resolve_units(
    units: dict[str, list[dict[str, Any]]], profile_spec: dict[str, Any], bindings: list[Binding]
) -> dict[str, list[dict[str, Any]]]:
    """Return copies of `units` (keyed `component/unit`) with every binding's value written in.

    Bindings whose unit is not in `units` are skipped, so a caller may resolve one component.
    Pure: the inputs are not modified. Units that no binding touches are returned as new lists of
    the same (unmodified) documents; bound units are deep copies.
    """
    bound = {b.unit_key for b in bindings}
    out = {key: copy.deepcopy(docs) if key in bound else list(docs) for key, docs in units.items()}
    for key, docs in out.items():
        if key in bound:
            apply_bindings(docs, profile_spec, [b for b in bindings if b.unit_key == key])
    return out


def apply_bindings(
    docs: list[dict[str, Any]], profile_spec: dict[str, Any], bindings: list[Binding]
) -> bool:
    """Write each binding's profile value into `docs` (one unit's documents) in place; whether
    anything changed. `links resolve` runs it through core.roundtrip, so the unit keeps its
    layout, as the hub's resolve does."""
    changed = False
    for binding in bindings:
        doc = find_resource(docs, binding.kind, binding.name)
        if doc is None:
            raise _contract(
                binding,
                f"{binding.kind} {binding.name} not found in unit {binding.unit_key}.yaml",
                "Fix the binding's kind/name, or the unit that should hold the resource.",
            )
        try:
            changed |= write(doc, Target.of(binding), profile_value(profile_spec, binding.source))
        except paths.PathError as exc:
            raise _contract(
                binding,
                f"{binding.describe()}: {exc.message}",
                exc.hint or "Fix the binding or the unit it points at.",
            ) from exc
    return changed


def unresolved(units: dict[str, list[dict[str, Any]]]) -> list[str]:
    """`<component>/<unit>.yaml: Kind ns/name path` of every placeholder left (model.placeholder)."""
    return [
        f"{key}.yaml: {resource_label(doc)} {path}"
        for key, docs in sorted(units.items())
        for doc in docs
        for path in placeholder.scan(doc)
    ]


# ---- the hub: the same bindings as a ConfigHub TransformPaths link -----------------------------


def param_name(source: str) -> str:
    """The link parameter a profile path travels as (`availabilityZones.0` -> `availabilityZones_0`)."""
    return re.sub(r"[^A-Za-z0-9]", "_", source)


def link_body(
    bindings: list[Binding],
    unit_docs: list[dict[str, Any]],
    profile_doc: dict[str, Any],
    where: str,
) -> dict[str, Any]:
    """The TransformPaths body (ConfigHub's JSON shape) for one downstream unit's bindings."""
    profile_type = resource_type(profile_doc)
    profile_name = f"/{profile_doc['metadata']['name']}"
    upstream: dict[str, dict[str, Any]] = {}
    downstream, setters = [], []
    for b in bindings:
        param = param_name(b.source)
        upstream[param] = {
            "Name": param,
            "Path": f"spec.{b.source}",
            "Resource": {"ResourceType": profile_type, "ResourceName": profile_name},
        }
        doc = find_resource(unit_docs, b.kind, b.name)
        if doc is None:
            raise EksinfError(
                f"{b.where}: {where} has no {b.kind} {b.name}",
                "Fix the binding's kind/name, or re-render the component.",
                CONTRACT,
            )
        ns, bare = split_name(b.name)
        resource = {"ResourceType": resource_type(doc), "ResourceName": f"{ns or ''}/{bare}"}
        expression = f"{{{{.Params.{param}}}}}"
        if b.path is not None:
            try:
                value = profile_value(profile_doc["spec"], b.source)
            except paths.PathError as exc:
                raise _contract(b, exc.message, exc.hint) from exc
            downstream.append(
                {
                    "Path": b.path,
                    "Resource": resource,
                    "Expression": expression,
                    "Evaluator": "template",
                    "Parameters": [param],
                    "DataType": data_type(value),
                }
            )
        else:
            setters.append(
                {
                    "Parameters": [param],
                    "FunctionInvocation": {
                        "FunctionName": SET_ENV_VAR,
                        "WhereResource": f"ConfigHub.ResourceType = '{resource['ResourceType']}' "
                        f"AND ConfigHub.ResourceName = '{resource['ResourceName']}'",
                        "Arguments": [
                            {"Value": b.container},
                            {"Value": b.env},
                            {"Value": expression},
                        ],
                    },
                }
            )
    return {
        "UpstreamPaths": [upstream[k] for k in sorted(upstream)],
        "DownstreamPaths": downstream,
        "DownstreamSetters": setters,
    }


def _find(docs: list[dict[str, Any]], resource: dict[str, str], what: str) -> dict[str, Any]:
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


def upstream_params(
    docs: list[dict[str, Any]], body: dict[str, Any], what: str
) -> dict[str, Scalar]:
    """The link's parameters, read by name from the upstream (profile) unit."""
    params: dict[str, Scalar] = {}
    for entry in body.get("UpstreamPaths") or []:
        doc = _find(docs, entry.get("Resource") or {}, f"{what} upstream {entry.get('Name')}")
        try:
            value = paths.get(doc, entry["Path"])
        except paths.PathError as exc:
            raise EksinfError(
                f"{what}: upstream value {entry['Name']}: {exc}", exit_code=CONTRACT
            ) from exc
        if not isinstance(value, str | int | bool):
            raise EksinfError(
                f"{what}: upstream value {entry['Name']} ({entry['Path']}) is a "
                f"{type(value).__name__}, not a string, integer or boolean",
                "A link carries one scalar; bind an element of the list or map.",
                CONTRACT,
            )
        params[entry["Name"]] = value
    return params


def render_template(expression: str, params: dict[str, Scalar], what: str) -> str:
    """A ConfigHub template expression with its `{{.Params.x}}` filled in as text."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in params:
            raise EksinfError(
                f"{what}: expression uses unknown parameter {name!r}", exit_code=CONTRACT
            )
        return text_of(params[name])

    return _PARAM.sub(value, expression)


def evaluate(expression: str, params: dict[str, Scalar], what: str) -> Scalar:
    """An expression that is one parameter is that parameter's value; anything else is text."""
    whole = _PARAM.fullmatch(expression.strip())
    if whole and whole.group(1) in params:
        return params[whole.group(1)]
    return render_template(expression, params, what)


def _where_resource(docs: list[dict[str, Any]], clause: str) -> list[dict[str, Any]]:
    wanted = dict(_WHERE_RESOURCE.findall(clause or ""))
    return [
        d
        for d in docs
        if ("ResourceType" not in wanted or resource_type(d) == wanted["ResourceType"])
        and ("ResourceName" not in wanted or resource_name(d) == wanted["ResourceName"])
    ]


def apply_link(
    docs: list[dict[str, Any]], body: dict[str, Any], params: dict[str, Scalar], what: str
) -> bool:
    """Write a TransformPaths link's values into `docs` in place, through `write`. Returns
    whether anything changed. A setter other than set-env-var is refused: a link writes values,
    it does not run arbitrary functions."""
    changed = False
    for entry in body.get("DownstreamPaths") or []:
        doc = _find(docs, entry.get("Resource") or {}, f"{what} path {entry.get('Path')}")
        value = evaluate(entry.get("Expression", ""), params, what)
        try:
            changed |= write(doc, Target(path=entry["Path"]), value)
        except paths.PathError as exc:
            raise EksinfError(f"{what}: {exc}", exc.hint, CONTRACT) from exc
    for setter in body.get("DownstreamSetters") or []:
        call = setter.get("FunctionInvocation") or {}
        name = call.get("FunctionName", "")
        args = [str(a.get("Value", "")) for a in call.get("Arguments") or []]
        if name != SET_ENV_VAR or len(args) != 3:
            raise EksinfError(
                f"{what}: link setter {name} {args!r} is not {SET_ENV_VAR} CONTAINER ENV VALUE",
                "Links write values by path or through set-env-var; re-create the link with "
                "`eksinf link-profile`.",
                CONTRACT,
            )
        selected = _where_resource(docs, call.get("WhereResource", ""))
        if not selected:
            raise EksinfError(
                f"{what}: setter {name} matches no resource ({call.get('WhereResource')})",
                "Fix the binding's resource, or the unit.",
                CONTRACT,
            )
        target = Target(container=args[0], env=args[1])
        value = evaluate(args[2], params, what)
        for doc in selected:
            try:
                changed |= write(doc, target, value)
            except paths.PathError as exc:
                raise EksinfError(f"{what}: {exc}", exc.hint, CONTRACT) from exc
    return changed
