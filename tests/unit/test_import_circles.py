"""No import circles inside dvlake, in-function imports included (issue 42 broke the last three:
``storage/base`` ↔ its backends, ``spark/scan`` ↔ ``spark/row_tracking``, ``spark/dv_scan`` ↔ ``spark/native``).

import-linter checks the layers between packages; a circle inside one layer hides behind an in-function import
and only shows when the two modules are imported in the wrong order. This looks at grimp's graph of every
import statement, wherever it is written."""

from __future__ import annotations

import sys

import pytest

grimp = pytest.importorskip("grimp")  # installed with import-linter (the lint extra)


def _circles(graph: object) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):  # type: ignore[attr-defined]
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for module in sorted(graph.modules):  # type: ignore[attr-defined]
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_dvlake_has_no_import_circle() -> None:
    assert _circles(grimp.build_graph("dvlake", cache_dir=None)) == []


def test_the_check_finds_a_circle() -> None:
    class Graph:
        modules = {"a", "b", "c"}
        edges = {"a": {"b"}, "b": {"a"}, "c": {"a"}}

        def find_modules_directly_imported_by(self, module: str) -> set[str]:
            return self.edges[module]

    assert _circles(Graph()) == [["a", "b"]]
