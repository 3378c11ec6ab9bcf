"""write_tree: a folder that already holds exactly the files is left as it is; anything else in
it (a changed byte, a file or folder more or less, a link) gets the whole rebuild."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eksinf.core.outdir import MARKER, MARKER_TEXT, SWAP_MARKER, Owned, write_tree

FILES = {"a/one.yaml": "kind: A\n", "a/b/two.yaml": "kind: B\n", "top.json": "{}\n"}


def tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*") if p.is_file()}


def stamps(root: Path) -> dict[str, tuple[int, int]]:
    return {
        p.relative_to(root).as_posix(): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in root.rglob("*")
    }


@pytest.mark.parametrize("marker", [False, True])
def test_an_unchanged_tree_is_not_rewritten(tmp_path, marker):
    owned = Owned(tmp_path / "out", marker)
    write_tree(owned, FILES)
    before = stamps(owned.path)
    write_tree(owned, FILES)
    assert stamps(owned.path) == before  # no file or folder made again
    expected = {**FILES, **({MARKER: MARKER_TEXT} if marker else {})}
    assert tree(owned.path) == expected


def test_a_leftover_swap_folder_is_cleaned_up_even_when_nothing_changed(tmp_path):
    owned = Owned(tmp_path / "out", False)
    write_tree(owned, FILES)
    leftover = tmp_path / ".out.new"  # what a crash after the swap leaves: the old tree, marked
    leftover.mkdir()
    (leftover / SWAP_MARKER).write_text("x")
    write_tree(owned, FILES)
    assert not leftover.exists()
    assert tree(owned.path) == FILES


def change_byte(root: Path) -> None:
    (root / "top.json").write_text("{ }\n")


def add_file(root: Path) -> None:
    (root / "a/stale.yaml").write_text("kind: Stale\n")


def add_folder(root: Path) -> None:
    (root / "a/empty").mkdir()


def remove_file(root: Path) -> None:
    (root / "a/b/two.yaml").unlink()


def add_link(root: Path) -> None:
    os.symlink(root / "top.json", root / "a/link.json")


def add_second_name(root: Path) -> None:
    os.link(root / "top.json", root.parent / "elsewhere.json")


@pytest.mark.parametrize(
    "edit", [change_byte, add_file, add_folder, remove_file, add_link, add_second_name]
)
def test_anything_else_gets_the_whole_rebuild(tmp_path, edit):
    owned = Owned(tmp_path / "out", False)
    write_tree(owned, FILES)
    edit(owned.path)
    write_tree(owned, FILES)
    assert tree(owned.path) == FILES
    assert sorted(p.relative_to(owned.path).as_posix() for p in owned.path.rglob("*")) == [
        "a",
        "a/b",
        "a/b/two.yaml",
        "a/one.yaml",
        "top.json",
    ]
    assert (owned.path / "top.json").stat().st_nlink == 1
