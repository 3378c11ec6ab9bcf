"""Push and pull bundles as OCI artifacts: to a registry, or to an OCI image-layout directory.

We speak the OCI distribution API with `requests` ourselves instead of going through oras-py:
we need our own manifest (OCI 1.1 `artifactType`, the empty config), a digest check before and
after every write, and precise errors for an unreachable registry; all of which is a few HTTP
calls. Both backends store byte-identical manifests, so a bundle's digest is the same wherever
it lives.

Tags: every tag except `latest` is immutable. Pushing content that an immutable tag already
holds keeps that tag's manifest (and the provenance of the commit that first published it);
pushing different content under an existing immutable tag is refused.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

import requests

from eksinf import __version__
from eksinf.core.atomic import write_file
from eksinf.core.net import Deadline, chunks, is_loopback, read_body, too_large
from eksinf.errors import ENVIRONMENT, FAILURE, USAGE, EksinfError, shell_command
from eksinf.model.digest import oci_digest

ARTIFACT_TYPE = "application/vnd.eksinf.bundle.v1"
LAYER_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY_CONFIG = b"{}"
LAYOUT_PREFIX = "oci-layout:"
REF_NAME = "org.opencontainers.image.ref.name"
TITLE = "org.opencontainers.image.title"
CREATED = "org.opencontainers.image.created"
PINNED_CREATED = "1970-01-01T00:00:00Z"  # a real timestamp would make every push a new digest
MUTABLE_TAGS = frozenset({"latest"})
DEFAULT_TAG = "latest"
# One push, pull or tag listing against one repository finishes within this, however slowly a
# registry trickles its answers (each read within net.READ_TIMEOUT, cut to what is left).
DEADLINE = 600.0
# Every read from the network is bounded: manifests (and tag lists, and the layout's index) at
# 4 MiB, what registries themselves accept for a manifest (OCI distribution spec); a token answer
# at 1 MiB; a blob at its declared size, and never above MAX_BLOB. A bundle unpacks to at most
# 256 MiB (bundle.MAX_TOTAL), so its gzip never comes near 512 MiB.
MAX_MANIFEST = 4 << 20
MAX_TOKEN = 1 << 20
MAX_BLOB = 512 << 20
MAX_DOCKER_CONFIG = 1 << 20
ERROR_SHOWN = 200  # bytes of a registry's error body quoted in a message

_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_REPO = re.compile(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$"
)


# ---- references ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """Where an artifact lives: a registry repository or an OCI layout directory."""

    kind: str  # "registry" | "layout"
    location: str  # "host[:port]" for a registry, the directory for a layout
    repository: str  # repository path in the registry; "" for a layout
    tag: str | None = None
    digest: str | None = None

    @property
    def reference(self) -> str:
        """What to resolve: the digest if pinned, else the tag, else `latest`."""
        return self.digest or self.tag or DEFAULT_TAG

    @property
    def base(self) -> str:
        if self.kind == "layout":
            return f"{LAYOUT_PREFIX}{self.location}"
        return f"{self.location}/{self.repository}"

    def child(self, name: str) -> Ref:
        """The repository for one component under this base."""
        if self.kind == "layout":
            return Ref("layout", str(Path(self.location) / name), "")
        return Ref("registry", self.location, f"{self.repository}/{name}")

    def __str__(self) -> str:
        suffix = f"@{self.digest}" if self.digest else (f":{self.tag}" if self.tag else "")
        return f"{self.base}{suffix}"


def _split_suffix(text: str, original: str) -> tuple[str, str | None, str | None]:
    """Split `name[:tag][@digest]` where the name may itself contain ':' before a '/'."""
    digest = None
    if "@" in text:
        text, digest = text.rsplit("@", 1)
        if not _DIGEST.match(digest):
            raise _bad_ref(original, f"{digest!r} is not a sha256:<64 hex> digest")
    tag = None
    head, sep, tail = text.rpartition(":")
    if sep and "/" not in tail and head:
        if not _TAG.match(tail):
            raise _bad_ref(original, f"{tail!r} is not a valid tag")
        text, tag = head, tail
    return text, tag, digest


def _bad_ref(ref: str, why: str) -> EksinfError:
    return EksinfError(
        f"bad OCI reference {ref!r}: {why}",
        hint="Use oci-layout:PATH[:tag] or host[:port]/repository[:tag|@sha256:...] "
        "(an oci:// prefix is accepted).",
        exit_code=USAGE,
    )


def parse_ref(ref: str) -> Ref:
    text = ref.strip()
    if text.startswith(LAYOUT_PREFIX):
        path, tag, digest = _split_suffix(text[len(LAYOUT_PREFIX) :], ref)
        if not path:
            raise _bad_ref(ref, "no directory after oci-layout:")
        return Ref("layout", path, "", tag, digest)
    if text.startswith("oci://"):
        text = text[len("oci://") :]
    host, slash, rest = text.partition("/")
    if not slash or not rest:
        raise _bad_ref(ref, "no repository after the registry host")
    if not ("." in host or ":" in host or host == "localhost"):
        raise _bad_ref(ref, f"{host!r} is not a registry host (name it explicitly, e.g. ghcr.io)")
    repository, tag, digest = _split_suffix(rest, ref)
    if not _REPO.match(repository):
        raise _bad_ref(ref, f"repository {repository!r} must be lowercase path components")
    return Ref("registry", host, repository, tag, digest)


# ---- manifests ----------------------------------------------------------------------------


def canonical_json(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def build_manifest(blob: bytes, title: str, annotations: dict[str, str]) -> bytes:
    """The one manifest shape both backends store: same inputs, same bytes, same digest."""
    return canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "artifactType": ARTIFACT_TYPE,
            "config": {
                "mediaType": EMPTY_MEDIA_TYPE,
                "digest": oci_digest(EMPTY_CONFIG),
                "size": len(EMPTY_CONFIG),
            },
            "layers": [
                {
                    "mediaType": LAYER_MEDIA_TYPE,
                    "digest": oci_digest(blob),
                    "size": len(blob),
                    "annotations": {TITLE: title},
                }
            ],
            "annotations": {**annotations, CREATED: PINNED_CREATED},
        }
    )


def _not_a_bundle(where: str, why: str) -> EksinfError:
    return EksinfError(
        f"{where}: {why}",
        hint="This is not an eksinf bundle (was it pushed by another tool, or damaged?).",
        exit_code=FAILURE,
    )


def manifest_annotations(manifest: bytes, where: str) -> dict[str, str]:
    """The manifest's annotations, which must be a string-to-string map when present."""
    data = _manifest_object(manifest, where)
    annotations = data.get("annotations", {})
    if not isinstance(annotations, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in annotations.items()
    ):
        raise _not_a_bundle(where, "manifest annotations are not a map of strings")
    return annotations


