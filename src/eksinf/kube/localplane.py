"""An ephemeral Kubernetes control plane on loopback: etcd and a real kube-apiserver.

`eksinf validate --server local` and the tests use it to have the API server itself admit units:
CRD schemas, CEL rules and the built-in kinds' semantic validation, exactly as a cluster of the
pinned minor would. Nothing reconciles on it (no controllers, nodes or pods); objects are
admitted, stored and served, and RBAC is real.

The kube-apiserver binary is found the way chart archives are: `EKSINF_KUBE_APISERVER` (a path),
else the tool mirror (`EKSINF_TOOL_MIRROR`, else `tools/` beside the chart mirror), whose
xz archive is checked against the mirror's SHA256SUMS, unpacked once into the cache, and checked
again by the digest of the binary before every start (a cached binary is code: it is never
trusted by its name). etcd comes from the system (Debian's `etcd-server`).
"""

from __future__ import annotations

import contextlib
import hashlib
import lzma
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from eksinf.core import cache
from eksinf.core.atomic import write_file
from eksinf.core.types import Doc
from eksinf.model import config

from ..errors import ENVIRONMENT, EksinfError

# The pinned server: the stack's Kubernetes minor (versions.env RENDER_KUBE_VERSION is 1.31).
APISERVER_VERSION = "v1.31.14"
APISERVER_ARCHIVE = f"kube-apiserver-{APISERVER_VERSION}-linux-amd64.xz"
APISERVER_SHA256 = "7d311fa3500fbb2d33033db760beeddd3a82443cbc5a0d1b5248dd6c126ead02"  # unpacked
APISERVER_ENV = "EKSINF_KUBE_APISERVER"
TOOL_MIRROR_ENV = "EKSINF_TOOL_MIRROR"
MAX_BINARY_BYTES = 256 << 20  # the unpacked server is 108 MB
START_TIMEOUT = 60.0  # seconds until /readyz answers; a few seconds on a 2-core machine

# Static tokens: an administrator, a user with no RBAC bindings (403 everywhere), and a token
# the server does not know (401). Client certificates signed by the plane's own client CA
# (`LocalPlane.client_cert`) authenticate too.
ADMIN_USER = "eksinf-admin"
NO_RIGHTS_USER = "eksinf-nobody"


def tool_mirror() -> Path | None:
    """EKSINF_TOOL_MIRROR, else `tools/` beside the chart mirror (the one mirror setting:
    --chart-mirror, $EKSINF_CHART_MIRROR, .eksinf/config.yaml, ../shared/charts)."""
    env = os.environ.get(TOOL_MIRROR_ENV)
    if env:
        return Path(env)
    charts = config.mirror()
    return charts.parent / "tools" if charts is not None else None


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _missing(what: str) -> EksinfError:
    return EksinfError(
        f"no kube-apiserver {APISERVER_VERSION}: {what}",
        hint=f"Set {APISERVER_ENV} to a kube-apiserver binary, or {TOOL_MIRROR_ENV} to a folder "
        f"holding {APISERVER_ARCHIVE} and its SHA256SUMS (the offline tool mirror).",
        exit_code=ENVIRONMENT,
    )


def apiserver_binary(mirror: Path | None = None) -> Path:
    """The checked kube-apiserver binary (see the module docstring for where it comes from)."""
    explicit = os.environ.get(APISERVER_ENV)
    if explicit:
        path = Path(explicit)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise _missing(f"{APISERVER_ENV}={explicit} is not an executable file")
        return path
    target = cache.root() / "tools" / f"kube-apiserver-{APISERVER_SHA256[:16]}"
    if target.is_file() and _sha256_file(target) == APISERVER_SHA256:
        return target
    mirror = mirror or tool_mirror()
    if mirror is None or not (mirror / APISERVER_ARCHIVE).is_file():
        raise _missing(f"{APISERVER_ARCHIVE} not found in the tool mirror ({mirror})")
    archive = mirror / APISERVER_ARCHIVE
    listed = _listed_sums(mirror).get(APISERVER_ARCHIVE)
    if listed is None or _sha256_file(archive) != listed:
        raise EksinfError(
            f"{archive}: not the archive the mirror's SHA256SUMS lists",
            hint="The mirror copy is damaged or was replaced: restore it.",
            exit_code=ENVIRONMENT,
        )
    with archive.open("rb") as raw, lzma.open(raw) as unpacked:
        data = unpacked.read(MAX_BINARY_BYTES + 1)
    if len(data) > MAX_BINARY_BYTES or hashlib.sha256(data).hexdigest() != APISERVER_SHA256:
        raise EksinfError(
            f"{archive}: unpacks to a binary other than kube-apiserver {APISERVER_VERSION}",
            hint="Restore the tool mirror.",
            exit_code=ENVIRONMENT,
        )
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_file(target, data, mode=0o700)
    return target


