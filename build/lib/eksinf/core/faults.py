"""Named fault points, so tests can prove that a crash mid-operation loses nothing.

Set EKSINF_FAULT=<point> and the process dies (os._exit, no cleanup) when it reaches that point,
exactly like a SIGKILL would leave it.
"""

from __future__ import annotations

import os

FAULT_ENV = "EKSINF_FAULT"


def checkpoint(point: str) -> None:
    if os.environ.get(FAULT_ENV) == point:
        os._exit(137)
