"""Output folders are owned (issue 10): every --out is absent, empty, or eksinf's own from an
earlier write; anything else - the stack, its sources, .git, HOME, `/`, a user's folder - is
refused with exit 2 naming the folder and what is in it, and nothing anywhere changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from safety import fingerprint

from eksinf.bundle import bundle_bytes
from eksinf.errors import USAGE
from eksinf.oci import push
from eksinf.outdir import MARKER

PROFILE = "render/platform-profile/profile.yaml"


@pytest.fixture
def world(stack_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A stack with .git, docs/ and src/ like a clone, a private HOME, and a decoy folder holding
    a key; returns (stack, decoy, layout) where layout is an OCI layout holding one bundle."""
    for name, content in ((".git/HEAD", "ref: refs/heads/main\n"), ("docs/a.md", "# a\n")):
        (stack_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (stack_dir / name).write_text(content)
    (stack_dir / "src" / "pkg").mkdir(parents=True)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    monkeypatch.setenv("HOME", str(home))
    decoy = tmp_path / "decoy"
    (decoy / ".ssh").mkdir(parents=True)
    (decoy / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    layout = tmp_path / "layout"
    blob = bundle_bytes({"u.yaml": b"kind: A\n"})
    push(f"oci-layout:{layout}", blob, title="x.tar.gz", annotations={}, tags=["v1"])
    return stack_dir, decoy, layout


def refused(result, folder: str) -> None:
    assert result.code == USAGE, result.err
    assert f"refusing to replace {folder}" in result.err, result.err


@pytest.mark.parametrize(
    ("out", "why"),
    [
        (".", "it is the stack or a folder holding it"),
        ("..", "it is the stack or a folder holding it"),
        (".git", "inside the stack's .git/"),
        ("render", "inside the stack's render/"),
        ("configs", "inside the stack's committed configs/"),
        ("docs", "inside the stack's docs/"),
    ],
)
def test_pull_out_never_replaces_the_stack(world, eksinf, tmp_path, out, why):
    stack, decoy, layout = world
    before = fingerprint(tmp_path)
    result = eksinf("pull", f"oci-layout:{layout}:v1", "--out", out, cwd=stack)
    refused(result, str(Path(os.path.abspath(stack / out))))
    assert why in result.err
    assert fingerprint(tmp_path) == before


@pytest.mark.parametrize(
    "out", [".git/src", "src", "docs", "render/karpenter", "configs/karpenter", ".eksinf/x"]
)
def test_links_resolve_out_never_lands_in_the_stack(world, eksinf, tmp_path, out):
    stack, _, _ = world
    before = fingerprint(tmp_path)
    result = eksinf("links", "resolve", "--profile", PROFILE, "--out", out, cwd=stack)
    refused(result, str(stack / out))
    assert fingerprint(tmp_path) == before


@pytest.mark.parametrize("out", ["docs", "src", ".git", "/"])
def test_render_out_refuses_before_rendering(world, eksinf, tmp_path, out):
    stack, _, _ = world
    before = fingerprint(tmp_path)
    result = eksinf("render", "--out", out, cwd=stack)
    assert result.code == USAGE and "refusing to replace" in result.err, result.err
    assert "rendering" not in result.err  # refused before any chart was rendered
    assert fingerprint(tmp_path) == before


def test_a_folder_eksinf_did_not_write_is_refused_naming_what_it_holds(world, eksinf, tmp_path):
    stack, decoy, layout = world
    before = fingerprint(tmp_path)
    for args in (
        ("pull", f"oci-layout:{layout}:v1", "--out", str(decoy)),
        ("links", "resolve", "--profile", PROFILE, "--out", str(decoy)),
        ("render", "--out", str(decoy)),
        ("bundle", "--out", str(decoy)),
    ):
        result = eksinf(*args, cwd=stack)
        refused(result, str(decoy))
        assert "eksinf did not write it (holds .ssh/)" in result.err
    assert fingerprint(tmp_path) == before


def test_home_and_its_parents_are_refused(world, eksinf, tmp_path):
    stack, _, layout = world
    before = fingerprint(tmp_path)
    for out in (os.environ["HOME"], str(tmp_path)):
        result = eksinf("pull", f"oci-layout:{layout}:v1", "--out", out, cwd=stack)
        refused(result, out)
        assert "home folder" in result.err or "folder holding it" in result.err
    assert fingerprint(tmp_path) == before


def test_a_symlinked_out_is_refused_and_its_target_kept(world, eksinf, tmp_path):
    stack, decoy, layout = world
    link = tmp_path / "link"
    link.symlink_to(decoy)
    before = fingerprint(tmp_path)
    result = eksinf("pull", f"oci-layout:{layout}:v1", "--out", str(link), cwd=stack)
    refused(result, str(link))
    assert "symbolic link" in result.err and str(decoy) in result.err
    assert fingerprint(tmp_path) == before


def test_an_empty_or_eksinf_written_folder_is_replaced(world, eksinf, tmp_path):
    stack, _, layout = world
    out = tmp_path / "out"
    out.mkdir()
    assert eksinf("pull", f"oci-layout:{layout}:v1", "--out", str(out), cwd=stack).code == 0
    assert (out / MARKER).is_file() and (out / "u.yaml").is_file()
    profile = str(stack / PROFILE)
    result = eksinf("links", "resolve", "--profile", profile, "--out", str(out), cwd=stack)
    assert result.code == 0, result.err  # the marker from the pull makes it eksinf's to replace
    assert not (out / "u.yaml").exists() and (out / MARKER).is_file()


def test_leftover_swap_link_is_removed_not_followed(world, eksinf, tmp_path):
    # a link planted where a crashed swap would leave its staging folder is unlinked, and what
    # it points at survives
    stack, decoy, layout = world
    (tmp_path / ".out.old").symlink_to(decoy)
    before = fingerprint(decoy)
    assert (
        eksinf("pull", f"oci-layout:{layout}:v1", "--out", str(tmp_path / "out"), cwd=stack).code
        == 0
    )
    assert not os.path.lexists(tmp_path / ".out.old")
    assert fingerprint(decoy) == before
