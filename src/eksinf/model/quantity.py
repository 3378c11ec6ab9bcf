"""Kubernetes quantities (`200Gi`, `1.5T`, `512Mi`), parsed once."""

from __future__ import annotations

import re
from typing import Any

_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|K|M|G|T)?$")
_UNITS: dict[str | None, int] = {
    None: 1,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
GIB = 2**30


def to_bytes(value: Any) -> int | None:
    """Quantity -> bytes (the suffixes storage uses); an int is bytes already; None if unparseable."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _QUANTITY.match(str(value))
    if not match:
        return None
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def whole_gib(value: Any) -> int | None:
    """`200Gi` -> 200; anything but a whole number of gibibytes written `<N>Gi` -> None."""
    if isinstance(value, str) and value.endswith("Gi") and value[:-2].isdigit():
        return int(value[:-2])
    return None


def gib_text(nbytes: int) -> str:
    return f"{nbytes / GIB:g}Gi"