def _manifest_object(manifest: bytes, where: str) -> dict[str, Any]:
    try:
        data = json.loads(manifest)
    except (ValueError, RecursionError) as exc:
        raise _not_a_bundle(where, f"manifest is not JSON ({type(exc).__name__})") from exc
    if not isinstance(data, dict):
        raise _not_a_bundle(where, f"manifest is a JSON {type(data).__name__}, not an object")
    return data


def bundle_layer(manifest: bytes, where: str) -> dict[str, Any]:
    """The single bundle layer of a manifest, checked field by field (its digest is a
    sha256:<64 hex>, its size a whole number of bytes up to MAX_BLOB, its title a string), or a
    clear error naming what is wrong. Nothing builds a URL or a path from an unchecked field."""
    layers = _manifest_object(manifest, where).get("layers")
    if not isinstance(layers, list) or len(layers) != 1:
        raise _not_a_bundle(
            where,
            "expected exactly one layer, found "
            + (str(len(layers)) if isinstance(layers, list) else "none"),
        )
    layer = layers[0]
    if not isinstance(layer, dict):
        raise _not_a_bundle(where, f"the layer is a JSON {type(layer).__name__}, not an object")
    if layer.get("mediaType") != LAYER_MEDIA_TYPE:
        raise _not_a_bundle(
            where, f"layer media type is {layer.get('mediaType')!r}, not {LAYER_MEDIA_TYPE}"
        )
    digest, size = layer.get("digest"), layer.get("size")
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        raise _not_a_bundle(where, f"layer digest {digest!r} is not sha256:<64 hex>")
    if type(size) is not int or not 0 <= size <= MAX_BLOB:
        raise _not_a_bundle(
            where, f"layer size {size!r} is not a whole number of bytes up to {MAX_BLOB}"
        )
    annotations = layer.get("annotations", {})
    if not isinstance(annotations, dict) or not isinstance(annotations.get(TITLE, ""), str):
        raise _not_a_bundle(where, "layer annotations are not a map with a string title")
    return layer


