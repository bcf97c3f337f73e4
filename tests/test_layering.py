"""The import rules of DESIGN.md, checked on the source (no imports executed).

- Direction between packages: ``optimizer -> simulator -> hardware -> slo.inputfile``
  (and ``slo.units``, the shared unit conventions); ``slo`` imports nothing of ours but
  itself; SLO evaluation is used inside the simulator only by its capacity search.
- The simulator is a library: it never imports optuna, rich or typer.
- Outside the CLI (where lazy imports keep start-up fast) an import of our own packages sits at
  module level, so that no function-local import can hide a cycle.
- Between the simulator's sub-packages (and its top-level modules) there are no import cycles,
  except the ones listed in ``CYCLE_DEBT`` that the redesign issue removes; the list must stay
  exact, so removing a cycle means deleting its line here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("optimizer", "simulator", "hardware", "slo")

#: package -> the packages (prefixes) it may import besides itself.
ALLOWED_UPSTREAM: dict[str, tuple[str, ...]] = {
    "slo": (),
    "hardware": ("slo.inputfile", "slo.units"),
    "simulator": ("hardware", "slo.inputfile", "slo.units"),
    "optimizer": ("simulator", "hardware", "slo"),
}

#: the one simulator module family that may evaluate SLOs.
SLO_USERS = ("simulator.capacity",)

FORBIDDEN_IN_SIMULATOR = ("optuna", "rich", "typer")

#: import edges between simulator units that sit on a cycle today (issue: one step of redesign).
CYCLE_DEBT: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Import:
    """One import statement: where it is, what it names, and whether it sits in a function."""

    module: str
    path: Path
    line: int
    target: str
    local: bool


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _imports_in(path: Path) -> Iterator[Import]:
    module = _module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    local_nodes: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            local_nodes.update(id(sub) for sub in ast.walk(node) if sub is not node)
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, path.name == "__init__.py")
            # `from pkg import sub` may name a sub-module: count the deepest existing name.
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            yield Import(module, path, node.lineno, target, id(node) in local_nodes)


def _all_imports() -> list[Import]:
    found: list[Import] = []
    for package in OURS:
        for path in sorted((ROOT / package).rglob("*.py")):
            found.extend(_imports_in(path))
    return found


IMPORTS = _all_imports()
MODULES = {_module_name(p) for pkg in OURS for p in (ROOT / pkg).rglob("*.py")}


def _resolve(target: str) -> str | None:
    """The module of ours that an import names (None for third-party names)."""
    name = target
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _ours() -> Iterator[tuple[Import, str]]:
    for imp in IMPORTS:
        resolved = _resolve(imp.target)
        if resolved is not None and resolved != imp.module:
            yield imp, resolved


def _where(imp: Import) -> str:
    return f"{imp.path.relative_to(ROOT)}:{imp.line} imports {imp.target}"


def test_packages_import_only_downwards() -> None:
    bad = []
    for imp, target in _ours():
        source, dest = imp.module.split(".")[0], target.split(".")[0]
        if source == dest:
            continue
        allowed = ALLOWED_UPSTREAM[source]
        if not any(target == a or target.startswith(a + ".") for a in allowed):
            bad.append(_where(imp))
    assert not bad, "upward or sideways imports:\n" + "\n".join(bad)


def test_only_the_capacity_search_evaluates_slos_in_the_simulator() -> None:
    bad = [
        _where(imp)
        for imp, target in _ours()
        if imp.module.startswith("simulator")
        and target.startswith("slo")
        and not target.startswith(("slo.inputfile", "slo.units"))
        and not imp.module.startswith(SLO_USERS)
    ]
    assert not bad, "\n".join(bad)


def test_the_simulator_never_imports_the_front_end_libraries() -> None:
    bad = [
        _where(imp)
        for imp in IMPORTS
        if imp.module.startswith(("simulator", "hardware", "slo"))
        and imp.target.split(".")[0] in FORBIDDEN_IN_SIMULATOR
    ]
    assert not bad, "\n".join(bad)


def test_no_function_local_import_of_our_packages_outside_the_cli() -> None:
    bad = [
        _where(imp)
        for imp, _ in _ours()
        if imp.local and not imp.module.startswith("optimizer.cli")
    ]
    assert not bad, "function-local imports (move them to the top of the module):\n" + "\n".join(
        bad
    )


#: Simulator packages on top of everything: no other simulator module may import them.
TOP_OF_SIMULATOR = ("simulator.validation", "simulator.testing")


def test_nothing_in_the_simulator_imports_its_validation_or_testing_kits() -> None:
    bad = [
        _where(imp)
        for imp, target in _ours()
        if imp.module.startswith("simulator")
        and target.startswith(TOP_OF_SIMULATOR)
        and not imp.module.startswith(TOP_OF_SIMULATOR)
    ]
    assert not bad, "\n".join(bad)


def _unit(module: str) -> str:
    """The simulator's sub-package (or top-level module) a module belongs to."""
    return ".".join(module.split(".")[:2])


def _unit_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for imp, target in _ours():
        if not (imp.module.startswith("simulator.") and target.startswith("simulator.")):
            continue
        source, dest = _unit(imp.module), _unit(target)
        if source != dest:
            graph.setdefault(source, set()).add(dest)
    return graph


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm; returns the components with more than one unit."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_simulator_units_have_no_import_cycles_beyond_the_listed_debt() -> None:
    graph = _unit_graph()
    on_cycles = {
        (source, dest)
        for component in _strongly_connected(graph)
        for source in component
        for dest in graph.get(source, ())
        if dest in component
    }
    new = sorted(on_cycles - CYCLE_DEBT)
    gone = sorted(CYCLE_DEBT - on_cycles)
    assert not new, f"new import cycles between simulator units: {new}"
    assert not gone, f"cycles removed — delete them from CYCLE_DEBT: {gone}"


PLANTED = {
    "upward": ("hardware/catalog.py", "import simulator.api", test_packages_import_only_downwards),
    "front end": (
        "simulator/metrics.py",
        "import optuna",
        test_the_simulator_never_imports_the_front_end_libraries,
    ),
    "cycle": (
        "simulator/workload/spec.py",
        "import simulator.api",
        test_simulator_units_have_no_import_cycles_beyond_the_listed_debt,
    ),
    "kit": (
        "simulator/engine/scheduler.py",
        "import simulator.testing.policy",
        test_nothing_in_the_simulator_imports_its_validation_or_testing_kits,
    ),
    "hidden": (
        "simulator/engine/scheduler.py",
        "def late():\n    import simulator.metrics",
        test_no_function_local_import_of_our_packages_outside_the_cli,
    ),
}


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_the_rules_catch_a_planted_violation(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    source, planted, rule = PLANTED[case]
    path = ROOT / source
    planted_imports = list(_imports_in_text(path, planted))
    assert planted_imports
    monkeypatch.setattr(f"{__name__}.IMPORTS", [*IMPORTS, *planted_imports])
    with pytest.raises(AssertionError):
        rule()


def _imports_in_text(path: Path, text: str) -> Iterator[Import]:
    """The imports of ``text`` as if it stood in ``path`` (module level or in a function)."""
    module = _module_name(path)
    tree = ast.parse(text)
    local = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        for sub in ast.walk(node)
        if sub is not node
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, path, node.lineno, alias.name, local=id(node) in local)
