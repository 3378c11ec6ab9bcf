"""Kubernetes resource quantities (k8s.io/apimachinery/pkg/api/resource, quantity.go):

    <quantity>  ::= <sign><number><suffix>     e.g. 500m, 1.5Gi, 2e3, +4
    <number>    ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>    ::= Ki|Mi|Gi|Ti|Pi|Ei | m|""|k|M|G|T|P|E | e<sign><digits> | E<sign><digits>

The OpenAPI schemas type quantities as "string or number" with no pattern; the API server
parses them, so this module is the check the schema cannot express.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_QUANTITY = re.compile(
    r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$"
)
_SCALE = {
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


def parse_quantity(value: object) -> Decimal | None:
    """The quantity's value, or None when the API server would refuse the text."""
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