def _listed_sums(mirror: Path) -> dict[str, str]:
    sums: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in (mirror / "SHA256SUMS").read_text().splitlines()[:1000]:
            parts = line.split()
            if len(parts) == 2:
                sums[parts[1].lstrip("*")] = parts[0]
    return sums


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class LocalPlane:
    """A running control plane: its URL, CA file and the static tokens it knows."""

    server: str
    ca_file: Path
    admin_token: str
    no_rights_token: str
    folder: Path

    def client_cert(self, user: str, group: str = "system:masters") -> tuple[Path, Path]:
        """A client certificate and key (PEM files in the plane's folder) for `user` in
        `group`, signed by the CA the server trusts for client certificates."""
        stem = self.folder / f"client-{hashlib.sha256(f'{user}/{group}'.encode()).hexdigest()[:12]}"
        cert, key = stem.with_suffix(".crt"), stem.with_suffix(".key")
        if not cert.is_file():
            csr = _openssl(
                "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", str(key), "-subj", f"/O={group}/CN={user}",
            )  # fmt: skip
            stem.with_suffix(".csr").write_bytes(csr)
            _openssl(
                "x509", "-req", "-in", str(stem.with_suffix(".csr")),
                "-CA", str(self.folder / "client-ca.crt"),
                "-CAkey", str(self.folder / "client-ca.key"),
                "-set_serial", str(int.from_bytes(os.urandom(8), "big")),
                "-days", "2", "-out", str(cert),
            )  # fmt: skip
        return cert, key

    def kubeconfig(self, token: str | None = None, name: str = "local") -> Doc:
        """A kubeconfig (as a dict) for this server, as the admin unless `token` is given."""
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": name,
            "clusters": [
                {
                    "name": name,
                    "cluster": {"server": self.server, "certificate-authority": str(self.ca_file)},
                }
            ],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "users": [{"name": name, "user": {"token": token or self.admin_token}}],
        }


def _openssl(*args: str) -> bytes:
    return subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60).stdout


def _wait_ready(plane: LocalPlane, procs: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
    import requests

    direct = requests.Session()
    direct.trust_env = False  # loopback: never through $HTTPS_PROXY (kubectl does not proxy it)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        for proc, log in zip(procs, logs, strict=True):
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-800:]
                raise EksinfError(
                    f"local control plane: {log.stem} exited with {proc.returncode}: {tail}",
                    exit_code=ENVIRONMENT,
                )
        with contextlib.suppress(requests.RequestException):
            resp = direct.get(
                f"{plane.server}/readyz",
                headers={"Authorization": f"Bearer {plane.admin_token}"},
                verify=str(plane.ca_file) if plane.ca_file.is_file() else False,
                timeout=2,
            )
            if resp.status_code == 200:
                return
        time.sleep(0.2)
    raise EksinfError(
        f"local control plane: not ready within {START_TIMEOUT:.0f}s",
        hint=f"See the logs in {plane.folder}.",
        exit_code=ENVIRONMENT,
    )


