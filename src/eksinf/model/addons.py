"""EKS add-ons: the recorded configuration schemas and the checks of an `Addon` unit against them.

EKS validates an add-on's `configurationValues` against a JSON schema per add-on version, which
`eks:DescribeAddonConfiguration` returns as a string (`configurationSchema`). The package keeps
those answers, one record per (add-on, version) with where it came from, in
`data/addon-schemas.json` (`eksinf addon-schemas refresh` writes it), so lint checks values
offline; a version without a record is not checked and lint says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from eksinf.core.yamlio import load_docs

from ..errors import CONTRACT, EksinfError

RECORD = Path(__file__).resolve().parents[1] / "data" / "addon-schemas.json"
RECORD_COMMENT = (
    "eks:DescribeAddonConfiguration output (addonName, addonVersion, configurationSchema as "
    "returned: a JSON-schema string), one record per add-on version, each with where it came "
    "from. Written by `eksinf addon-schemas refresh`; read by `eksinf lint` (addon-configuration)."
)


@dataclass(frozen=True)
class SchemaRecord:
    addon: str
    version: str
    schema: str  # configurationSchema, verbatim
    source: str

    def as_json(self) -> dict[str, str]:
        return {
            "addonName": self.addon,
            "addonVersion": self.version,
            "configurationSchema": self.schema,
            "source": self.source,
        }


Records = dict[tuple[str, str], SchemaRecord]


def load_records(path: Path = RECORD) -> Records:
    """The recorded schemas by (add-on, version)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        rows = [
            SchemaRecord(r["addonName"], r["addonVersion"], r["configurationSchema"], r["source"])
            for r in doc["records"]
        ]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EksinfError(
            f"{path}: not a readable add-on schema record ({type(exc).__name__}: {exc})",
            hint="Restore it from git, or rewrite it: eksinf addon-schemas refresh.",
            exit_code=CONTRACT,
        ) from exc
    return {(r.addon, r.version): r for r in rows}


def records_bytes(records: Records) -> bytes:
    """The record file's bytes: sorted by add-on and version, so a refresh diffs cleanly."""
    rows = [records[k].as_json() for k in sorted(records)]
    return (json.dumps({"comment": RECORD_COMMENT, "records": rows}, indent=2) + "\n").encode()


def parse_values(text: str | None, label: str) -> Any:
    """`configurationValues` as EKS reads it (JSON or YAML); None/empty is no values at all."""
    if not text or not str(text).strip():
        return None
    try:
        docs = load_docs(str(text), label)
    except yaml.YAMLError as exc:
        raise EksinfError(
            f"{label}: not valid YAML or JSON ({str(exc).splitlines()[0]})", exit_code=CONTRACT
        ) from exc
    return docs[0] if len(docs) == 1 else docs


def same_values(a: str | None, b: str | None) -> bool:
    """Two configurationValues say the same thing (parsed; absent, empty and `{}` are all "no
    values": the add-on runs on its defaults)."""

    def norm(text: str | None) -> Any:
        value = parse_values(text, "configurationValues")
        return None if value in (None, {}) else value

    return bool(norm(a) == norm(b))


def value_errors(schema_text: str, values: Any) -> list[str]:
    """Where `values` break the recorded schema: `path: message`, sorted."""
    import jsonschema  # only lint and refresh need it

    schema = json.loads(schema_text)
    validator = jsonschema.validators.validator_for(schema)(schema)
    found = []
    for error in validator.iter_errors(values):
        where = ".".join(str(p) for p in error.absolute_path) or "(top)"
        found.append(f"{where}: {error.message}")
    return sorted(found)
