"""Shared fixtures: the real services tests run against, and a way to call the CLI in-process.

- `registry`: Debian's docker-registry (CNCF distribution) on a free 127.0.0.1 port.
- `moto_endpoint`: moto's HTTP server on a free 127.0.0.1 port; boto3 reaches it through the
  session factory via EKSINF_AWS_ENDPOINT_URL.
- `kube_plane`: a real kube-apiserver (v1.31, ../shared/tools) and etcd on 127.0.0.1, shared by
  the session, with static tokens for an admin, a user with no RBAC bindings, and none (401).
- `stack_dir`: a private copy of this repository's stack, safe to break.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

REPO = Path(__file__).resolve().parent.parent
MIRROR = REPO.parent / "shared" / "charts"
TOOL_MIRROR = REPO.parent / "shared" / "tools"
STACK_FILES = ("components.yaml", "versions.env", "charts.lock", "aws-objects.lock")
STACK_DIRS = ("render", "configs", "iam")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never read or write the user's chart cache, nor its HMAC key. The CRDs a target cluster provides
    (components.yaml `clusterCRDs`, which `validate` and every publish read) are resolved once
    from the offline mirror into the session's cache, through the same pinned-manifest path a
    machine takes on its first run with a mirror; without it they would come from the network."""
    os.environ["EKSINF_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    os.environ["EKSINF_CACHE_KEY"] = str(tmp_path_factory.mktemp("cache-key") / "cache.key")
    os.environ.pop("EKSINF_CHART_MIRROR", None)
    from eksinf.build import manifests
    from eksinf.model.stack import load_stack

    stack = load_stack(REPO)
    for spec in (s for c in stack.components for s in c.cluster_crds):
        manifests.resolve(stack, spec, MIRROR.parent / "manifests")


@pytest.fixture(autouse=True)
def _cache_switch_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    """`verify --full` switches the derived-data cache off for the rest of its process; tests
    run commands in-process, so each test starts with the switch as a new process has it."""
    from eksinf.core import cache

    monkeypatch.setattr(cache, "_off", False)


@pytest.fixture(scope="session")
def chart_mirror() -> Path:
    if not MIRROR.is_dir():
        pytest.fail(f"chart mirror {MIRROR} is missing: clone the repo beside ../shared")
    return MIRROR


@contextmanager
def start_registry(root: Path, extra_config: str = "", ready_status: int = 200) -> Iterator[str]:
    """Run docker-registry on a free 127.0.0.1 port with its data and log under `root`; yields
    "127.0.0.1:PORT" once /v2/ answers `ready_status` (401 for a registry with auth). Fails
    (never skips) when docker-registry is missing."""
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.fail("docker-registry is not installed: run `bash .ci/setup`")
    port = free_port()
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: error, accesslog: {disabled: true}}\n"
        f"storage: {{filesystem: {{rootdirectory: {root / 'data'}}}, delete: {{enabled: true}}}}\n"
        f"http: {{addr: 127.0.0.1:{port}}}\n"
        "health: {storagedriver: {enabled: false}}\n" + extra_config
    )
    log = (root / "registry.log").open("w")
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=log)
    host = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    try:
        while True:
            try:
                if requests.get(f"http://{host}/v2/", timeout=1).status_code == ready_status:
                    break
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail(f"docker-registry did not start: {(root / 'registry.log').read_text()}")
            time.sleep(0.05)
        yield host
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory):
    """A real OCI registry on 127.0.0.1, shared by the session."""
    with start_registry(tmp_path_factory.mktemp("registry")) as host:
        yield host


@pytest.fixture(scope="session")
def moto_endpoint():
    """moto's HTTP server on 127.0.0.1; returns its endpoint URL."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port())
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def control_plane():
    """A real Kubernetes control plane (etcd + kube-apiserver) on 127.0.0.1, for a fixture to
    yield from. In CI (EKSINF_REQUIRE_KUBE=1, set by .ci/run) a missing binary or etcd fails the
    test; elsewhere it is a named skip."""
    from eksinf.errors import EksinfError
    from eksinf.kube import localplane

    try:
        with localplane.running(TOOL_MIRROR) as plane:
            yield plane
    except EksinfError as exc:
        if os.environ.get("EKSINF_REQUIRE_KUBE") == "1":
            pytest.fail(f"the local control plane did not start: {exc} ({exc.hint})")
        pytest.skip(f"no local control plane: {exc}")


@pytest.fixture(scope="session")
def kube_plane():
    """One control plane shared by the whole session."""
    yield from control_plane()


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel of this checkout, built once per session: offline (setuptools from the dev extra,
    no build isolation) and from a copy, so the build's own build/ folder stays out of the repo."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE", *STACK_FILES):
        shutil.copy2(REPO / name, source / name)
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("src", *STACK_DIRS):
        shutil.copytree(REPO / name, source / name, ignore=skip)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(work / "dist"), str(source)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (found,) = (work / "dist").glob("eksinf-*.whl")
    return found


@pytest.fixture
def aws_env(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point every boto3 client eksinf makes at moto, with dummy credentials, and reset moto."""
    requests.post(f"{moto_endpoint}/moto-api/reset", timeout=10)
    monkeypatch.setenv("EKSINF_AWS_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    return moto_endpoint


@pytest.fixture
def stack_dir(tmp_path: Path) -> Path:
    """A copy of the repository's stack (sources and committed configs) in a temp dir."""
    dest = tmp_path / "stack"
    dest.mkdir()
    for name in STACK_FILES:
        if (REPO / name).exists():
            shutil.copy2(REPO / name, dest / name)
    for name in STACK_DIRS:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, dest / name)
    return dest


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def eksinf(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch):
    """Run `eksinf ARGS` in-process in a directory; returns exit code, stdout and stderr."""
    from eksinf.cli import run

    def invoke(*args: str, cwd: Path | None = None) -> CliResult:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = run(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return invoke


@pytest.fixture
def local_hub(tmp_path: Path):
    """A fresh embedded hub (SQLite file in a temp dir)."""
    from eksinf.hub.local import LocalHub

    hub = LocalHub(tmp_path / "hub" / "hub.db")
    yield hub
    hub.close()
