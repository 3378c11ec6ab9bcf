"""Every command README.md and docs/*.md show works as written on a fresh clone beside
`../shared` (the offline mirror), with no eksinf, AWS or Kubernetes variable set: only PATH with
the venv first (what `. .venv/bin/activate` does, as setup says) and a HOME of its own, so the
chart cache starts empty.

A documented command is a line of a ```bash / ```sh / ```shell block, or a `$ ` line of a plain
block (a transcript; its trailing `(recorded)`-style note is not part of the command). The
commands that need AWS, a real cluster, the network or something this test must not do are in
NOT_HERE, each with its reason; every other command runs, page by page in page order, in one
clone per page, and must exit 0.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import MIRROR, REPO

PAGES = ["README.md", *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))]
VENV = Path(sys.executable).parent.parent
SETUP = "bash .ci/setup"

# (page, the command's start, why it does not run here). A page of "*" is any page.
NOT_HERE: list[tuple[str, str, str]] = [
    ("README.md", "bash .ci/setup && .venv/bin/pytest", "the test suite this test is part of"),
    ("docs/hyperpod.md", "eksinf enroll cluster --name", "needs AWS (a HyperPod cluster)"),
    ("docs/hyperpod.md", "eksinf install && eksinf deploy", "deploys to a cluster target"),
    ("docs/hyperpod.md", "eksinf status --plane", "reads a running cluster"),
    ("docs/hyperpod.md", "eksinf status --kind", "reads EC2 and SageMaker (AWS)"),
    ("docs/plugin.md", "pip install .", "installs into the environment running the tests"),
    ("docs/plugin.md", "cub plugin install", "needs cub and GitHub (network)"),
    ("docs/publishing.md", "SETUP", "setup made the environment this test runs in"),
    ("docs/publishing.md", ".venv/bin/eksinf push --registry ghcr.io", "pushes to ghcr.io"),
    ("docs/publishing.md", "eksinf pull ghcr.io", "pulls from ghcr.io"),
    ("docs/publishing.md", "kubectl apply", "needs a cluster"),
    ("docs/validate.md", "eksinf validate --server ~/.kube/config", "needs a real cluster"),
    ("docs/walkthrough.md", "eksinf mgmt up", "needs kind and a container runtime"),
    ("docs/walkthrough.md", "eksinf target add", "needs a running cluster's kubeconfig"),
    ("docs/walkthrough.md", "eksinf deploy", "deploys to a cluster target"),
    ("docs/walkthrough.md", "eksinf status", "reads a running cluster"),
    ("docs/walkthrough.md", "eksinf enroll", "needs AWS (an EKS cluster)"),
    ("docs/walkthrough.md", "eksinf fn set-replicas", "needs the workload plane deployed"),
    ("docs/walkthrough.md", "eksinf release publish", "needs the workload plane deployed"),
    ("docs/walkthrough.md", "kubectl", "needs the workload cluster"),
]
# `bash .ci/setup && X`: setup made the environment this test runs in, so X runs alone.
SETUP_FIRST = f"{SETUP} && "
NOTE = re.compile(r"\s{2,}\([^)]*\)\s*$")  # a transcript line's `(recorded, ...)` note
FENCE = re.compile(r"^(```+)([A-Za-z]*)[^\n]*\n(.*?)^\1[ \t]*$", re.S | re.M)


@dataclass(frozen=True)
class DocCommand:
    page: str
    line: int
    text: str

    def skip_reason(self) -> str | None:
        for page, start, reason in NOT_HERE:
            if page in (self.page, "*") and (
                self.text == SETUP if start == "SETUP" else self.text.startswith(start)
            ):
                return reason
        return None


def documented_commands(page: str) -> list[DocCommand]:
    text = (REPO / page).read_text(encoding="utf-8")
    found = []
    for block in FENCE.finditer(text):
        lang, body = block.group(2).lower(), block.group(3)
        first = text.count("\n", 0, block.start(3)) + 1
        pending: tuple[int, str] | None = None  # a command continued with a trailing `\\`
        for offset, raw in enumerate(body.splitlines()):
            line = raw.strip()
            if pending is not None:
                at, line = pending[0], f"{pending[1]} {line}"
                pending = None
            else:
                at = first + offset
            if line.endswith("\\"):
                pending = (at, line[:-1].rstrip())
            elif lang in ("bash", "sh", "shell"):
                if line and not line.startswith("#"):
                    found.append(DocCommand(page, at, line))
            elif lang == "" and line.startswith("$ "):
                found.append(DocCommand(page, at, NOTE.sub("", line[2:]).strip()))
    return found


def _fresh_clone(where: Path) -> Path:
    """`git clone` of this repository, with the working tree's uncommitted and untracked files
    laid over it (so a docs edit is tested before its commit), beside a `shared` mirror."""
    clone = where / "eksinf"
    subprocess.run(["git", "clone", "--shared", "-q", str(REPO), str(clone)], check=True)
    # a clone checks out the default branch, main, whatever branch this checkout is on
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "-B", "main"], check=True)
    patch = subprocess.run(
        ["git", "-C", str(REPO), "diff", "HEAD", "--binary"], capture_output=True, check=True
    ).stdout
    if patch:
        subprocess.run(["git", "-C", str(clone), "apply"], input=patch, check=True)
    untracked = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-o", "--exclude-standard", "-z"],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in untracked)):
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, clone / name)
    (clone / ".venv").symlink_to(VENV)
    (where / "shared").mkdir()
    for name in ("charts", "manifests", "tools"):
        (where / "shared" / name).symlink_to(MIRROR.parent / name)
    return clone


def _bare_env(home: Path) -> dict[str, str]:
    return {"PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(home)}


def test_every_page_is_read_and_the_table_names_documented_commands():
    """The table cannot rot: each entry matches a command its page shows."""
    every = [c for page in PAGES for c in documented_commands(page)]
    assert len(every) > 20
    for page, start, _ in NOT_HERE:
        assert any(
            c.page == page and (c.text == SETUP if start == "SETUP" else c.text.startswith(start))
            for c in every
        ), f"NOT_HERE: {page} shows no command {start!r}"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")  # one empty chart cache, filled by the first render


@pytest.mark.parametrize(
    "page", [p for p in PAGES if any(not c.skip_reason() for c in documented_commands(p))]
)
def test_documented_commands_run_as_written(page, home, tmp_path):
    clone = _fresh_clone(tmp_path)
    for command in documented_commands(page):
        if command.skip_reason():
            continue
        text = command.text.removeprefix(SETUP_FIRST)
        done = subprocess.run(
            ["bash", "-c", text],
            cwd=clone,
            env=_bare_env(home),
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, (
            f"{command.page}:{command.line}: `{command.text}` exited {done.returncode}\n"
            f"{done.stderr[-3000:]}"
        )