@contextlib.contextmanager
def running(mirror: Path | None = None) -> Iterator[LocalPlane]:
    """Start etcd and the kube-apiserver on free loopback ports; stop both and remove their
    state on exit, whatever happened."""
    binary = apiserver_binary(mirror)
    etcd, openssl = _plane_tools()
    folder = Path(tempfile.mkdtemp(prefix="eksinf-plane-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        admin, nobody = _credentials(folder, openssl)
        client, peer, secure = _free_port(), _free_port(), _free_port()
        etcd_args = _etcd_args(etcd, folder, client, peer)
        server_args = _server_args(binary, folder, client, secure)
        logs = [folder / "etcd.log", folder / "kube-apiserver.log"]
        for args, log in zip((etcd_args, server_args), logs, strict=True):
            with log.open("wb") as out:
                procs.append(
                    subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=folder)
                )
        plane = LocalPlane(
            server=f"https://127.0.0.1:{secure}",
            ca_file=folder / "certs" / "apiserver.crt",
            admin_token=admin,
            no_rights_token=nobody,
            folder=folder,
        )
        _wait_ready(plane, procs, logs)
        yield plane
    finally:
        _stop(procs)
        shutil.rmtree(folder, ignore_errors=True)


def _plane_tools() -> tuple[str, str]:
    """etcd and openssl from PATH, each named in the error when missing."""
    etcd = shutil.which("etcd")
    if etcd is None:
        raise EksinfError(
            "local control plane: etcd is not installed",
            hint="Install Debian's etcd-server (`apt-get install etcd-server`), or run "
            "`bash .ci/setup`.",
            exit_code=ENVIRONMENT,
        )
    openssl = shutil.which("openssl")
    if openssl is None:
        raise EksinfError(
            "local control plane: openssl is not installed (it makes the service-account key)",
            hint="Install Debian's openssl.",
            exit_code=ENVIRONMENT,
        )
    return etcd, openssl


def _credentials(folder: Path, openssl: str) -> tuple[str, str]:
    """The service-account key, the client CA and a token file in `folder`: the admin's and the
    no-rights user's tokens, returned in that order."""
    subprocess.run(
        [openssl, "genrsa", "-out", str(folder / "sa.key"), "2048"],
        check=True,
        capture_output=True,
    )
    # the CA of client certificates (LocalPlane.client_cert mints them): P-256 is instant
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", str(folder / "client-ca.key"), "-out", str(folder / "client-ca.crt"),
        "-subj", "/CN=eksinf-local-client-ca", "-days", "2",
    )  # fmt: skip
    admin, nobody = os.urandom(16).hex(), os.urandom(16).hex()
    (folder / "tokens.csv").write_text(
        f"{admin},{ADMIN_USER},{ADMIN_USER},system:masters\n"
        f"{nobody},{NO_RIGHTS_USER},{NO_RIGHTS_USER}\n"
    )
    return admin, nobody


def _etcd_args(etcd: str, folder: Path, client: int, peer: int) -> list[str]:
    return [
        etcd,
        "--data-dir", str(folder / "etcd"),
        "--listen-client-urls", f"http://127.0.0.1:{client}",
        "--advertise-client-urls", f"http://127.0.0.1:{client}",
        "--listen-peer-urls", f"http://127.0.0.1:{peer}",
        "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
        "--initial-cluster", f"default=http://127.0.0.1:{peer}",
        "--log-level", "error",
    ]  # fmt: skip


def _server_args(binary: Path, folder: Path, client: int, secure: int) -> list[str]:
    return [
        str(binary),
        "--etcd-servers", f"http://127.0.0.1:{client}",
        "--bind-address", "127.0.0.1",
        "--advertise-address", "127.0.0.1",
        "--secure-port", str(secure),
        "--cert-dir", str(folder / "certs"),
        "--service-account-key-file", str(folder / "sa.key"),
        "--service-account-signing-key-file", str(folder / "sa.key"),
        "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
        "--token-auth-file", str(folder / "tokens.csv"),
        "--client-ca-file", str(folder / "client-ca.crt"),
        "--authorization-mode", "RBAC",
        "--allow-privileged=true",
        "--service-cluster-ip-range", "10.96.0.0/16",
        "--endpoint-reconciler-type", "none",
    ]  # fmt: skip


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Terminate every process, newest first; kill one that does not stop within 10 seconds."""
    for proc in reversed(procs):
        proc.terminate()
    for proc in reversed(procs):
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
