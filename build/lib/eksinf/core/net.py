"""The network rules shared by chart and manifest fetching and the OCI client: plain HTTP only
to this machine, and every body read with a size bound and within a deadline."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from eksinf.errors import ENVIRONMENT, FAILURE, EksinfError


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, with or without `:port`) is this machine."""
    try:
        return ipaddress.ip_address(host).is_loopback  # a bare address, IPv6 included
    except ValueError:
        pass
    name = urlparse(f"//{host}").hostname or ""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


# ---- bounded reads: every body read from the network has a size bound and a deadline ----------

READ_TIMEOUT = 30.0  # seconds one connect or one socket read may take
CHUNK = 64 << 10


@dataclass(frozen=True)
class Deadline:
    """When one network operation (a pull, a chart fetch) must be done, however slowly the
    other side trickles its answer."""

    seconds: float
    at: float

    @classmethod
    def start(cls, seconds: float) -> Deadline:
        return cls(seconds, time.monotonic() + seconds)

    def timeout(self, what: str) -> float:
        """The timeout for the next connect or read: what is left, cut to READ_TIMEOUT; an
        environment error naming `what` once nothing is left."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise EksinfError(
                f"{what}: no answer within the {int(self.seconds)} s deadline",
                hint="Check the network and the server, then retry.",
                exit_code=ENVIRONMENT,
            )
        return min(READ_TIMEOUT, left)


def chunks(response: Any, deadline: Deadline, what: str) -> Iterator[bytes]:
    """A streamed `requests` response's body, one socket read at a time (read1: a server that
    trickles cannot hold one call past the deadline), the deadline checked before each; the
    response is closed however the reading ends."""
    import requests
    import urllib3

    try:
        while True:
            deadline.timeout(what)
            chunk = response.raw.read1(CHUNK, decode_content=True)
            if not chunk:
                return
            yield chunk
    except (urllib3.exceptions.HTTPError, requests.RequestException, OSError) as exc:
        raise EksinfError(
            f"{what}: the connection broke while reading ({type(exc).__name__})",
            hint="Check the network and the server, then retry.",
            exit_code=ENVIRONMENT,
        ) from exc
    finally:
        response.close()


def too_large(what: str, limit: int) -> EksinfError:
    return EksinfError(
        f"{what} is larger than {limit} bytes",
        hint="eksinf bounds every read from the network, far above anything it reads there: "
        "check the address.",
        exit_code=FAILURE,
    )


def read_body(response: Any, limit: int, deadline: Deadline, what: str) -> bytes:
    """The whole body of a streamed response, refused (decompressed, if the server compressed
    it) once it passes `limit` bytes, or at once when its Content-Length says it would."""
    declared = str(response.headers.get("Content-Length", ""))
    if declared.isdigit() and int(declared) > limit:
        response.close()
        raise too_large(what, limit)
    body = bytearray()
    for chunk in chunks(response, deadline, what):
        body += chunk
        if len(body) > limit:
            raise too_large(what, limit)
    return bytes(body)
