"""Kubernetes quantities (`200Gi`, `1.5T`, `500m`, `2e3`), parsed once.

The grammar is the API server's (k8s.io/apimachinery/pkg/api/resource/quantity.go):

    <quantity>  ::= <sign><number><suffix>
    <number>    ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>    ::= Ki|Mi|Gi|Ti|Pi|Ei | m|""|k|M|G|T|P|E | e<sign><digits> | E<sign><digits>

The OpenAPI schemas type a quantity as "string or number" with no pattern, so `eksinf validate`
checks the text with `parse`; lint sizes storage with `to_bytes`.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

_QUANTITY = re.compile(
    r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$"
)
_SCALE: dict[str | None, Decimal] = {
    None: Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
GIB = 2**30


def parse(value: Any) -> Decimal | None:
    """The quantity's value, or None when the API server would refuse it."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    if not isinstance(value, str):
        return None
    match = _QUANTITY.match(value)
    if not match:
        return None
    number, suffix = match.groups()
    try:
        if suffix and suffix[0] in "eE" and len(suffix) > 1:
            return Decimal(number) * Decimal(10) ** int(suffix[1:])
        return Decimal(number) * _SCALE[suffix]
    except (InvalidOperation, OverflowError):
        return None


def to_bytes(value: Any) -> int | None:
    """Quantity -> bytes; an int is bytes already; None if unparseable or negative."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    parsed = parse(str(value))
    return int(parsed) if parsed is not None and parsed >= 0 else None


def whole_gib(value: Any) -> int | None:
    """`200Gi` -> 200; anything but a whole number of gibibytes written `<N>Gi` -> None."""
    if isinstance(value, str) and value.endswith("Gi") and value[:-2].isdigit():
        return int(value[:-2])
    return None


def gib_text(nbytes: int) -> str:
    return f"{nbytes / GIB:g}Gi"
