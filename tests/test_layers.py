"""Layers point down: the import graph of src/eksinf, read from the source (every import, at
module level or inside a function, counts: a lazy import is still a dependency)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "eksinf"
DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
BEGIN, END = "<!-- layers:begin (generated) -->\n", "<!-- layers:end -->"


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


@dataclass(frozen=True)
class Layer:
    name: str
    packages: tuple[str, ...]  # module prefixes under eksinf
    may_import: tuple[str, ...]  # other layers, below it
    holds: str


# The one statement of the layer rule, bottom up. docs/architecture.md's table is generated
# from it (`python tests/test_layers.py`), and every import in src/eksinf is checked against it.
LAYERS: tuple[Layer, ...] = (
    Layer("errors", ("eksinf", "eksinf.errors"), (), "the one error type and the exit codes"),
    Layer(
        "core",
        ("eksinf.core",),
        ("errors",),
        "files written atomically, reads that stay inside the stack, YAML as Kubernetes reads "
        "it, the cache, the run lock, the loopback rule",
    ),
    Layer(
        "model",
        ("eksinf.model",),
        ("core", "errors"),
        "the stack, the profile, names, units and resources, quantities, IAM, prices",
    ),
    Layer(
        "links",
        ("eksinf.links",),
        ("model", "core", "errors"),
        "the one engine that writes a profile value into a unit: pure, so validation and the "
        "contract can see resolved values",
    ),
    Layer("kube", ("eksinf.kube",), ("model", "core", "errors"), "the Kubernetes client"),
    Layer(
        "build",
        ("eksinf.build",),
        ("kube", "links", "model", "core", "errors"),
        "charts, the Helm engine, render, guard, verify, validate",
    ),
    Layer(
        "lint",
        ("eksinf.lint",),
        ("build", "links", "model", "core", "errors"),
        "cross-component checks of a rendered stack",
    ),
    Layer(
        "review",
        ("eksinf.review",),
        ("lint", "build", "links", "model", "core", "errors"),
        "what a pull request changes, and its risks",
    ),
    Layer(
        "publish",
        ("eksinf.publish",),
        ("build", "model", "core", "errors"),
        "bundles, OCI artifacts, Argo CD Applications, the cub plugin asset",
    ),
    Layer(
        "hub",
        ("eksinf.hub",),
        ("publish", "links", "model", "core", "errors"),
        "the configuration hub: SQLite or ConfigHub through cub",
    ),
    Layer(
        "aws",
        ("eksinf.aws",),
        ("kube", "links", "model", "core", "errors"),
        "AWS: the cluster contract, status and cost, credentials, enroll's cluster half, teardown",
    ),
    Layer(
        "flows",
        ("eksinf.flows",),
        (
            "aws",
            "hub",
            "publish",
            "review",
            "lint",
            "build",
            "kube",
            "links",
            "model",
            "core",
            "errors",
        ),
        "the flows that need both the hub and AWS, and every command's one entry point",
    ),
    Layer(
        "cli",
        ("eksinf.cli",),
        ("flows", "model", "errors"),
        "parses, calls one flow, formats; nothing imports it",
    ),
)

# Imports across the table that stay, each with its reason.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("eksinf.aws.enroll", "eksinf.publish.argo"): "enroll's cluster half applies the same root "
    "Application the hub half publishes: one builder for both",
}


def layer_of(module: str) -> Layer:
    """The layer a module belongs to: the longest package prefix that holds it."""
    best = max(
        ((len(p), layer) for layer in LAYERS for p in layer.packages if _under(module, p)),
        key=lambda pair: pair[0],
    )
    return best[1]


def direction_errors(edges: dict[str, set[str]]) -> list[str]:
    errors = []
    for module, imported in sorted(edges.items()):
        own = layer_of(module)
        for target in sorted(imported):
            theirs = layer_of(target)
            if theirs is own or theirs.name in own.may_import or (module, target) in EXCEPTIONS:
                continue
            errors.append(f"{module} ({own.name}) imports {target} ({theirs.name})")
    return errors


def markdown() -> str:
    """The layer table of docs/architecture.md."""
    rows = ["| layer | packages | may import | holds |", "|---|---|---|---|"]
    for layer in LAYERS:
        packages = ", ".join(f"`{p}`" for p in layer.packages)
        may = ", ".join(layer.may_import) or "nothing"
        rows.append(f"| {layer.name} | {packages} | {may} | {layer.holds} |")
    rows += ["", "Exceptions, each with its reason:", ""]
    rows += [f"- `{m}` -> `{t}`: {why}." for (m, t), why in sorted(EXCEPTIONS.items())]
    return "\n".join(rows) + "\n"


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
        "eksinf.aws.enroll": {"eksinf.hub.local", "eksinf.publish.argo"},
        "eksinf.cli.aws": {"eksinf.aws.status", "eksinf.flows.status", "eksinf.model.names"},
        "eksinf.build.render": {"eksinf.build.guard"},
        "eksinf.build.guard": {"eksinf.build.render"},
    }
    assert direction_errors(bad) == [
        "eksinf.aws.enroll (aws) imports eksinf.hub.local (hub)",
        "eksinf.cli.aws (cli) imports eksinf.aws.status (aws)",
        "eksinf.lint (lint) imports eksinf.cli.common (cli)",
    ]
    assert cycles(bad) == [["eksinf.build.guard", "eksinf.build.render"]]


def test_every_module_is_in_a_layer_package() -> None:
    """The folders show the layers: no module sits loose beside the package's __init__."""
    loose = [p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "errors.py")]
    assert loose == []


def test_the_docs_table_is_generated_from_this_one() -> None:
    """docs/architecture.md's layer table is `markdown()` byte for byte (regenerate with
    `python tests/test_layers.py`)."""
    doc = DOC.read_text(encoding="utf-8")
    assert BEGIN in doc and END in doc
    assert doc.split(BEGIN, 1)[1].split(END, 1)[0] == markdown()


def test_the_graph_is_read_from_the_source() -> None:
    edges = graph()
    assert "eksinf.model.names" in edges["eksinf.flows.deploy"]
    assert "eksinf.links.engine" in edges["eksinf.hub.local"]


if __name__ == "__main__":
    text = DOC.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    DOC.write_text(head + BEGIN + markdown() + END + rest.split(END, 1)[1], encoding="utf-8")
