"""The layout holds (issue 25): the import-linter contracts, no import cycle between modules,
and no torch in core and algorithms."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp
import pytest

#: the package root exports `wattcap.Session` lazily; its import of the runtime is the one
#: edge a cycle may use (nothing below imports the root for anything but the version, which
#: lives in wattcap.core.version)
ROOT_EXCEPTION = "wattcap"


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each as a cycle."""
    modules = sorted(m for m in graph.modules if m.startswith("wattcap"))
    edges = {m: sorted(t for t in graph.find_modules_directly_imported_by(m)
                       if t.startswith("wattcap") and t != m)
             for m in modules}
    edges[ROOT_EXCEPTION] = []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:  # iterative, so deep chains never hit the recursion limit
        nonlocal counter
        work = [(start, iter(edges.get(start, [])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges.get(child, []))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
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

    for module in modules:
        if module not in index:
            visit(module)
    return found


def _describe(graph: grimp.ImportGraph, component: list[str]) -> str:
    """One concrete cycle through the component: a -> b -> ... -> a."""
    members = set(component)
    path = [component[0]]
    while True:
        nxt = next(t for t in sorted(graph.find_modules_directly_imported_by(path[-1]))
                   if t in members and (t == component[0] or t not in path))
        path.append(nxt)
        if nxt == component[0] or len(path) > len(component) + 1:
            return " -> ".join(path)


def test_no_import_cycle_between_modules() -> None:
    # grimp reads every import statement of a module: those inside functions and under
    # `if TYPE_CHECKING:` count as much as the ones at the top
    graph = grimp.build_graph("wattcap", cache_dir=None)
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(_describe(graph, c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function(tmp_path: Path) -> None:
    """The check above could pass by never seeing a cycle: build one and see it found."""
    package = tmp_path / "cyclepkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from cyclepkg import b\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    from cyclepkg import a\n")
    sys.path.insert(0, str(tmp_path))
    try:
        graph = grimp.build_graph("cyclepkg", cache_dir=None)
    finally:
        sys.path.remove(str(tmp_path))
    modules = {m.replace("cyclepkg", "wattcap") for m in graph.modules}
    assert modules  # the fake package was read
    renamed = grimp.ImportGraph()
    for module in graph.modules:
        renamed.add_module(module.replace("cyclepkg", "wattcap"))
        for target in graph.find_modules_directly_imported_by(module):
            renamed.add_import(importer=module.replace("cyclepkg", "wattcap"),
                               imported=target.replace("cyclepkg", "wattcap"))
    assert _cycles(renamed) == [["wattcap.a", "wattcap.b"]]


def test_the_import_contracts_hold() -> None:
    """The contracts in pyproject.toml (layers; no torch in core and algorithms; devices never
    import runtime, measure or train; nothing imports the deprecated flat modules)."""
    lint_imports = Path(sys.executable).parent / "lint-imports"
    out = subprocess.run([str(lint_imports), "--no-cache"], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2], timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_core_and_algorithms_import_no_torch() -> None:
    code = ("import importlib, pkgutil, sys, wattcap.core, wattcap.algorithms\n"
            "for package in (wattcap.core, wattcap.algorithms):\n"
            "    for info in pkgutil.iter_modules(package.__path__, package.__name__ + '.'):\n"
            "        importlib.import_module(info.name)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'safetensors')))")
    assert _printed_by_python(code) == "[]"


def _printed_by_python(code: str, *args: str) -> str:
    """What `python -c code args` printed in a fresh process (which must succeed)."""
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_server_starts_without_torch(tmp_path: Path) -> None:
    """`wattcap serve` answers its first request without waiting seconds for torch: the app,
    its routers, store and job runner import none of it (a weights upload and a job import it
    when they come)."""
    code = ("import sys, wattcap.cli.server\n"
            "from wattcap.server.app import ServerSettings, create_app\n"
            "create_app(ServerSettings(db=sys.argv[1]))\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch')[:3])")
    assert _printed_by_python(code, str(tmp_path / "server.sqlite3")) == "[]"


def test_a_flower_clientapp_answers_its_query_without_torch() -> None:
    """A deployed SuperNode starts a ClientApp process per message: the apps' module imports
    Flower only, and the federation (torch, scipy: seconds) comes with a round's task."""
    pytest.importorskip("flwr")
    code = ("import sys, wattcap.integrations.flower\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'scipy') or "
            "m == 'wattcap.experiments.federation')[:3])")
    assert _printed_by_python(code) == "[]"
