"""Registry credentials: the environment, then ~/.docker/config.json (its credential helpers, as
docker looks them up, then its `auths`); and where they may go."""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlparse

from eksinf.core.net import is_loopback
from eksinf.core.proc import Overflow, run_bounded
from eksinf.core.types import Doc
from eksinf.errors import ENVIRONMENT, EksinfError

MAX_DOCKER_CONFIG = 1 << 20
MAX_HELPER_OUTPUT = 1 << 20
HELPER_TIMEOUT = 60  # seconds; a helper may ask a cloud API (ECR's) for a fresh token
# A helper is the program `docker-credential-<name>` on PATH; a name is never a path.
HELPER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# The helpers' protocol is docker/docker-credential-helpers' (credentials/credentials.go): a
# helper holding nothing for the server prints errCredentialsNotFoundMessage and exits 1, and a
# Username of "<token>" means Secret is an identity (OAuth2 refresh) token, not a password.
NOT_FOUND = "credentials not found in native keychain"
IDENTITY_TOKEN_USER = "<token>"


def _bad(path: Path, why: str) -> EksinfError:
    return EksinfError(
        f"{path}: {why}",
        hint="Fix the Docker config (docker login rewrites it) or set "
        "EKSINF_REGISTRY_USERNAME/PASSWORD, which take precedence.",
        exit_code=ENVIRONMENT,
    )


def _docker_config_auth(host: str) -> tuple[str, str] | None:
    """docker's order (docker/cli, cli/config/configfile/file.go, GetCredentialsStore): the
    host's `credHelpers` entry, else `credsStore`, else `auths`."""
    config_dir = Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker")
    path = config_dir / "config.json"
    if not path.is_file():
        return None
    config = _read_config(path)
    helpers = config.get("credHelpers") or {}
    if not isinstance(helpers, dict):
        raise _bad(path, "field credHelpers is not an object")
    helper, field = helpers.get(host), f"credHelpers.{host}"
    if helper is None:
        helper, field = config.get("credsStore"), "credsStore"
    if helper:
        found = _helper_credentials(path, field, helper, host)
        if found is not None:
            return found
    return _auths_entry(path, config, host)


def _read_config(path: Path) -> Doc:
    def bad(why: str) -> EksinfError:
        return _bad(path, why)

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
    return config


def _helper_credentials(path: Path, field: str, name: object, host: str) -> tuple[str, str] | None:
    """Ask `docker-credential-<name> get` for `host` (the helpers' protocol: the server on
    stdin, {"ServerURL", "Username", "Secret"} on stdout); None when it holds nothing for it."""
    if not isinstance(name, str) or not HELPER_NAME.fullmatch(name):
        raise _bad(path, f"{field} is not a credential helper name: {name!r}")
    program = shutil.which(f"docker-credential-{name}")
    if program is None:
        raise _bad(path, f"{field} names docker-credential-{name}, which is not on PATH")
    try:
        done = run_bounded(
            [program, "get"],
            stdin=host.encode(),
            timeout=HELPER_TIMEOUT,
            max_output=MAX_HELPER_OUTPUT,
        )
    except Overflow:
        raise _bad(
            path, f"docker-credential-{name} printed over {MAX_HELPER_OUTPUT} bytes"
        ) from None
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _bad(path, f"docker-credential-{name} get failed ({type(exc).__name__})") from exc
    out = done.out
    if done.code != 0:
        said = (out or done.err).decode(errors="replace").strip().splitlines()
        if said and said[0].strip().lower() == NOT_FOUND:
            return None
        why = said[0][:200] if said else f"exit {done.code}"
        raise _bad(path, f"docker-credential-{name} get failed for {host}: {why}")
    try:
        answer = json.loads(out)
    except (ValueError, RecursionError) as exc:
        raise _bad(path, f"docker-credential-{name} did not print JSON") from exc
    user = answer.get("Username") if isinstance(answer, dict) else None
    secret = answer.get("Secret") if isinstance(answer, dict) else None
    if not isinstance(user, str) or not isinstance(secret, str):
        raise _bad(path, f"docker-credential-{name} printed no Username and Secret strings")
    if user == IDENTITY_TOKEN_USER:
        raise EksinfError(
            f"docker-credential-{name} holds an identity token for {host}, which eksinf cannot "
            "exchange",
            hint="Set EKSINF_REGISTRY_USERNAME/PASSWORD (a registry token or password).",
            exit_code=ENVIRONMENT,
        )
    return user, secret


def _auths_entry(path: Path, config: Doc, host: str) -> tuple[str, str] | None:
    def bad(why: str) -> EksinfError:
        return _bad(path, why)

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
    """The environment wins over ~/.docker/config.json."""
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
