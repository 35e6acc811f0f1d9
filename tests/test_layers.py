"""The package's import graph points one way (docs/architecture.md).

Every ``import gpuhost...`` / ``from gpuhost... import`` in ``src/gpuhost`` (function-level and
TYPE_CHECKING imports included: they are dependencies too) is read with ``ast``. A *unit* is a
top-level module or package of ``gpuhost`` (``gpuhost.audit``, ``gpuhost.reboot``). The test
fails when a unit imports one of a higher layer, when units import each other in a cycle, or when
a unit is in no layer (add it to ``LAYERS`` where it belongs).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "gpuhost"

# Lowest first. A unit may import units of its own layer (without a cycle) and of lower layers.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("gpuhost", "errors"),  # the root package holds only __version__
    (
        "versions",
        "datafiles",
        "datadir",
        "pyinfra_adapter",
        "redaction",
        "connection",
        "safeio",
        "toolrun",
        "statedir",
        "escape",
        "locks",
        "output",
        "oskey",
    ),
    ("parsers", "gpus", "matrix", "smoke", "findings", "schemas", "pkgmgr"),
    (
        "probe",
        "desired",
        "firewall_roles",
        "slurm",
        "k8s",
        "node_tool",
        "readers",
        "terminal",
        "knowledge",
        "signals",
        "bundle",
        "fabric",
        "faults",
    ),
    ("facts", "inventory"),
    ("operations", "audit"),
    ("deploys", "fleet", "deploy_runner", "reboot", "audit_run"),
    ("checks_support", "checks", "collective", "accept"),
    ("upgrade", "bundle_make", "bundle_rpm", "bundle_resolve"),
    ("cli", "__main__"),
)
RANK = {unit: rank for rank, layer in enumerate(LAYERS) for unit in layer}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _imported(path: Path, module: str) -> set[str]:
    """Absolute names of the gpuhost modules (or module attributes) ``path`` imports."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {name for name in found if name == "gpuhost" or name.startswith("gpuhost.")}


def import_graph() -> dict[str, dict[str, set[str]]]:
    """unit -> {imported unit: {importing module, ...}} (edges between different units only)."""
    units = {_unit(_module_name(p)) for p in PACKAGE.rglob("*.py")}
    graph: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        source = _unit(module)
        for name in _imported(path, module):
            # "from gpuhost import reboot" names the unit reboot; "from gpuhost import
            # __version__" the root package
            target = _unit(name)
            if target not in units:
                target = "gpuhost"
            if name == "gpuhost" or target == source:
                continue
            graph[source][target].add(module)
    return graph


def _cycles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Every strongly connected set of more than one unit (Tarjan), as sorted lists."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                members.append(top)
                if top == node:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_unit_has_a_layer() -> None:
    units = {_unit(_module_name(p)) for p in PACKAGE.rglob("*.py")}
    unplaced = sorted(units - set(RANK))
    assert not unplaced, f"gpuhost units in no layer of tests/test_layers.py LAYERS: {unplaced}"


def test_no_upward_import() -> None:
    upward = [
        f"{module} imports gpuhost.{target} (layer {RANK[target]} > {RANK[source]})"
        for source, targets in import_graph().items()
        for target, modules in targets.items()
        if source in RANK and target in RANK and RANK[target] > RANK[source]
        for module in sorted(modules)
    ]
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_nothing_below_cli_imports_cli() -> None:
    offenders = sorted(
        module
        for source, targets in import_graph().items()
        if source not in ("cli", "__main__")
        for module in targets.get("cli", ())
    )
    assert not offenders, f"modules below cli/ importing gpuhost.cli: {offenders}"


def test_no_cycle_between_units() -> None:
    graph = import_graph()
    cycles = _cycles(graph)
    detail = [
        f"{' <-> '.join(cycle)}: "
        + "; ".join(
            f"{module} -> {b}"
            for a in cycle
            for b in cycle
            for module in sorted(graph.get(a, {}).get(b, ()))
        )
        for cycle in cycles
    ]
    assert not cycles, "import cycles between gpuhost units:\n" + "\n".join(detail)


def module_graph() -> dict[str, dict[str, set[str]]]:
    """module -> {imported module: {module}} for every gpuhost module (an imported attribute
    counts as its module; a module importing its own parent package is left out: the package's
    ``__init__`` runs first in any case)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for module, path in sorted(modules.items()):
        for name in _imported(path, module):
            target = name
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != module and not module.startswith(f"{target}."):
                graph[module][target].add(module)
    return graph


def test_no_cycle_between_modules() -> None:
    """Not even inside a unit: a module cycle (lazy imports included) is a hidden dependency
    knot that an import order change turns into an ImportError."""
    cycles = _cycles(module_graph())
    assert not cycles, "import cycles between gpuhost modules:\n" + "\n".join(
        " <-> ".join(cycle) for cycle in cycles
    )


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b": {"gpuhost.a.x"}}, "b": {"a": {"gpuhost.b"}}}, [["a", "b"]]),
        ({"a": {"b": {"m"}}, "b": {"c": {"m"}}, "c": {"a": {"m"}}}, [["a", "b", "c"]]),
        ({"a": {"b": {"m"}}, "b": {"c": {"m"}}}, []),
    ],
)
def test_cycle_finder(graph: dict[str, dict[str, set[str]]], expected: list[list[str]]) -> None:
    assert _cycles(graph) == expected


def test_graph_reads_relative_and_lazy_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "gpuhost" / "audit"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    module = pkg / "x.py"
    module.write_text(
        "from . import rules\nfrom ..facts import build\n"
        "def f():\n    import gpuhost.cli.check\n    from gpuhost import reboot\n"
    )
    names = _imported(module, "gpuhost.audit.x")
    assert {"gpuhost.audit.rules", "gpuhost.facts.build", "gpuhost.cli.check"} <= names
    assert "gpuhost.reboot" in names
