"""Bundles are reproducible, and unpacking refuses every unsafe member by name and rule."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from eksinf.core.outdir import MARKER
from eksinf.errors import CONTRACT, FAILURE, EksinfError
from eksinf.model.stack import load_stack
from eksinf.publish.bundle import build_bundles, bundle_bytes, safe_unpack


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree(root: Path) -> dict[str, bytes]:
    """A folder's files, without the ownership marker eksinf leaves in what it unpacks."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and p.name != MARKER
    }


# ---- building ---------------------------------------------------------------------------


def test_bundle_bytes_is_normalised_and_order_independent():
    a = bundle_bytes({"b.yaml": b"b: 1\n", "a.yaml": b"a: 1\n"})
    b = bundle_bytes({"a.yaml": b"a: 1\n", "b.yaml": b"b: 1\n"})
    assert a == b
    assert a[:10] == bytes.fromhex("1f8b08000000000002ff")  # gzip: no name, mtime 0
    with tarfile.open(fileobj=io.BytesIO(a)) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["a.yaml", "b.yaml"]
    for m in members:
        assert (m.mode, m.uid, m.gid, m.uname, m.gname, m.mtime) == (0o644, 0, 0, "", "", 0)


def test_bundle_bytes_refuses_unclean_names():
    with pytest.raises(EksinfError) as err:
        bundle_bytes({"../x.yaml": b"x"})
    assert "../x.yaml" in err.value.message and err.value.exit_code == FAILURE


def test_bundles_are_identical_across_runs_and_copies(stack_dir, tmp_path):
    second = tmp_path / "second-copy"
    shutil.copytree(stack_dir, second)
    for path in (second / "configs").rglob("*"):  # different mtimes must not matter
        path.touch()
    first_run = build_bundles(load_stack(stack_dir))
    again = build_bundles(load_stack(stack_dir))
    other = build_bundles(load_stack(second))
    stack = load_stack(stack_dir)
    assert [b.component for b in first_run] == [c.name for c in stack.components]
    for x, y, z in zip(first_run, again, other, strict=True):
        assert x.path.read_bytes() == y.path.read_bytes() == z.path.read_bytes()
        assert x.sha256 == y.sha256 == z.sha256 == sha(x.path.read_bytes())
        assert x.tar_sha256 == z.tar_sha256
    assert first_run[0].path == stack_dir / "bundles" / f"{first_run[0].component}.tar.gz"


def test_bundle_round_trips_through_safe_unpack(stack_dir, tmp_path):
    (bundle,) = build_bundles(load_stack(stack_dir), ["karpenter"])
    names = safe_unpack(bundle.path.read_bytes(), tmp_path / "out")
    assert names == sorted(p.name for p in (stack_dir / "configs" / "karpenter").iterdir())
    assert tree(tmp_path / "out") == tree(stack_dir / "configs" / "karpenter")


def test_bundle_provenance_names_charts_and_tool(stack_dir):
    (bundle,) = build_bundles(load_stack(stack_dir), ["gpu-runtime"])
    prov = bundle.provenance
    assert prov["tool"]["name"] == "eksinf"
    assert [c["chart"] for c in prov["charts"]] == ["nvidia-device-plugin"]
    assert len(prov["charts"][0]["sha256"]) == 64
    assert prov["bundleSha256"] == bundle.sha256
    assert prov["tarSha256"] == sha(gzip.decompress(bundle.data))


def test_component_without_units_is_refused(stack_dir):
    shutil.rmtree(stack_dir / "configs" / "platform-profile")
    built = build_bundles(load_stack(stack_dir), out=stack_dir / "elsewhere")
    assert "platform-profile" not in [b.component for b in built]  # skipped when not named
    with pytest.raises(EksinfError) as err:
        build_bundles(load_stack(stack_dir), ["platform-profile"])
    assert err.value.exit_code == FAILURE
    assert "platform-profile" in err.value.message and "no rendered units" in err.value.message
    assert "eksinf render" in err.value.hint
    assert not (stack_dir / "bundles").exists()


def test_guard_runs_before_anything_is_written(stack_dir):
    hook = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: pre\n  namespace: kube-system\n"
        "  annotations:\n    helm.sh/hook: pre-install\n"
    )
    (stack_dir / "configs" / "gpu-runtime" / "hooked.yaml").write_text(hook)
    with pytest.raises(EksinfError) as err:
        build_bundles(load_stack(stack_dir))
    assert err.value.exit_code == CONTRACT
    assert "gpu-runtime/hooked.yaml" in err.value.message and "helm-hook" in err.value.message
    assert not (stack_dir / "bundles").exists()


