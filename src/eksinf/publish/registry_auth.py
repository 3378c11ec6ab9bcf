"""Registry credentials: the environment, then ~/.docker/config.json; and where they may go."""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path
from urllib.parse import urlparse

from eksinf.core.net import is_loopback
from eksinf.errors import ENVIRONMENT, EksinfError

MAX_DOCKER_CONFIG = 1 << 20


def _docker_config_auth(host: str) -> tuple[str, str] | None:
    config_dir = Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker")
    path = config_dir / "config.json"
    if not path.is_file():
        return None

    def bad(why: str) -> EksinfError:
        return EksinfError(
            f"{path}: {why}",
            hint="Fix the Docker config (docker login rewrites it) or set "
            "EKSINF_REGISTRY_USERNAME/PASSWORD, which take precedence.",
            exit_code=ENVIRONMENT,
        )

    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_DOCKER_CONFIG + 1)
    except OSError as exc:
        raise bad(f"not readable ({exc.strerror or type(exc).__name__})") from exc
    if len(raw) > MAX_DOCKER_CONFIG:
        raise bad(f"larger than {MAX_DOCKER_CONFIG} bytes")
    try:
        config = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise bad(f"not valid JSON ({type(exc).__name__})") from exc
    if not isinstance(config, dict):
        raise bad(f"a JSON {type(config).__name__}, not an object")
    auths = config.get("auths")
    if auths is None:
        return None
    if not isinstance(auths, dict):
        raise bad("field auths is not an object")
    for key in (host, f"https://{host}", f"http://{host}", f"https://{host}/v1/"):
        entry = auths.get(key)
        if not isinstance(entry, dict):
            continue
        if entry.get("auth"):
            try:
                decoded = base64.b64decode(entry["auth"], validate=True).decode()
            except (TypeError, ValueError, binascii.Error) as exc:
                raise bad(f"auths.{key}.auth is not base64 of user:password") from exc
            user, sep, password = decoded.partition(":")
            if not sep:
                raise bad(f"auths.{key}.auth is not base64 of user:password")
            return user, password
        if entry.get("username"):
            user, password = entry["username"], entry.get("password", "")
            if not isinstance(user, str) or not isinstance(password, str):
                raise bad(f"auths.{key}.username and .password must be strings")
            return user, password
    return None


def registry_credentials(host: str) -> tuple[str, str] | None:
    """The environment wins over ~/.docker/config.json (credential helpers are not used)."""
    user = os.environ.get("EKSINF_REGISTRY_USERNAME")
    if user:
        return user, os.environ.get("EKSINF_REGISTRY_PASSWORD", "")
    return _docker_config_auth(host)


def credentials_may_travel(url: str) -> bool:
    """Credentials go over HTTPS, or over plain HTTP only to this machine."""
    parsed = urlparse(url)
    return parsed.scheme == "https" or (
        parsed.scheme == "http" and is_loopback(parsed.netloc.rpartition("@")[2])
    )
