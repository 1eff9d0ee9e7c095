"""The apps' import graph: no cycles in sessions_app, and threads_app imports no other app.

Read from the source (module-level and function-level imports alike), so a lazy import that
closes a cycle counts too; imports for annotations only (``if TYPE_CHECKING:``) do not.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ("chatproject", "sessions_app", "threads_app", "media_app", "chainlit_compat")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_nodes(tree: ast.AST):
    """Every node but those under ``if TYPE_CHECKING:`` (imports for annotations only)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            continue
        yield node
        yield from _runtime_nodes(node)


def import_graph() -> dict[str, set[str]]:
    modules = {
        _module_name(p): p
        for app in APPS
        for p in (ROOT / app).rglob("*.py")
        if "migrations" not in p.parts and "management" not in p.parts
    }
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in _runtime_nodes(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
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

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_sessions_app_has_no_import_cycle():
    graph = import_graph()
    sessions = {
        n: {t for t in ts if t.startswith("sessions_app")}
        for n, ts in graph.items()
        if n.startswith("sessions_app")
    }
    assert cycles(sessions) == []


def test_threads_app_imports_no_other_app():
    graph = import_graph()
    leaks = {
        n: sorted(t for t in ts if not t.startswith("threads_app"))
        for n, ts in graph.items()
        if n.startswith("threads_app")
    }
    assert {n: ts for n, ts in leaks.items() if ts} == {}


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_app_imports_chainlit_compat():
    """Chainlit's HTTP API is a layer over the other apps' services: nothing below it needs it."""
    graph = import_graph()
    users = {
        n
        for n, ts in graph.items()
        if not n.startswith("chainlit_compat") and any(t.startswith("chainlit_compat") for t in ts)
    }
    assert users == set()