# ---- backends -----------------------------------------------------------------------------


class Store(Protocol):
    name: str

    def get_manifest(self, reference: str) -> bytes | None: ...
    def put_manifest(self, manifest: bytes, tags: list[str]) -> None: ...
    def has_blob(self, digest: str) -> bool: ...
    def put_blob(self, data: bytes) -> None: ...
    def get_blob(self, digest: str, size: int) -> bytes: ...
    def tags(self) -> list[str]: ...


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


_SESSIONS: dict[str, requests.Session] = {}


def _session(host: str) -> requests.Session:
    """One keep-alive connection pool per registry host, shared by every repository on it."""
    if host not in _SESSIONS:
        session = requests.Session()
        session.headers["User-Agent"] = f"eksinf/{__version__}"
        _SESSIONS[host] = session
    return _SESSIONS[host]


def credentials_may_travel(url: str) -> bool:
    """Credentials go over HTTPS, or over plain HTTP only to this machine."""
    parsed = urlparse(url)
    return parsed.scheme == "https" or (
        parsed.scheme == "http" and is_loopback(parsed.netloc.rpartition("@")[2])
    )


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
        self, method: str, url: str, *, headers: dict | None = None, retry: bool = True, **kw: Any
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


class LayoutStore:
    """An OCI image-layout directory: oci-layout, index.json and blobs/sha256/<hex>.

    Blobs are content-addressed and written by rename; index.json is replaced atomically under
    a lock, so readers see either the old index or the new one. A layout may come from anywhere,
    so every digest read from it is checked before a path is built from it, and every file is
    read with a size bound.
    """

    def __init__(self, ref: Ref) -> None:
        self.root = Path(ref.location)
        self.name = ref.base

    def _damaged(self, why: str) -> EksinfError:
        return EksinfError(
            f"{self.name}: {why}",
            hint="The layout is damaged; remove it and push again.",
            exit_code=FAILURE,
        )

    def _blob_path(self, digest: Any) -> Path:
        if not isinstance(digest, str) or not _DIGEST.match(digest):
            raise self._damaged(f"digest {digest!r} is not sha256:<64 hex>")
        return self.root / "blobs" / "sha256" / digest.removeprefix("sha256:")

    def _read(self, path: Path, limit: int) -> bytes:
        try:
            with path.open("rb") as handle:
                data = handle.read(limit + 1)
        except OSError as exc:
            raise self._damaged(
                f"{path.name} is not readable ({exc.strerror or type(exc).__name__})"
            ) from exc
        if len(data) > limit:
            raise self._damaged(f"{path.relative_to(self.root)} is larger than {limit} bytes")
        return data

    def _index(self) -> dict[str, Any]:
        path = self.root / "index.json"
        if not path.is_file():
            return {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": []}
        try:
            index = json.loads(self._read(path, MAX_MANIFEST))
        except (ValueError, RecursionError) as exc:
            raise self._damaged(f"index.json is not valid JSON ({type(exc).__name__})") from exc
        if not isinstance(index, dict) or not isinstance(index.get("manifests", []), list):
            raise self._damaged('index.json is not {"manifests": [...]}')
        if not all(
            isinstance(m, dict) and isinstance(m.get("annotations") or {}, dict)
            for m in index.get("manifests", [])
        ):
            raise self._damaged("index.json lists a manifest that is not an object")
        return index

    def get_manifest(self, reference: str) -> bytes | None:
        if _DIGEST.match(reference):
            path = self._blob_path(reference)
            return self._read(path, MAX_MANIFEST) if path.is_file() else None
        for entry in self._index().get("manifests", []):
            if (entry.get("annotations") or {}).get(REF_NAME) == reference:
                path = self._blob_path(entry.get("digest"))
                return self._read(path, MAX_MANIFEST) if path.is_file() else None
        return None

    def put_manifest(self, manifest: bytes, tags: list[str]) -> None:
        self.put_blob(manifest)
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".eksinf.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            index = self._index()
            kept = [
                m
                for m in index.get("manifests", [])
                if (m.get("annotations") or {}).get(REF_NAME) not in tags
            ]
            digest = oci_digest(manifest)
            for tag in tags:
                kept.append(
                    {
                        "mediaType": MANIFEST_MEDIA_TYPE,
                        "artifactType": ARTIFACT_TYPE,
                        "digest": digest,
                        "size": len(manifest),
                        "annotations": {REF_NAME: tag},
                    }
                )
            kept.sort(key=lambda m: str((m.get("annotations") or {}).get(REF_NAME, "")))
            index["manifests"] = kept
            write_file(self.root / "oci-layout", canonical_json({"imageLayoutVersion": "1.0.0"}))
            write_file(self.root / "index.json", canonical_json(index))

    def has_blob(self, digest: str) -> bool:
        return self._blob_path(digest).is_file()

    def put_blob(self, data: bytes) -> None:
        path = self._blob_path(oci_digest(data))
        if not path.is_file():
            write_file(path, data)

    def get_blob(self, digest: str, size: int) -> bytes:
        path = self._blob_path(digest)
        if not path.is_file():
            raise EksinfError(
                f"{self.name}: blob {digest} is missing",
                hint="The layout is incomplete; push again.",
                exit_code=FAILURE,
            )
        return self._read(path, size)

    def tags(self) -> list[str]:
        if not (self.root / "index.json").is_file():
            raise _no_repository(f"oci-layout:{self.root}")
        return sorted(
            str((m.get("annotations") or {}).get(REF_NAME))
            for m in self._index().get("manifests", [])
            if (m.get("annotations") or {}).get(REF_NAME)
        )


class NoRepository(EksinfError):
    """The registry or layout holds no repository by that name (nothing was pushed there)."""


def _no_repository(where: str) -> EksinfError:
    return NoRepository(
        f"no repository {where}",
        hint="Check the spelling: each component is pushed to <base>/<component> "
        "(`eksinf push` prints the references it wrote).",
        exit_code=FAILURE,
    )


def open_store(ref: Ref) -> Store:
    return LayoutStore(ref) if ref.kind == "layout" else RegistryStore(ref)


# ---- operations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PushResult:
    ref: str  # repository, without tag
    manifest_digest: str
    layer_digest: str
    unchanged: bool
    tags: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "manifestDigest": self.manifest_digest,
            "layerDigest": self.layer_digest,
            "unchanged": self.unchanged,
            "tags": list(self.tags),
        }


