"""Output folders are owned: every --out is absent, empty, or eksinf's own from an
earlier write; anything else - the stack, its sources, .git, HOME, `/`, a user's folder - is
refused with exit 2 naming the folder and what is in it, and nothing anywhere changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from safety import fingerprint

from eksinf.core.outdir import MARKER
from eksinf.errors import USAGE
from eksinf.publish.bundle import bundle_bytes
from eksinf.publish.oci import push

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


# ---- swap names: only folders eksinf marked are eksinf's --------------


def _decoy_at(path: Path, kind: str, decoy: Path) -> None:
    """What a user may keep under a name eksinf's swap uses."""
    if kind == "folder":
        (path / "notes").mkdir(parents=True)
        (path / "notes" / "plan.txt").write_text("mine\n")
    elif kind == "empty folder":
        path.mkdir()
    elif kind == "folder like eksinf's":  # a copy of an eksinf output: owned marker, no swap one
        path.mkdir()
        (path / MARKER).write_text("copied\n")
        (path / "provenance.json").write_text("{}\n")
    elif kind == "link":
        path.symlink_to(decoy)
    else:
        path.write_text("a file\n")


def _commands(stack: Path, layout: Path, tmp_path: Path) -> dict[str, tuple[tuple[str, ...], Path]]:
    """Each command that replaces a folder whole, and the folder it replaces."""
    out = tmp_path / "out"
    return {
        "render": (("render",), stack / "configs"),
        "render --out": (("render", "--out", str(out)), out),
        "pull": (("pull", f"oci-layout:{layout}:v1", "--out", str(out)), out),
        "links resolve": (("links", "resolve", "--profile", PROFILE, "--out", str(out)), out),
    }


@pytest.mark.parametrize("command", ["render", "render --out", "pull", "links resolve"])
@pytest.mark.parametrize("suffix", ["new", "old"])
@pytest.mark.parametrize("kind", ["folder", "empty folder", "folder like eksinf's", "link", "file"])
def test_a_users_folder_with_a_swap_name_is_left_alone(
    world, eksinf, tmp_path, command, suffix, kind
):
    stack, decoy, layout = world
    args, target = _commands(stack, layout, tmp_path)[command]
    swap = target.parent / f".{target.name}.{suffix}"
    _decoy_at(swap, kind, decoy)
    cache = Path(os.environ["EKSINF_CACHE_DIR"])
    before = fingerprint(tmp_path, cache)
    result = eksinf(*args, cwd=stack)
    assert result.code == USAGE, result.err
    assert f"refusing to write beside {swap}: it is " in result.err, result.err
    assert f"Move or rename {swap}" in result.err
    assert "rendering" not in result.err  # refused before any work
    assert fingerprint(tmp_path, cache) == before


@pytest.mark.parametrize("command", ["render", "pull", "links resolve"])
def test_once_the_users_folder_is_moved_the_write_goes_ahead(
    world, eksinf, tmp_path, chart_mirror, monkeypatch, command
):
    monkeypatch.setenv("EKSINF_CHART_MIRROR", str(chart_mirror))
    stack, decoy, layout = world
    args, target = _commands(stack, layout, tmp_path)[command]
    swap = target.parent / f".{target.name}.old"
    _decoy_at(swap, "folder", decoy)
    assert eksinf(*args, cwd=stack).code == USAGE
    kept = tmp_path / "kept"
    swap.rename(kept)
    before = fingerprint(kept, decoy)
    result = eksinf(*args, cwd=stack)
    assert result.code == 0, result.err
    assert fingerprint(kept, decoy) == before
    assert not os.path.lexists(swap) and not os.path.lexists(swap.with_name(f".{target.name}.new"))
    assert not (target / ".eksinf-swap").exists()  # the swap marker never stays in an output


def test_bundle_out_swaps_nothing_so_a_swap_named_folder_is_no_obstacle(world, eksinf, tmp_path):
    stack, decoy, _ = world
    out = tmp_path / "bundles"
    swap = tmp_path / ".bundles.new"
    _decoy_at(swap, "folder", decoy)
    before = fingerprint(swap, decoy)
    result = eksinf("bundle", "--out", str(out), cwd=stack)
    assert result.code == 0, result.err
    assert fingerprint(swap, decoy) == before
    assert (out / MARKER).is_file()


def test_a_swap_folder_eksinf_marked_is_cleaned_up(world, eksinf, tmp_path):
    """What a crash leaves (see test_render's kill tests) carries the swap marker, so the next
    write removes it."""
    from eksinf.core.outdir import SWAP_MARKER

    stack, _, layout = world
    leftover = tmp_path / ".out.new"
    (leftover / "half").mkdir(parents=True)
    (leftover / SWAP_MARKER).write_text("x")
    result = eksinf("pull", f"oci-layout:{layout}:v1", "--out", str(tmp_path / "out"), cwd=stack)
    assert result.code == 0, result.err
    assert not os.path.lexists(leftover)
