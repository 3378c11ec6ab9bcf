"""Local files: the stack lock is the user's own, inputs are regular files
that exist once, and a write the disk refuses is exit 4 with the output as it was. Through the
CLI, with the stack, a decoy folder and the cache fingerprinted before and after."""

from __future__ import annotations

import errno
import os
import signal
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from safety import fingerprint

from eksinf.core import outdir, stacklock
from eksinf.errors import CONTRACT, ENVIRONMENT
from eksinf.publish.bundle import bundle_bytes
from eksinf.publish.oci import push

UNIT = "render/aws-network/network.yaml"
PROFILE = "render/platform-profile/profile.yaml"


@pytest.fixture
def world(stack_dir: Path, tmp_path: Path, chart_mirror: Path, monkeypatch: pytest.MonkeyPatch):
    """(stack, decoy, snapshot): a decoy folder holding a key, and a function that fingerprints
    the stack, the decoy and the cache."""
    monkeypatch.setenv("EKSINF_CHART_MIRROR", str(chart_mirror))
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "id_rsa").write_text("PRIVATE KEY\n")
    cache = Path(os.environ["EKSINF_CACHE_DIR"])
    return stack_dir, decoy, lambda: fingerprint(stack_dir, decoy, cache)


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail instead of hanging (a FIFO opened for reading waits for a writer)."""

    def hung(_signum, _frame):
        raise AssertionError(f"still running after {seconds}s: eksinf waited on the input")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# ---- the stack lock ------------------------------------------------------------------------


def test_a_linked_lock_file_is_refused_and_its_target_kept(world, eksinf, tmp_path, monkeypatch):
    stack, decoy, snapshot = world
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    lock = stacklock.lock_path(stack)
    lock.parent.mkdir(parents=True, mode=0o700)
    lock.symlink_to(decoy / "id_rsa")
    before = snapshot()
    result = eksinf("verify", cwd=stack)
    assert result.code == ENVIRONMENT, result.err
    assert f"the stack lock's file {lock} is a symbolic link" in result.err
    assert snapshot() == before and os.readlink(lock) == str(decoy / "id_rsa")


@pytest.mark.parametrize("mode", [0o777, 0o750])
def test_a_lock_folder_others_may_use_is_refused(world, eksinf, tmp_path, monkeypatch, mode):
    stack, _, snapshot = world
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    folder = stacklock.lock_path(stack).parent
    folder.mkdir(parents=True)
    os.chmod(folder, mode)
    before = snapshot()
    result = eksinf("verify", cwd=stack)
    assert result.code == ENVIRONMENT, result.err
    assert f"the stack lock's folder {folder} is open to other users (mode {mode:o})" in result.err
    assert snapshot() == before and list(folder.iterdir()) == []


def test_a_lock_folder_of_another_user_is_refused(world, eksinf, tmp_path, monkeypatch):
    """Stub: no second user exists here, so eksinf is told it runs as another uid."""
    stack, _, _ = world
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    stacklock.lock_path(stack).parent.mkdir(parents=True, mode=0o700)
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
    result = eksinf("verify", cwd=stack)
    assert result.code == ENVIRONMENT, result.err
    assert f"belongs to uid {os.getuid()}, not to you" in result.err


# ---- inputs are regular files that exist once ----------------------------------------------


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _device(path: Path) -> None:
    path.unlink()
    os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers


@pytest.mark.parametrize(("make", "kind"), [(_fifo, "a FIFO (named pipe)"), (_device, "a device")])
@pytest.mark.parametrize(
    ("command", "where"),
    [("render", UNIT), ("verify", "configs/aws-network/network.yaml"), ("lint", UNIT)],
)
def test_a_fifo_or_device_input_is_refused_without_waiting(
    world, eksinf, make, kind, command, where
):
    stack, _, snapshot = world
    assert eksinf(command, cwd=stack).code == 0  # the cache warm, so a refusal changes nothing
    make(stack / where)
    before = snapshot()
    with deadline(60):
        result = eksinf(command, cwd=stack)
    assert result.code == CONTRACT, result.err
    assert f"{where}: is {kind}; eksinf reads only regular files" in result.err
    assert snapshot() == before


@pytest.mark.parametrize(
    ("command", "where"),
    [
        ("render", UNIT),
        ("verify", UNIT),
        ("lint", UNIT),
        ("bundle", "configs/aws-network/network.yaml"),
    ],
)
def test_a_hard_linked_input_is_refused(world, eksinf, command, where):
    """A hard link makes a file outside the stack (here the decoy's key) part of it."""
    stack, decoy, snapshot = world
    assert eksinf(command, cwd=stack).code == 0  # the cache warm, so a refusal changes nothing
    (stack / where).unlink()
    os.link(decoy / "id_rsa", stack / where)
    before = snapshot()
    result = eksinf(command, cwd=stack)
    assert result.code == CONTRACT, result.err
    assert f"{where}: has 2 hard links" in result.err
    assert "PRIVATE KEY" not in result.out + result.err
    assert snapshot() == before


# ---- a refused write is exit 4, with the output as it was ----------------------------------


def _fail_on(monkeypatch, owner, name: str, err: int, after: int = 0, when=None) -> None:
    """`owner.name` raises OSError(err) from its (after+1)th call on (of those `when` accepts):
    what a full disk, a read-only remount or a denied operation does mid-write."""
    real = getattr(owner, name)
    calls = {"n": 0}

    def failing(*args, **kwargs):
        if when is not None and not when(*args, **kwargs):
            return real(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] > after:
            raise OSError(err, os.strerror(err))
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, failing)


