"""Layers point down: the import graph of src/eksinf, read from the source (every import, at
module level or inside a function, counts: a lazy import is still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "eksinf"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every eksinf module `path` imports (absolute names; `from . import x` resolved)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "eksinf"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            if module.split(".")[0] != "eksinf":
                continue
            for alias in node.names:  # `from . import links` imports a module, not a name
                candidate = f"{module}.{alias.name}"
                found.add(candidate if _exists(candidate) else module)
    return found


def _exists(module: str) -> bool:
    rel = Path(*module.split("."))
    return (SRC / rel).with_suffix(".py").is_file() or (SRC / rel / "__init__.py").is_file()


def graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def direction_errors(edges: dict[str, set[str]]) -> list[str]:
    errors = []
    for module, imported in sorted(edges.items()):
        for target in sorted(imported):
            if _under(target, "eksinf.cli") and not _under(module, "eksinf.cli"):
                errors.append(f"{module} imports the CLI ({target})")
            if _under(module, "eksinf.aws") and _under(target, "eksinf.hub"):
                errors.append(f"{module} (aws) imports the hub ({target})")
            if _under(module, "eksinf.aws") and _under(target, "eksinf.flows"):
                errors.append(f"{module} (aws) imports the orchestration layer ({target})")
            if _under(module, "eksinf.hub") and _under(target, "eksinf.flows"):
                errors.append(f"{module} (hub) imports the orchestration layer ({target})")
            # kube: the Kubernetes client and local control plane, just above the model
            if _under(module, "eksinf.kube") and not (
                _under(target, "eksinf.kube")
                or target
                in (
                    "eksinf.errors",
                    "eksinf.cache",
                    "eksinf.atomic",
                    "eksinf.net",
                    "eksinf.inside",
                    "eksinf.yamlio",  # the bounded YAML reader (kubeconfigs are user input)
                )
                or _under(target, "eksinf.model")
            ):
                errors.append(f"{module} (kube) imports {target}")
            if _under(module, "eksinf.model") and not (
                _under(target, "eksinf.model")
                # inside: the safe file reader yamlio itself reads through (errors only below)
                or target in ("eksinf.errors", "eksinf.paths", "eksinf.yamlio", "eksinf.inside")
            ):
                errors.append(f"{module} (model) imports {target}")
    return errors


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in edges:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _no_package_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's __init__ re-exporting its own modules is not a cycle through the package."""
    return {m: {t for t in ts if not _under(m, t)} for m, ts in edges.items()}


def test_layers_point_down() -> None:
    assert direction_errors(graph()) == []


def test_no_import_cycles() -> None:
    assert cycles(_no_package_edges(graph())) == []


def test_the_rules_catch_what_they_forbid() -> None:
    """Each rule fails on the import it forbids, so the two tests above can fail."""
    bad = {
        "eksinf.lint": {"eksinf.cli.common"},
        "eksinf.aws.enroll": {"eksinf.hub.local"},
        "eksinf.render": {"eksinf.guard"},
        "eksinf.guard": {"eksinf.render"},
    }
    assert direction_errors(bad) == [
        "eksinf.aws.enroll (aws) imports the hub (eksinf.hub.local)",
        "eksinf.lint imports the CLI (eksinf.cli.common)",
    ]
    assert cycles(bad) == [["eksinf.guard", "eksinf.render"]]


def test_the_graph_is_read_from_the_source() -> None:
    edges = graph()
    assert "eksinf.model.names" in edges["eksinf.flows.deploy"]
    assert "eksinf.links.engine" in edges["eksinf.hub.local"]
