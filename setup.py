"""The wheel carries the stack: build_py copies it into the package as eksinf/stack/.

The stack's files live once, at the repository root (components.yaml, versions.env, charts.lock,
aws-objects.lock, render/, configs/, iam/); the build copies them beside the modules, with
SHIPPED, the digest of their bytes, which tells an installed eksinf when its user's copy is stale
(src/eksinf/model/shipped.py). The list is the one in that module (tests/test_shipped_stack.py
checks they agree).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
STACK_FILES = ("components.yaml", "versions.env", "charts.lock", "aws-objects.lock")
STACK_DIRS = ("render", "configs", "iam")
SKIP = ("__pycache__", "*.pyc")


def stack_digest(folder: Path) -> str:
    """sha256 over every file's path and bytes, in path order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if rel == "SHIPPED":
            continue
        digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def copy_stack(dest: Path) -> None:
    """The stack's files into `dest` (an `eksinf/stack` folder), then SHIPPED."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in STACK_FILES:
        shutil.copyfile(ROOT / name, dest / name)
    for name in STACK_DIRS:
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns(*SKIP))
    (dest / "SHIPPED").write_text(stack_digest(dest) + "\n")


class BuildWithStack(build_py):
    def run(self) -> None:
        super().run()
        if not self.editable_mode:  # an editable install reads its stack from the checkout
            copy_stack(Path(self.build_lib) / "eksinf" / "stack")


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import its helpers
    setup(cmdclass={"build_py": BuildWithStack})
