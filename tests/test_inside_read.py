"""inside.read_bytes: a file's bytes, whole, up to the size limit; over it, an input error. A
file read as it grows (larger than fstat said) is read on to the limit, never cut short."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eksinf.core import inside
from eksinf.errors import CONTRACT, EksinfError


def test_a_file_is_read_whole(tmp_path: Path):
    for size in (0, 1, 4095, 4096, 70_000):
        path = tmp_path / f"f{size}"
        path.write_bytes(bytes(i % 251 for i in range(size)))
        assert inside.read_bytes(path, tmp_path) == path.read_bytes()


def test_a_file_the_system_hands_over_in_pieces_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A read may return fewer bytes than asked for before the end of the file."""
    path = tmp_path / "f"
    path.write_bytes(bytes(range(256)) * 40)
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, size: real_read(fd, min(size, 7)))
    assert inside.read_bytes(path, tmp_path) == bytes(range(256)) * 40


def test_a_folder_is_not_read(tmp_path: Path):
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError) as err:
        inside.read_bytes(tmp_path / "d", tmp_path)
    assert err.value.filename == str(tmp_path / "d")


def test_a_file_over_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(inside, "MAX_FILE_BYTES", 100)
    (tmp_path / "ok").write_bytes(b"x" * 100)
    (tmp_path / "big").write_bytes(b"x" * 101)
    assert inside.read_bytes(tmp_path / "ok", tmp_path) == b"x" * 100
    with pytest.raises(EksinfError) as err:
        inside.read_bytes(tmp_path / "big", tmp_path)
    assert err.value.exit_code == CONTRACT
    assert "101 bytes, over the" in err.value.message


@pytest.mark.parametrize(("size", "limit"), [(150, 1000), (1001, 1000)])
def test_a_file_larger_than_fstat_said_is_read_on_to_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int, limit: int
):
    """As if the file grew between fstat and the read: fstat reports 10 bytes."""
    path = tmp_path / "growing"
    path.write_bytes(b"y" * size)
    real_fstat = os.fstat

    def stale_fstat(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        return os.stat_result((st.st_mode, *st[1:6], 10, *st[7:10]))

    monkeypatch.setattr(inside, "MAX_FILE_BYTES", limit)
    monkeypatch.setattr(os, "fstat", stale_fstat)
    if size <= limit:
        assert inside.read_bytes(path, tmp_path) == b"y" * size
    else:
        with pytest.raises(EksinfError, match=f"{limit + 1} bytes, over the"):
            inside.read_bytes(path, tmp_path)
