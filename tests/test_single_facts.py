"""One definition of every fact: each literal below is written once in src/eksinf, in the module
that owns it, and every other module names it through that module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "eksinf"

# literal -> the one module allowed to spell it (docstrings and comments do not count)
FACTS = {
    "confighubplaceholder": "model/placeholder.py",  # the placeholder token
    "karpenter.sh/discovery": "model/names.py",  # the discovery tag key
    "Owner": "model/names.py",  # the Owner label key
    "EKS Inference": "model/names.py",  # the Owner label value
    "argocd.argoproj.io/sync-wave": "model/configs.py",  # the sync-wave annotation
}


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (path.relative_to(SRC).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(SRC.rglob("*.py"))
    ]


def _docstrings(tree: ast.Module) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            out.add(id(first.value))
    return out


def _strings(tree: ast.Module) -> list[tuple[int, str]]:
    skip = _docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
    ]


@pytest.mark.parametrize("literal", sorted(FACTS))
def test_each_fact_is_spelt_once(literal: str) -> None:
    exact = literal in ("Owner",)  # a short word: only the whole string counts
    found = [
        f"{name}:{line}"
        for name, tree in _modules()
        for line, value in _strings(tree)
        if (value == literal if exact else literal in value)
    ]
    assert len(found) == 1, f"{literal!r} spelt in {found}; name it through {FACTS[literal]}"
    assert found[0].startswith(FACTS[literal] + ":")


def _is_variant_rule(node: ast.AST) -> bool:
    """An f-string `f"{component}-{variant}"` (or `-{BASE}`, `-base`): a space name built by hand."""
    if not isinstance(node, ast.JoinedStr) or not isinstance(node.values[0], ast.FormattedValue):
        return False
    rest = "".join(
        v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"
        for v in node.values[1:]
    )
    return rest == "-base" or (rest.startswith("-{") and ("variant" in rest or "BASE" in rest))


def test_variant_space_rule_is_written_once() -> None:
    found = [
        f"{name}:{node.lineno}"
        for name, tree in _modules()
        for node in ast.walk(tree)
        if _is_variant_rule(node)
    ]
    assert len(found) == 1 and found[0].startswith("model/names.py:"), found


def _compound(name: str) -> bool:
    """A camelCase or snake_case function name: no word of prose, no other fact spells it."""
    return any(c.isupper() or c == "_" for c in name)


def test_each_template_function_is_named_in_one_table() -> None:
    """The proof's and the guard's functions come from one table (build/templatefuncs.py): a
    function name spelt in another module is a second list of them."""
    from eksinf.build.templatefuncs import FUNCTIONS

    names = {name for name in FUNCTIONS if _compound(name)}
    assert {"decryptAES", "toDate", "getHostByName", "randAlphaNum", "date_modify"} <= names
    found = [
        f"{name}:{line} {value}"
        for name, tree in _modules()
        for line, value in _strings(tree)
        if value in names and name != "build/templatefuncs.py"
    ]
    assert not found, f"template functions named outside build/templatefuncs.py: {found}"


def test_the_checker_sees_a_second_spelling() -> None:
    """The scan above is not vacuous: a module spelling a fact again is found."""
    tree = ast.parse(
        '"""doc: confighubplaceholder"""\nX = f"{c}-{variant}"\nY = "confighubplaceholder"\n'
    )
    assert [v for _, v in _strings(tree) if "placeholder" in v] == ["confighubplaceholder"]
    assert sum(_is_variant_rule(n) for n in ast.walk(tree)) == 1
