"""No tracebacks: a unit with a tag YAML does not define, reaching the hub
through install, sandbox up or hub upload, and a stack this user may not write, each end in one
`eksinf:` line with its exit code; the stack, a decoy folder, the cache and the hub are
byte-identical afterwards."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from safety import fingerprint

from eksinf.errors import CONTRACT, ENVIRONMENT

RUN = "import sys; from eksinf.cli import run; sys.exit(run(sys.argv[1:]))"


def one_line(code: int, returncode: int, out: str, err: str) -> str:
    assert returncode == code, (returncode, out, err)
    assert "Traceback" not in out + err
    lines = [x for x in err.splitlines() if x.startswith("eksinf: ")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def decoy(tmp_path: Path) -> Path:
    folder = tmp_path / "decoy"
    folder.mkdir()
    (folder / "keep.yaml").write_text("mine: 1\n")
    return folder


@pytest.mark.parametrize(
    "args",
    [("install",), ("sandbox", "up"), ("hub", "upload", "argocd-base", "configs/argocd")],
)
def test_an_unknown_tag_on_the_way_to_the_hub_is_one_line(
    eksinf, stack_dir, decoy, tmp_path, monkeypatch, args
):
    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))
    unit = sorted((stack_dir / "configs" / "argocd").glob("*.yaml"))[0]
    unit.write_text(unit.read_text() + "---\nkind: !weird X\n")
    before = fingerprint(stack_dir, decoy, tmp_path / "cache")
    result = eksinf(*args, cwd=stack_dir)
    line = one_line(CONTRACT, result.code, result.out, result.err)
    assert f"configs/argocd/{unit.name}:" in line or f"/{unit.name}:" in line
    assert "unknown YAML tag '!weird'" in line
    after = fingerprint(stack_dir, decoy, tmp_path / "cache")
    # Nothing that was there changed. New: at most an empty hub (made before units are read:
    # no space in it) and the derived-data cache's parses of the other, valid files.
    assert {k: after.get(k) for k in before} == before
    new = after.keys() - before.keys()
    assert not {k for k in new if "/.eksinf" not in k and "/cache/derived" not in k}
    if (stack_dir / ".eksinf" / "hub.db").exists():
        spaces = eksinf("hub", "spaces", cwd=stack_dir)
        assert spaces.code == 0 and spaces.out.strip() == "", spaces.out


def test_a_unit_that_is_not_utf8_is_one_line(eksinf, stack_dir):
    unit = sorted((stack_dir / "configs" / "argocd").glob("*.yaml"))[0]
    unit.write_bytes(unit.read_bytes() + b"\xff\xfe")
    result = eksinf("install", cwd=stack_dir)
    line = one_line(CONTRACT, result.code, result.out, result.err)
    assert f"{unit.name}: not UTF-8 text" in line


@pytest.fixture
def read_only_stack(stack_dir: Path):
    """The stack, owned by root and readable by all: for the user `nobody` (setpriv), it is
    read-only. Root writes anywhere, so the in-process runner cannot show this; each command
    runs as a real process of that user."""
    shared = Path(tempfile.mkdtemp(prefix="eksinf-ro-"))
    try:
        shared.chmod(0o755)
        stack = shared / "stack"
        shutil.copytree(stack_dir, stack)
        for path in [stack, *stack.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        # nobody's own private cache and key folders: the cache is refused otherwise (another
        # user's folder), and that warning is not what these tests are about
        cache, keys = shared / "cache", shared / "keys"
        for folder in (cache, keys):
            folder.mkdir(mode=0o700)
            os.chown(folder, 65534, 65534)
        yield stack, cache, keys
    finally:
        shutil.rmtree(shared)


@pytest.mark.parametrize(
    ("args", "path"),
    [
        (("bundle",), "bundles"),
        (("bundle", "--json"), "bundles"),
        (("push", "-c", "gpu-runtime"), "bundles"),
        (
            ("links", "resolve", "--profile", "render/platform-profile/profile.yaml", "--out", "o"),
            "o",  # the output folder it could not build (its staging folder is never left)
        ),
        (("install",), ".eksinf"),
        (("charts", "lock", "--chart-mirror", "CHARTS"), ".charts.lock."),
        (("render", "--chart-mirror", "CHARTS"), "configs"),
    ],
)
def test_a_read_only_stack_is_one_line_and_left_as_it_was(
    read_only_stack, chart_mirror, args, path
):
    stack, cache, keys = read_only_stack
    if path == "configs":  # a render of a stack already in sync writes nothing: make it differ
        unit = sorted((stack / "configs" / "argocd").glob("*.yaml"))[0]
        unit.write_text(unit.read_text() + "# edited by hand\n")
    before = fingerprint(stack)
    env = {
        **os.environ,
        "HOME": str(stack.parent),
        "EKSINF_CACHE_DIR": str(cache),
        "EKSINF_CACHE_KEY": str(keys / "cache.key"),
    }
    command = [a.replace("CHARTS", str(chart_mirror)) for a in args]
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
    done = subprocess.run(
        [*as_nobody, "-c", RUN, "--stack", str(stack), *command],
        cwd=stack,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = one_line(ENVIRONMENT, done.returncode, done.stdout, done.stderr)
    assert f"{stack}/{path}" in line and "Permission denied" in line
    if "--json" in args:
        import json

        assert json.loads(done.stdout)["exit"] == ENVIRONMENT
    assert fingerprint(stack) == before