def test_a_bundle_of_bytes_guarded_before_is_guarded_and_parsed_as_the_first(stack_dir):
    """What the guard finds in committed bytes is kept under those bytes: the same bytes are
    refused again with the same message, and changed bytes are parsed and guarded afresh."""
    stack = load_stack(stack_dir)
    build_bundles(stack)  # clean: these bytes' findings and parse are kept
    hooked = stack_dir / "configs" / "gpu-runtime" / "hooked.yaml"
    hooked.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: pre\n  namespace: kube-system\n"
        "  annotations:\n    helm.sh/hook: pre-install\n"
    )
    messages = []
    for _ in range(2):
        with pytest.raises(EksinfError) as err:
            build_bundles(load_stack(stack_dir))
        assert err.value.exit_code == CONTRACT
        messages.append(err.value.message)
    assert messages[0] == messages[1] and "gpu-runtime/hooked.yaml" in messages[0]
    hooked.write_text("a: [1\n")
    with pytest.raises(EksinfError) as err:
        build_bundles(load_stack(stack_dir))
    assert err.value.exit_code == CONTRACT
    assert "configs/gpu-runtime/hooked.yaml:" in err.value.message


# ---- unpacking crafted archives ----------------------------------------------------------


def craft(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return gzip.compress(raw.getvalue(), mtime=0)


def regular(name: str, data: bytes = b"x: 1\n") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, None


def huge_member_archive(size: int) -> bytes:
    """A tar.gz whose member header claims `size` bytes; only 64 KiB of data follow.

    The header alone is what a safe unpacker must refuse, so the test never allocates `size`.
    """
    info = tarfile.TarInfo("huge.bin")
    info.size = size
    header = info.tobuf(format=tarfile.GNU_FORMAT)
    return gzip.compress(header + bytes(64 * 1024), mtime=0)


def gnu_sparse_archive(real_size: int) -> bytes:
    """A GNU sparse member (type 'S') whose real size is `real_size` and whose data is empty.

    tarfile cannot write sparse members, so the header is patched by hand: the real size lives
    at offset 483, and the checksum is recomputed.
    """
    info = tarfile.TarInfo("sparse.bin")
    info.type = tarfile.GNUTYPE_SPARSE
    header = bytearray(info.tobuf(format=tarfile.GNU_FORMAT))
    header[483:495] = b"%011o\0" % real_size
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header[:512])
    return gzip.compress(bytes(header) + bytes(1024), mtime=0)


