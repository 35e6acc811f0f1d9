"""Operation fixture tests: given facts (and real nvidia-smi captures), the exact commands."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from provision_harness import load_case, run_case

CASES_DIR = Path(__file__).parent / "operations"
CASES = sorted(CASES_DIR.glob("*/*.json"))


def _operation(folder: str):
    module_name, op_name = folder.split(".")
    module = importlib.import_module(f"gpuhost.operations.{module_name}")
    return getattr(module, op_name)


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_operation_case(path: Path) -> None:
    case = load_case(path)
    operation = _operation(path.parent.name)
    if "exception" in case:
        expected = case["exception"]
        with pytest.raises(Exception) as info:
            run_case(operation, case)
        assert type(info.value).__name__ == expected["type"]
        assert expected["contains"] in str(info.value)
        return
    commands, noops = run_case(operation, case)
    got, want = json.dumps(commands, indent=2), json.dumps(case["commands"], indent=2)
    assert commands == case["commands"], f"GOT:\n{got}\nWANT:\n{want}"
    if "noop_description" in case:
        assert case["noop_description"] in noops, f"noops: {noops}"
    if not case["commands"]:
        assert noops, "a converged case must say why nothing changed (host.noop)"


def test_every_operation_has_a_converged_case() -> None:
    folders = {p.parent.name for p in CASES}
    for folder in folders:
        cases = [load_case(p) for p in CASES_DIR.joinpath(folder).glob("*.json")]
        assert any(c.get("commands") == [] for c in cases), f"{folder} has no converged case"