@dataclass(frozen=True)
class Pulled:
    blob: bytes
    manifest_digest: str
    annotations: dict[str, str]
    title: str


def push(
    ref: str, blob: bytes, *, title: str, annotations: dict[str, str], tags: list[str]
) -> PushResult:
    """Publish `blob` as a one-layer bundle under every tag, verifying what was written."""
    target = parse_ref(ref)
    if target.digest:
        raise _bad_ref(ref, "push to a repository or tag, not a digest")
    tags = sorted(set(tags) | ({target.tag} if target.tag else set()))
    if not tags:
        raise _bad_ref(ref, "no tag to push")
    for tag in tags:
        if not _TAG.match(tag):
            raise _bad_ref(f"{target.base}:{tag}", f"{tag!r} is not a valid tag")
    store = open_store(target)
    layer_digest = oci_digest(blob)
    manifest = build_manifest(blob, title, annotations)
    existing: dict[str, bytes | None] = {tag: store.get_manifest(tag) for tag in tags}
    # An immutable tag that already holds this content keeps its manifest (and so the
    # provenance of the push that created it); one that holds other content is never moved.
    held_first: bytes | None = None
    for tag in tags:
        held = existing[tag]
        if tag in MUTABLE_TAGS or held is None:
            continue
        layer = bundle_layer(held, f"{target.base}:{tag}")
        if layer.get("digest") != layer_digest:
            raise EksinfError(
                f"{target.base}:{tag} already holds different content "
                f"({layer.get('digest')}, pushing {layer_digest}); tag {tag} is immutable",
                hint="Publish under a new version tag; only `latest` moves.",
                exit_code=FAILURE,
            )
        held_first = held_first or held
    manifest = held_first or manifest
    manifest_digest = oci_digest(manifest)
    stale = [
        tag
        for tag in tags
        if (held := existing[tag]) is None
        or (tag in MUTABLE_TAGS and oci_digest(held) != manifest_digest)
    ]
    if stale:
        for data in (EMPTY_CONFIG, blob):
            if not store.has_blob(oci_digest(data)):
                store.put_blob(data)
        store.put_manifest(manifest, stale)
    _verify_pushed(store, target, tags, manifest, stale, layer_digest, title)
    return PushResult(target.base, manifest_digest, layer_digest, not stale, tuple(tags))


