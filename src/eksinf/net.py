"""The one network rule shared by chart fetching and the OCI client: plain HTTP only to this machine."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlparse


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
