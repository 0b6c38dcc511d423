"""The package's layers (docs/design.md): data flows one way, config -> sandbox -> data -> env ->
server | agents -> evaluation -> training -> cli. Every `sqlenv` import in the source, including
those inside functions and under TYPE_CHECKING, is read from the syntax tree, so a new upward
import or a cycle fails here however it is written."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sqlenv

PACKAGE_ROOT = Path(sqlenv.__file__).parent

# Lowest first. Modules of one rank may import each other; `server` and `agents` share a rank but
# are siblings that never import each other, and so are `training` and `integrations`.
LAYERS: tuple[tuple[str, int], ...] = (
    ("sqlenv.config", 0),
    ("sqlenv.settings", 0),
    ("sqlenv.extras", 0),
    ("sqlenv.sandbox", 1),
    ("sqlenv.data", 2),
    ("sqlenv.env", 3),
    ("sqlenv.server", 4),
    ("sqlenv.agents", 4),
    ("sqlenv.evaluation", 5),
    ("sqlenv.training", 6),
    ("sqlenv.integrations", 6),
    ("sqlenv.cli", 7),
)
SIBLINGS = {
    frozenset({"sqlenv.server", "sqlenv.agents"}),
    frozenset({"sqlenv.training", "sqlenv.integrations"}),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE_ROOT.rglob("*.py"))}


def _layer(module: str) -> tuple[str, int]:
    for prefix, rank in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return prefix, rank
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS and to docs/design.md")


def _resolve(name: str) -> str:
    """The module an imported dotted name stands for (`sqlenv.data.Dataset` -> `sqlenv.data`)."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _imports(module: str) -> set[str]:
    """Every sqlenv module that `module` imports, anywhere in its source."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {_resolve(a.name) for a in node.names if a.name.split(".")[0] == "sqlenv"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package upwards
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base.split(".")[0] != "sqlenv":
                continue
            for alias in node.names:
                found.add(_resolve(f"{base}.{alias.name}"))
    found.discard(module)
    return found


GRAPH = {module: _imports(module) for module in MODULES}


def test_every_module_belongs_to_a_layer() -> None:
    assert len(MODULES) > 40
    for module in MODULES:
        if module != "sqlenv":
            _layer(module)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "sqlenv"))
def test_no_module_imports_from_a_layer_above_it_or_from_a_sibling(module: str) -> None:
    own, rank = _layer(module)
    for imported in sorted(GRAPH[module]):
        assert imported != "sqlenv", f"{module} imports the public API package; import the module instead"
        their, their_rank = _layer(imported)
        assert their_rank <= rank, f"{module} ({own}) imports {imported} from a layer above it ({their})"
        assert frozenset({own, their}) not in SIBLINGS, f"{module} ({own}) imports its sibling {imported}"


def test_there_is_no_import_cycle() -> None:
    """Tarjan's strongly connected components: any component with two modules is a cycle (a
    module that imports its own package's __init__, which re-exports it, is one too)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in GRAPH[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert cycles == [], f"import cycles: {cycles}"


def test_the_checker_sees_an_upward_import_and_a_cycle() -> None:
    """The walk itself: a lazy import inside a function counts, and a cycle is found."""
    source = "def f():\n    from sqlenv.cli.common import app\n"
    tree = ast.parse(source)
    names = {
        _resolve(f"{n.module}.{a.name}")
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom)
        for a in n.names
    }
    assert names == {"sqlenv.cli.common"} and _layer("sqlenv.cli.common")[1] > _layer("sqlenv.env.rewards")[1]