def _verify_pushed(
    store: Store,
    target: Ref,
    tags: list[str],
    manifest: bytes,
    written: list[str],
    layer_digest: str,
    title: str,
) -> None:
    """Read every tag back: each names our layer by title and digest; written tags are ours."""
    manifest_digest = oci_digest(manifest)
    for tag in tags:
        where = f"{target.base}:{tag}"
        fetched = store.get_manifest(tag)
        if fetched is None or (tag in written and oci_digest(fetched) != manifest_digest):
            raise EksinfError(
                f"{where}: after the push the tag does not resolve to {manifest_digest}",
                hint="Another writer may have moved the tag; push again.",
                exit_code=FAILURE,
            )
        layer = bundle_layer(fetched, where)
        got_title = (layer.get("annotations") or {}).get(TITLE)
        if got_title != title or layer.get("digest") != layer_digest:
            raise EksinfError(
                f"{where}: the layer reads back as {got_title!r} {layer.get('digest')}, "
                f"expected {title!r} {layer_digest}",
                exit_code=FAILURE,
            )


def pull(ref: str, *, expect_digest: str | None = None) -> Pulled:
    """Fetch a bundle and verify its manifest digest (if pinned) and its layer digest."""
    source = parse_ref(ref)
    if expect_digest is not None and not _DIGEST.match(expect_digest):
        raise _bad_ref(expect_digest, "expected digest must be sha256:<64 hex>")
    store = open_store(source)
    manifest = store.get_manifest(source.reference)
    if manifest is None:
        raise EksinfError(
            f"{source} not found",
            hint=f"List what exists with `{shell_command('eksinf', 'tags', source.base)}`, "
            "or push it first.",
            exit_code=FAILURE,
        )
    manifest_digest = oci_digest(manifest)
    for wanted in filter(None, (source.digest, expect_digest)):
        if manifest_digest != wanted:
            raise EksinfError(
                f"{source}: manifest digest is {manifest_digest}, expected {wanted}",
                hint="The artifact changed since the digest was recorded; do not trust it "
                "until you know why.",
                exit_code=FAILURE,
            )
    layer = bundle_layer(manifest, str(source))
    annotations = manifest_annotations(manifest, str(source))
    blob = store.get_blob(layer["digest"], layer["size"])
    if oci_digest(blob) != layer["digest"] or len(blob) != layer["size"]:
        raise EksinfError(
            f"{source}: layer content does not match its digest {layer['digest']}",
            hint="The registry returned corrupt data; pull again.",
            exit_code=FAILURE,
        )
    title = (layer.get("annotations") or {}).get(TITLE, "")
    return Pulled(blob, manifest_digest, annotations, title)


def list_tags(ref: str, *, missing_ok: bool = False) -> list[str]:
    """The repository's tags; with missing_ok, none for a repository nothing was pushed to."""
    try:
        return open_store(parse_ref(ref)).tags()
    except NoRepository:
        if missing_ok:
            return []
        raise
