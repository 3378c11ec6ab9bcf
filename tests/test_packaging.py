"""What `pip install eksinf` brings: runtime dependencies as ranges, each pinned exactly in
requirements.lock (which .ci/setup installs with); no test tool at runtime, not even through a
dependency; every package src/ imports declared; licence metadata in the wheel."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata

from conftest import REPO
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

TEST_TOOLS = {"pytest", "moto", "ruff", "mypy", "flask", "responses", "pyinstaller"}
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
RUNTIME = [Requirement(r) for r in PROJECT["dependencies"]]
DEV = [Requirement(r) for r in PROJECT["optional-dependencies"]["dev"]]


def _lock() -> dict[str, str]:
    pins = {}
    for line in (REPO / "requirements.lock").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: {line!r} is not NAME==VERSION"
            pins[canonicalize_name(name)] = version
    return pins


def test_runtime_dependencies_are_ranges_each_locked_inside_its_range():
    lock = _lock()
    for req in RUNTIME + DEV:
        ops = {spec.operator for spec in req.specifier}
        assert "==" not in ops and ">=" in ops, f"{req}: a range with a lower bound, not a pin"
        version = lock.get(canonicalize_name(req.name))
        assert version is not None, f"{req.name} is not in requirements.lock"
        assert req.specifier.contains(version), f"requirements.lock pins {req.name}=={version}"
    for req in RUNTIME:
        assert any(s.operator == "<" for s in req.specifier), f"{req}: no upper bound"


def test_the_setup_installs_with_the_lock():
    setup = (REPO / ".ci" / "setup").read_text(encoding="utf-8")
    assert "-c requirements.lock -e '.[dev]'" in setup
    # an editable install compiles nothing: the setup compiles eksinf's modules, as pip does
    # for a wheel (tests/test_shipped_stack.py)
    assert "-m compileall -q src/eksinf" in setup


def _closure(names: set[str]) -> set[str]:
    """The installed distributions `names` bring, through requirements without extras."""
    seen: set[str] = set()
    todo = [canonicalize_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for raw in metadata.requires(name) or []:
            req = Requirement(raw)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return seen


def test_no_test_tool_comes_with_the_runtime():
    runtime = _closure({r.name for r in RUNTIME})
    assert not runtime & TEST_TOOLS, sorted(runtime & TEST_TOOLS)
    assert {"pytest", "moto", "ruff", "mypy"} <= {canonicalize_name(r.name) for r in DEV}


def test_every_package_src_imports_is_declared():
    imported: set[str] = set()
    for path in (REPO / "src" / "eksinf").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"eksinf"}
    owners = metadata.packages_distributions()
    declared = {canonicalize_name(r.name) for r in RUNTIME}
    for module in sorted(third_party):
        dists = {canonicalize_name(d) for d in owners.get(module, [])}
        assert dists & declared, f"src imports {module} ({dists or 'not installed'}): declare it"


def test_every_module_imports_with_the_test_tools_absent():
    """Each eksinf module imports in a process where the test tools cannot be imported."""
    probe = (
        "import importlib, pkgutil, sys\n"
        f"for name in {sorted(TEST_TOOLS | {'_pytest'})!r}:\n"
        "    sys.modules[name] = None  # `import name` now raises ImportError\n"
        "import eksinf\n"
        "names = [m.name for m in pkgutil.walk_packages(eksinf.__path__, 'eksinf.')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "print(len(names))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 100


def test_the_wheel_carries_the_licence_and_ranges(wheel):
    """The wheel of this checkout (conftest's `wheel`, built offline from a copy)."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = archive.read(info).decode()
        licence = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
        assert "Apache License" in archive.read(licence).decode()
    assert "License-Expression: Apache-2.0" in meta
    requires = [
        line.split(": ", 1)[1] for line in meta.splitlines() if line.startswith("Requires-Dist:")
    ]
    runtime = [Requirement(r) for r in requires if "extra ==" not in r]
    assert runtime and all("==" not in str(r.specifier) for r in runtime)
    assert not {canonicalize_name(r.name) for r in runtime} & TEST_TOOLS


def test_the_lazily_imported_iam_table_loads_at_runtime():
    """parliament (imported only when `eksinf diff` meets an IAM change) loads without the test
    tools and without pkg_resources, which setuptools 81 removed and parliament still reads."""
    probe = (
        "import sys\n"
        f"for name in {sorted(TEST_TOOLS | {'_pytest', 'pkg_resources'})!r}:\n"
        "    sys.modules.pop(name, None)\n"
        "import importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {sorted(TEST_TOOLS | {'_pytest', 'pkg_resources'})!r}:\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from eksinf.review.policies import resource_mismatch\n"
        "found, why = resource_mismatch(['ec2:DeleteVolume'], ['arn:aws:s3:::bucket/*'])\n"
        "print(why or 'checked', sorted(found))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "checked ['ec2:DeleteVolume']"
