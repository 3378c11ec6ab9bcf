"""Environment failures are errors, not tracebacks: a broken, locked or read-only
hub.db, an unusable cache folder and a concurrent run on the same stack each give exit 4 naming
the path and what to do, and leave the stack as it was."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from safety import fingerprint

from eksinf.core.stacklock import lock_path
from eksinf.errors import ENVIRONMENT

RUN = "import sys; from eksinf.cli import run; sys.exit(run(sys.argv[1:]))"


@pytest.fixture
def hub_db(stack_dir: Path, eksinf) -> Path:
    """A stack whose local hub holds the bases."""
    assert eksinf("install", cwd=stack_dir).code == 0
    return stack_dir / ".eksinf" / "hub.db"


def refused(result, *needles: str) -> None:
    assert result.code == ENVIRONMENT, (result.code, result.err)
    assert "Traceback" not in result.err
    for needle in needles:
        assert needle in result.err, result.err


def test_a_zero_byte_hub_is_refused_not_recreated(stack_dir, eksinf, tmp_path):
    db = stack_dir / ".eksinf" / "hub.db"
    db.parent.mkdir()
    db.touch()
    before = fingerprint(tmp_path)
    for args in (("hub", "spaces"), ("install",)):
        result = eksinf(*args, cwd=stack_dir)
        refused(result, f"hub database {db} is an empty file (0 bytes)", "move it aside")
    assert db.stat().st_size == 0
    assert fingerprint(tmp_path) == before


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_corrupt_hub_is_an_environment_error(hub_db, eksinf, tmp_path, damage):
    with sqlite3.connect(hub_db) as db:  # fold the WAL in, so the file alone is the hub
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = hub_db.read_bytes()
    hub_db.write_bytes(data[:3000] if damage == "truncated" else b"\x00garbage" * 512)
    for side in ("hub.db-wal", "hub.db-shm"):
        (hub_db.parent / side).unlink(missing_ok=True)
    before = fingerprint(tmp_path)
    result = eksinf("hub", "spaces", cwd=hub_db.parent.parent)
    what = "corrupt or truncated" if damage == "truncated" else "not an SQLite database"
    refused(result, f"hub database {hub_db} is {what}")
    assert fingerprint(tmp_path) == before


def test_a_locked_hub_is_an_environment_error(hub_db, eksinf, monkeypatch):
    monkeypatch.setenv("EKSINF_LOCK_TIMEOUT", "0")
    holder = sqlite3.connect(hub_db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        result = eksinf(
            "hub", "create-variant", "dev", "aws-network-base", cwd=hub_db.parent.parent
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    refused(result, f"hub database {hub_db} is locked by another process", "EKSINF_LOCK_TIMEOUT")


def test_a_read_only_hub_is_an_environment_error_for_a_non_root_user(hub_db, eksinf):
    # root writes anywhere, so the user without write access is real: nobody, via setpriv
    shared = Path(tempfile.mkdtemp(prefix="eksinf-ro-"))
    try:
        shared.chmod(0o755)
        stack = shared / "stack"
        shutil.copytree(hub_db.parent.parent, stack)
        for path in [stack, *stack.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        before = fingerprint(stack)
        env = {**os.environ, "HOME": str(shared), "EKSINF_CACHE_DIR": str(shared / "cache")}
        args = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
        for command in (["hub", "spaces"], ["hub", "create-variant", "dev", "aws-network-base"]):
            done = subprocess.run(
                [*args, "-c", RUN, "--stack", str(stack), *command],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == ENVIRONMENT, (command, done.stdout, done.stderr)
            assert "Traceback" not in done.stderr
            assert f"{stack / '.eksinf'}" in done.stderr
            assert "writable" in done.stderr
        assert fingerprint(stack) == before
    finally:
        shutil.rmtree(shared)


def test_an_unusable_cache_folder_names_it_and_the_variable(
    stack_dir, eksinf, tmp_path, monkeypatch, chart_mirror
):
    home = tmp_path / "home-is-a-file"
    home.write_text("not a folder\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("EKSINF_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("EKSINF_CHART_MIRROR", str(chart_mirror))
    before = fingerprint(tmp_path)
    for command in ("verify", "render"):
        result = eksinf(command, cwd=stack_dir)
        refused(result, f"cannot use the cache {home}/.cache/eksinf/charts", "EKSINF_CACHE_DIR")
    assert fingerprint(tmp_path) == before


def _hold_lock(stack: Path) -> subprocess.Popen:
    """Another process holding the stack's lock until its stdin closes."""
    code = (
        "import fcntl, os, sys\n"
        f"fd = os.open({str(lock_path(stack))!r}, os.O_RDWR | os.O_CREAT, 0o600)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "os.ftruncate(fd, 0); os.write(fd, b'pid 4242: eksinf sandbox up')\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    lock_path(stack).parent.mkdir(mode=0o700, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline() == "held\n"
    return proc


def test_a_second_run_on_a_busy_stack_says_who_and_exits_4(
    stack_dir, eksinf, tmp_path, monkeypatch, chart_mirror
):
    monkeypatch.setenv("EKSINF_LOCK_TIMEOUT", "0")
    monkeypatch.setenv("EKSINF_CHART_MIRROR", str(chart_mirror))
    holder = _hold_lock(stack_dir)
    try:
        before = fingerprint(tmp_path)
        for command in (("render",), ("verify",), ("sandbox", "up")):
            result = eksinf(*command, cwd=stack_dir)
            refused(result, f"stack {stack_dir.resolve()} is busy: pid 4242: eksinf sandbox up")
        assert fingerprint(tmp_path) == before
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert eksinf("verify", cwd=stack_dir).code == 0  # free again


def test_concurrent_renders_never_mix_configs(stack_dir, chart_mirror, tmp_path):
    env = {**os.environ, "EKSINF_CHART_MIRROR": str(chart_mirror)}
    before = fingerprint(stack_dir / "configs")
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", RUN, "render"],
            cwd=stack_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [(p.wait(timeout=600), p.stderr.read()) for p in runs]
    for code, err in results:
        assert code == 0 and "Traceback" not in err, err
    assert sum("waiting for pid" in err for _, err in results) <= 1
    assert fingerprint(stack_dir / "configs") == before
    assert sorted(p.name for p in stack_dir.iterdir() if p.name.startswith(".configs")) == []
