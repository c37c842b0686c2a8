"""The house has no circles and no imports that run back up (DESIGN.md, "The house").

The graph is read from the sources with ``ast``: every import of a ``threadline``
module, at module level, inside functions (lazy imports) and inside
``if TYPE_CHECKING:`` blocks alike. A type-only import is still a dependency a reader
follows and a circle mypy resolves, so it counts; this is also what
``import_cycles.py`` in the shared tools counts. Importing an ancestor package
(``from threadline import catalog`` names ``threadline.catalog``) is not an edge to that
package: Python runs it before any of its submodules anyway.

``LAYERS`` is DESIGN.md's package list, bottom first, made explicit. Two places differ
from the list's order on purpose, because the code already depends that way and no
import runs back up: ``interop`` (provider formats, importers, exporters) needs only
``store`` and below, and ``context`` (token counts in a provider's format) and ``llm``
(the providers' wire formats) build on it; ``llm`` sits below ``compaction`` and
``memory``, which call models. A module may import its own layer or any layer below it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "threadline"

LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "errors",
        "stamps",
        "json_limits",
        "json_scan",
        "yaml_limits",
        "lazy_exports",
        "tokenizer_env",
    ),
    ("messages", "requests", "rejections"),
    ("catalog", "tokens"),
    ("store",),
    ("interop",),
    ("tooling", "llm"),
    ("context",),
    ("compaction",),
    ("memory",),
    ("agent",),
    ("threadline", "session_agent", "demo", "report", "integrations", "config"),
    ("server", "mcp"),
    ("cli",),
)
"""Bottom first. ``threadline`` is the package itself (its public API re-exports);
``tooling`` is the tool type both ``agent`` and ``memory`` use; ``report`` renders what
both faces (``cli`` and ``server``) show; nothing imports ``cli``."""

STORE_BACKENDS = {
    "sqlite": ("sqlite", "sqlite_files"),
    "jsonl": ("jsonl", "jsonl_file"),
    "postgres": ("postgres", "postgres_schema"),
    "redis": ("redis", "redis_scripts"),
    "memory": ("memory",),
}
"""Each store backend's modules: a backend never imports another backend."""


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("threadline", *path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imported_names(module: str, path: Path) -> Iterator[str]:
    """Every module name an import statement in ``path`` names (and, for ``from X import
    a``, ``X.a`` too, which is a module when ``a`` is a submodule)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                head = parts[: len(parts) - node.level + 1]
                base = ".".join([*head, base] if base else head)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, path in mods.items():
        for name in imported_names(module, path):
            while name and name not in mods:
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(name + "."):
                graph[module].add(name)
    return graph


def layer_of(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "threadline"
    for number, layer in enumerate(LAYERS):
        if top in layer:
            return number
    raise AssertionError(f"{module} is in no layer: add {top!r} to LAYERS")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_graph_is_read_whole() -> None:
    """The reading sees lazy and type-only imports (so the checks below can fail)."""
    graph = import_graph()
    assert "threadline.store.lineage" in graph["threadline.store.fork"]
    assert "threadline.cli.root" in graph["threadline.cli.app"]  # imported inside main()
    assert "threadline.catalog" in graph["threadline.tokens"]  # from threadline import catalog
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_itself_back() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_imports_point_down_the_layers() -> None:
    upward = [
        f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})"
        for module, targets in import_graph().items()
        for target in sorted(targets)
        if layer_of(target) > layer_of(module)
    ]
    assert not upward, "imports that run back up:\n" + "\n".join(upward)


@pytest.mark.parametrize("backend", sorted(STORE_BACKENDS))
def test_a_backend_imports_no_other_backend(backend: str) -> None:
    graph = import_graph()
    own = {f"threadline.store.{m}" for m in STORE_BACKENDS[backend]}
    others = {
        f"threadline.store.{m}"
        for name, mods in STORE_BACKENDS.items()
        if name != backend
        for m in mods
    }
    crossing = sorted(f"{m} -> {t}" for m in own for t in graph[m] & others)
    assert not crossing, crossing
