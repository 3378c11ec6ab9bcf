"""`eksinf validate`'s entry points: offline admission (build/validate/admission.py) and a real
API server's (build/validate/server.py). Each is imported only by the mode that runs."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ..model.stack import Stack


def server_engine() -> ModuleType:
    """The --server engine: planes_for, check_local, connect, check_cluster, REFUSED,
    NOT_CHECKABLE."""
    from ..build.validate import server

    return server


def validate_stack(stack: Stack) -> Any:
    """Offline admission of every unit, raw and resolved."""
    from ..build.validate.admission import validate_stack as validate

    return validate(stack)
