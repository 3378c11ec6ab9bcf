"""One repository in an OCI registry, over the distribution API, with `requests`: bounded
streamed reads, one deadline per operation, and the 401 challenge (Bearer token or Basic)."""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from typing import Any

import requests

from eksinf import __version__
from eksinf.core.net import Deadline, chunks, is_loopback, read_body, too_large
from eksinf.errors import ENVIRONMENT, FAILURE, EksinfError
from eksinf.model.digest import oci_digest
from eksinf.publish.ocispec import (
    _DIGEST,
    INDEX_MEDIA_TYPE,
    MANIFEST_MEDIA_TYPE,
    MAX_MANIFEST,
    MAX_TOKEN,
    Ref,
    _no_repository,
    _not_a_bundle,
)
from eksinf.publish.registry_auth import credentials_may_travel, registry_credentials

# One push, pull or tag listing against one repository finishes within this, however slowly a
# registry trickles its answers (each read within net.READ_TIMEOUT, cut to what is left).
DEADLINE = 600.0
ERROR_SHOWN = 200  # bytes of a registry's error body quoted in a message

_SESSIONS: dict[str, requests.Session] = {}


def _session(host: str) -> requests.Session:
    """One keep-alive connection pool per registry host, shared by every repository on it."""
    if host not in _SESSIONS:
        session = requests.Session()
        session.headers["User-Agent"] = f"eksinf/{__version__}"
        _SESSIONS[host] = session
    return _SESSIONS[host]