def _layout(tmp_path: Path) -> str:
    layout = tmp_path / "layout"
    push(
        f"oci-layout:{layout}",
        bundle_bytes({"u.yaml": b"kind: A\n"}),
        title="x.tar.gz",
        annotations={},
        tags=["v1"],
    )
    return f"oci-layout:{layout}:v1"


def _no_swap_left(folder: Path) -> None:
    parent, name = folder.parent, folder.name
    assert not os.path.lexists(parent / f".{name}.new")
    assert not os.path.lexists(parent / f".{name}.old")
    assert not os.path.lexists(folder / outdir.SWAP_MARKER)


def test_a_full_disk_during_render_leaves_configs_whole(world, eksinf, monkeypatch):
    stack, _, snapshot = world
    assert eksinf("render", cwd=stack).code == 0  # the cache warm
    # a unit edited by hand, so the render must rebuild configs/ (one already in sync is left
    # as it is, and writes nothing that could fail)
    unit = sorted((stack / "configs" / "argocd").glob("*.yaml"))[0]
    unit.write_text(unit.read_text() + "# edited by hand\n")
    before = snapshot()
    _fail_on(monkeypatch, Path, "write_text", errno.ENOSPC, after=5)
    result = eksinf("render", cwd=stack)
    assert result.code == ENVIRONMENT, result.err
    assert f"cannot write {stack / 'configs'}: the disk is full" in result.err
    assert "Nothing was half-written" in result.err
    assert "Traceback" not in result.err
    assert snapshot() == before
    _no_swap_left(stack / "configs")


@pytest.mark.parametrize(
    ("err", "why"),
    [(errno.EROFS, "the filesystem is read-only"), (errno.EPERM, "the operation is not permitted")],
)
def test_a_refused_swap_during_pull_leaves_the_output_whole(
    world, eksinf, tmp_path, monkeypatch, err, why
):
    stack, _, snapshot = world
    ref = _layout(tmp_path)
    out = tmp_path / "out"
    assert eksinf("pull", ref, "--out", str(out), cwd=stack).code == 0
    (out / "mine-later.yaml").write_text("kind: B\n")  # so a replaced tree would show
    before, kept = snapshot(), fingerprint(out)
    _fail_on(monkeypatch, outdir, "_exchange", err)
    result = eksinf("pull", ref, "--out", str(out), cwd=stack)
    assert result.code == ENVIRONMENT, result.err
    assert f"cannot write {out}: {why}" in result.err
    assert snapshot() == before and fingerprint(out) == kept
    _no_swap_left(out)


def test_a_read_only_folder_for_links_resolve_is_exit_4(world, eksinf, tmp_path, monkeypatch):
    stack, _, snapshot = world
    out = tmp_path / "resolved"
    args = ("links", "resolve", "--profile", PROFILE, "--out")
    assert eksinf(*args, str(tmp_path / "warm"), cwd=stack).code == 0  # the cache warm
    before = snapshot()
    _fail_on(monkeypatch, os, "mkdir", errno.EROFS)
    result = eksinf(*args, str(out), cwd=stack)
    assert result.code == ENVIRONMENT, result.err
    assert "the filesystem is read-only" in result.err and "Traceback" not in result.err
    assert snapshot() == before and not os.path.lexists(out)
    _no_swap_left(out)


def test_a_full_disk_while_unpacking_is_exit_4(world, eksinf, tmp_path, monkeypatch):
    stack, _, snapshot = world
    ref = _layout(tmp_path)
    out = tmp_path / "out"
    before = snapshot()
    _fail_on(monkeypatch, os, "fdopen", errno.ENOSPC, when=lambda _fd, mode="r", *a: "w" in mode)
    result = eksinf("pull", ref, "--out", str(out), cwd=stack)
    assert result.code == ENVIRONMENT, result.err
    assert f"cannot write {out}: the disk is full" in result.err
    assert snapshot() == before and not os.path.lexists(out)
    _no_swap_left(out)
