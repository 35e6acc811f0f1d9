"""No function over 80 lines anywhere in the package (issue 25).

A long function is read with ``ast`` (its first line, decorators excluded, to its last). The
on-host smoke script (``smoke/script.py``, copied to hosts as one file) is left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "gpuhost"
LIMIT = 80
# every subpackage, and "." for the top-level modules
CHECKED = tuple(
    sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
) + (".",)
EXEMPT = {"smoke/script.py"}


def long_functions(path: Path, limit: int = LIMIT) -> list[str]:
    """``name (N lines)`` for every function or method of ``path`` longer than ``limit``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > limit
    ]


def test_every_part_is_checked() -> None:
    assert {"audit", "cli", "knowledge", "matrix", "upgrade", "smoke", "."} <= set(CHECKED)


def test_the_counter_finds_a_long_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    body = "".join(f"        x{i} = {i}\n" for i in range(LIMIT))
    module.write_text(f"def short():\n    return 1\n\n\nclass C:\n    def long(self):\n{body}")
    assert long_functions(module) == [f"long ({LIMIT + 1} lines)"]


@pytest.mark.parametrize("unit", CHECKED)
def test_no_function_over_the_limit(unit: str) -> None:
    root = PACKAGE / unit
    assert root.is_dir(), root
    found = {
        str(path.relative_to(PACKAGE)): names
        for path in sorted(root.glob("*.py") if unit == "." else root.rglob("*.py"))
        if str(path.relative_to(PACKAGE)) not in EXEMPT
        for names in [long_functions(path)]
        if names
    }
    assert found == {}, f"split these (over {LIMIT} lines): {found}"