class RegistryStore:
    """One repository in a registry, over the OCI distribution API.

    Every answer is read as a stream, a bounded number of bytes, within one deadline for the
    whole operation (DEADLINE): a registry that answers too much or too slowly is an error, never
    a hang or an exhausted memory."""

    def __init__(self, ref: Ref) -> None:
        self.ref = ref
        self.name = ref.base
        scheme = "http" if is_loopback(ref.location) else "https"
        self.base_url = f"{scheme}://{ref.location}/v2/{ref.repository}"
        self.session = _session(ref.location)
        self.credentials = registry_credentials(ref.location)
        self.token: str | None = None
        self.deadline = Deadline.start(DEADLINE)

    # ---- bounded HTTP (net.Deadline, net.read_body) ----

    @property
    def _who(self) -> str:
        return f"registry {self.ref.location}"

    def _timeout(self) -> float:
        return self.deadline.timeout(self._who)

    def _read(self, response: requests.Response, limit: int, what: str) -> bytes:
        return read_body(response, limit, self.deadline, f"{self._who}: {what}")

    def _json(self, response: requests.Response, limit: int, what: str) -> Any:
        try:
            return json.loads(self._read(response, limit, what))
        except (ValueError, RecursionError) as exc:
            raise EksinfError(
                f"{self._who}: {what} is not JSON ({type(exc).__name__})",
                hint="Check that the reference names an OCI registry.",
                exit_code=FAILURE,
            ) from exc

    # Auth: try anonymously; answer a 401 challenge (Bearer token or Basic) and retry once.
    # Bearer tokens are scoped (pull, then push), so a later 401 fetches a new one.
    def _authorize(self, challenge: str) -> bool:
        scheme, _, params = challenge.partition(" ")
        if scheme.lower() == "basic":
            self.session.auth = self.credentials
            return self.credentials is not None
        fields = dict(re.findall(r'(\w+)="([^"]*)"', params))
        realm = fields.pop("realm", None)
        if scheme.lower() != "bearer" or not realm:
            return False
        if not credentials_may_travel(realm):
            raise EksinfError(
                f"registry {self.ref.location} asks for a token from {realm}: plain HTTP to "
                "another machine; eksinf never sends credentials over plain HTTP except to "
                "this machine",
                hint="Use the registry's HTTPS address (a registry whose token service is plain "
                "HTTP cannot be used safely).",
                exit_code=ENVIRONMENT,
            )
        try:
            response = requests.get(
                realm,
                params=fields,
                auth=self.credentials,
                timeout=self._timeout(),
                stream=True,
                allow_redirects=False,  # a redirect could lead the credentials anywhere
            )
        except requests.RequestException as exc:
            raise self._unreachable(exc) from exc
        if response.status_code != 200:
            response.close()
            return False
        try:
            body = self._json(response, MAX_TOKEN, "the token answer")
        except EksinfError as exc:
            if exc.exit_code == ENVIRONMENT:
                raise
            return False  # a token endpoint that answers with something other than JSON
        token = (body.get("token") or body.get("access_token")) if isinstance(body, dict) else None
        self.token = token if isinstance(token, str) else None
        return bool(self.token)

    def _unreachable(self, exc: Exception) -> EksinfError:
        return EksinfError(
            f"registry {self.ref.location} is unreachable ({type(exc).__name__})",
            hint=f"Check that {self.ref.location} is up and reachable from here "
            "(plain HTTP is used only for loopback hosts).",
            exit_code=ENVIRONMENT,
        )

    def _send(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        retry: bool = True,
        **kw: Any,
    ) -> requests.Response:
        """One request, streamed: the caller reads the body through `_read` or closes it."""
        sent = dict(headers or {})
        if self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        try:
            response = self.session.request(
                method, url, headers=sent, timeout=self._timeout(), stream=True, **kw
            )
        except requests.RequestException as exc:
            raise self._unreachable(exc) from exc
        challenge = response.headers.get("WWW-Authenticate", "")
        if response.status_code == 401 and retry and self._authorize(challenge):
            response.close()
            return self._send(method, url, headers=headers, retry=False, **kw)
        return response

    def _fail(self, response: requests.Response, what: str) -> EksinfError:
        if response.status_code in (401, 403):
            response.close()
            return EksinfError(
                f"registry {self.ref.location} refused {what} ({response.status_code})",
                hint="Log in (docker login writes ~/.docker/config.json) or set "
                "EKSINF_REGISTRY_USERNAME and EKSINF_REGISTRY_PASSWORD.",
                exit_code=ENVIRONMENT,
            )
        shown = b""
        for chunk in chunks(response, self.deadline, self._who):  # the start of it only
            shown += chunk
            if len(shown) >= ERROR_SHOWN:
                response.close()
                break
        text = shown[:ERROR_SHOWN].decode("utf-8", "replace").strip()
        return EksinfError(
            f"registry {self.ref.location}: {what} failed: HTTP {response.status_code}"
            + (f" {' '.join(text.split())}" if text else ""),
            exit_code=FAILURE,
        )

    # ---- the distribution API ----

    def get_manifest(self, reference: str) -> bytes | None:
        response = self._send(
            "GET",
            f"{self.base_url}/manifests/{reference}",
            headers={"Accept": f"{MANIFEST_MEDIA_TYPE}, {INDEX_MEDIA_TYPE}"},
        )
        if response.status_code == 404:
            response.close()
            return None
        if response.status_code != 200:
            raise self._fail(response, f"reading manifest {self.name}:{reference}")
        return self._read(response, MAX_MANIFEST, f"manifest {self.name}:{reference}")

    def put_manifest(self, manifest: bytes, tags: list[str]) -> None:
        for tag in tags:
            with self._send(
                "PUT",
                f"{self.base_url}/manifests/{tag}",
                data=manifest,
                headers={"Content-Type": MANIFEST_MEDIA_TYPE},
            ) as response:
                if response.status_code not in (200, 201):
                    raise self._fail(response, f"writing manifest {self.name}:{tag}")

    def has_blob(self, digest: str) -> bool:
        with self._send("HEAD", f"{self.base_url}/blobs/{digest}") as response:
            if response.status_code in (200, 404):
                return response.status_code == 200
            raise self._fail(response, f"checking blob {digest}")

    def put_blob(self, data: bytes) -> None:
        digest = oci_digest(data)
        with self._send("POST", f"{self.base_url}/blobs/uploads/") as start:
            if start.status_code != 202 or "Location" not in start.headers:
                raise self._fail(start, "starting a blob upload")
            location = requests.compat.urljoin(self.base_url, start.headers["Location"])
        joiner = "&" if "?" in location else "?"
        with self._send(
            "PUT",
            f"{location}{joiner}digest={digest}",
            data=data,
            headers={"Content-Type": "application/octet-stream"},
        ) as done:
            if done.status_code != 201:
                raise self._fail(done, f"uploading blob {digest}")

    def get_blob(self, digest: str, size: int) -> bytes:
        """The blob, streamed to an unnamed temporary file while its digest is computed, and
        refused once it passes its declared size or when its digest differs."""
        if not _DIGEST.match(digest):
            raise _not_a_bundle(self.name, f"blob digest {digest!r} is not sha256:<64 hex>")
        response = self._send("GET", f"{self.base_url}/blobs/{digest}")
        if response.status_code != 200:
            raise self._fail(response, f"reading blob {digest}")
        what = f"blob {digest}"
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > size:
            response.close()
            raise too_large(f"{self._who}: {what}", size)
        hasher = hashlib.sha256()
        received = 0
        with tempfile.TemporaryFile(prefix="eksinf-blob-") as spool:
            for chunk in chunks(response, self.deadline, self._who):
                received += len(chunk)
                if received > size:
                    raise too_large(f"{self._who}: {what}", size)
                hasher.update(chunk)
                spool.write(chunk)
            if received != size or f"sha256:{hasher.hexdigest()}" != digest:
                raise EksinfError(
                    f"{self.name}: layer content does not match its digest {digest} "
                    f"({received} of {size} bytes)",
                    hint="The registry returned corrupt data; pull again.",
                    exit_code=FAILURE,
                )
            spool.seek(0)
            return spool.read()

    def tags(self) -> list[str]:
        response = self._send("GET", f"{self.base_url}/tags/list")
        if response.status_code == 404:  # NAME_UNKNOWN: a misspelt repository is not "no tags"
            response.close()
            raise _no_repository(f"{self.ref.location}/{self.name}")
        if response.status_code != 200:
            raise self._fail(response, f"listing tags of {self.name}")
        body = self._json(response, MAX_MANIFEST, f"the tag list of {self.name}")
        tags = body.get("tags") if isinstance(body, dict) else None
        if tags is None and isinstance(body, dict):
            return []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise EksinfError(
                f"registry {self.ref.location}: the tag list of {self.name} is not "
                '{"tags": [strings]}',
                hint="Check that the reference names an OCI registry.",
                exit_code=FAILURE,
            )
        return sorted(tags)