CASES = {
    "parent": (craft(regular("ok.yaml"), regular("../x")), "../x", "parent-traversal"),
    "nested-parent": (craft(regular("a/../../x")), "a/../../x", "parent-traversal"),
    "absolute": (craft(regular("/etc/x")), "/etc/x", "absolute-path"),
    "symlink": (craft(special("evil", tarfile.SYMTYPE, "/etc/passwd")), "evil", "link"),
    "hardlink": (craft(regular("a"), special("b", tarfile.LNKTYPE, "a")), "b", "link"),
    "fifo": (craft(special("pipe", tarfile.FIFOTYPE)), "pipe", "special-file"),
    "device": (craft(special("dev", tarfile.CHRTYPE)), "dev", "special-file"),
    "duplicate": (craft(regular("a.yaml"), regular("./a.yaml")), "./a.yaml", "duplicate"),
    "file-then-dir": (craft(regular("a"), regular("a/b")), "a/b", "duplicate"),
    "2GiB": (huge_member_archive(2**31), "huge.bin", "member-too-large"),
    "2GiB-sparse": (gnu_sparse_archive(2**31), "sparse.bin", "member-too-large"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_unsafe_members_are_refused_and_nothing_is_written(case, tmp_path):
    blob, member, rule = CASES[case]
    work = tmp_path / "work"
    work.mkdir()
    out = work / "out"
    with pytest.raises(EksinfError) as err:
        safe_unpack(blob, out)
    assert err.value.exit_code == FAILURE
    assert repr(member) in err.value.message and f"({rule})" in err.value.message
    assert list(work.iterdir()) == []  # no out dir, no staging leftovers
    assert not (tmp_path / "x").exists() and not Path("/etc/x").exists()


def test_refusal_leaves_an_existing_output_untouched(tmp_path):
    out = tmp_path / "out"
    safe_unpack(bundle_bytes({"keep.yaml": b"k: 1\n"}), out)
    with pytest.raises(EksinfError):
        safe_unpack(CASES["symlink"][0], out)
    assert tree(out) == {"keep.yaml": b"k: 1\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_total_cap_is_enforced(tmp_path):
    blob = bundle_bytes({f"f{i}": bytes(600) for i in range(4)})
    with pytest.raises(EksinfError) as err:
        safe_unpack(blob, tmp_path / "out", max_total=2000)
    assert "'f3'" in err.value.message and "(total-too-large)" in err.value.message
    assert not (tmp_path / "out").exists()


def test_not_a_tarball_is_a_clear_failure(tmp_path):
    with pytest.raises(EksinfError) as err:
        safe_unpack(b"definitely not gzip", tmp_path / "out")
    assert err.value.exit_code == FAILURE and "not a readable tar" in err.value.message


def test_unpack_replaces_previous_contents(tmp_path):
    out = tmp_path / "out"
    safe_unpack(bundle_bytes({"old.yaml": b"o: 1\n"}), out)
    names = safe_unpack(bundle_bytes({"new.yaml": b"n: 1\n", "sub/x.yaml": b"x: 1\n"}), out)
    assert names == ["new.yaml", "sub/x.yaml"]
    assert tree(out) == {"new.yaml": b"n: 1\n", "sub/x.yaml": b"x: 1\n"}
    assert json.dumps(sorted(p.name for p in tmp_path.iterdir())) == '["out"]'


def _pull_in_subprocess(ref: str, out: Path, fault: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EKSINF_FAULT": fault}
    code = "import sys; from eksinf.cli import run; sys.exit(run(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, "pull", ref, "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_crash_during_pull_leaves_the_output_whole(tmp_path):
    from eksinf.publish.oci import push

    layout = tmp_path / "layout"
    old = bundle_bytes({"old.yaml": b"o: 1\n"})
    new = bundle_bytes({"new.yaml": b"n: 1\n"})
    for blob, tag in ((old, "v1"), (new, "v2")):
        push(f"oci-layout:{layout}", blob, title="x.tar.gz", annotations={}, tags=[tag])
    out = tmp_path / "work" / "out"
    safe_unpack(old, out)

    crashed = _pull_in_subprocess(f"oci-layout:{layout}:v2", out, "unpack-swap")
    assert crashed.returncode == 137, crashed.stderr  # killed just before the swap
    assert tree(out) == {"old.yaml": b"o: 1\n"}

    after = _pull_in_subprocess(f"oci-layout:{layout}:v2", out, "none")
    assert after.returncode == 0, after.stderr
    assert tree(out) == {"new.yaml": b"n: 1\n"}
    assert sorted(p.name for p in out.parent.iterdir()) == ["out"]  # staging leftover cleared


def test_bundle_digest_is_the_bundles_and_built_again_for_any_other_files(tmp_path, monkeypatch):
    """The digest of the files' bundle; the bundle is built once per exact file set (names and
    bytes), and any other set is built and digested afresh."""
    from eksinf.core import cache
    from eksinf.model.digest import oci_digest
    from eksinf.publish import bundle

    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(cache.NO_CACHE_ENV, raising=False)
    built: list[dict[str, bytes]] = []
    monkeypatch.setattr(bundle, "bundle_bytes", lambda f: built.append(f) or bundle_bytes(f))
    files = {"a.yaml": b"kind: A\n", "b.yaml": b"kind: B\n"}
    assert bundle.bundle_digest(files) == oci_digest(bundle_bytes(files))
    assert bundle.bundle_digest(dict(reversed(files.items()))) == oci_digest(bundle_bytes(files))
    assert len(built) == 1
    for other in (
        {**files, "b.yaml": b"kind: C\n"},
        {"a.yaml": files["a.yaml"], "c.yaml": files["b.yaml"]},
        {"a.yaml": files["a.yaml"]},
    ):
        assert bundle.bundle_digest(other) == oci_digest(bundle_bytes(other))
    assert len(built) == 4
    monkeypatch.setenv(cache.NO_CACHE_ENV, "1")
    assert bundle.bundle_digest(files) == oci_digest(bundle_bytes(files)) and len(built) == 5
