"""Reading stress-tool results: ``dcgmi diag --json`` and ``nvbandwidth -j``.

DCGM publishes no stable JSON schema (its docs say so), so the reader walks the document and
takes every object with a ``status`` inside a test: the test's ``name`` (or the nearest one
above), the entity (``gpu_id`` / ``entity_id``) and the warning texts. nvbandwidth's testcases
carry a ``status`` ("Passed", "Waived", "Error"...) and have no pass/fail thresholds of their own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpuhost.errors import ParseError

DCGM_LEVELS = (2, 3)
DCGM_FAILED = frozenset({"fail", "failed", "error"})
NVBANDWIDTH_OK = frozenset({"passed", "waived", "pass"})


@dataclass(frozen=True)
class Outcome:
    test: str
    entity: str | None
    status: str
    detail: str

    def line(self) -> str:
        where = f" on {self.entity}" if self.entity is not None else ""
        return f"{self.test}{where}: {self.status}" + (f" ({self.detail})" if self.detail else "")


def _json(text: str, what: str) -> Any:
    start = text.find("{")
    if start < 0:
        raise ParseError(f"{what}: no JSON document in the output: {text.strip()[:200]!r}")
    try:
        return json.loads(text[start:])
    except ValueError as exc:
        raise ParseError(f"{what}: output is not JSON ({exc})") from None


def _warnings(node: dict[str, Any]) -> str:
    texts = []
    for key in ("warnings", "warning", "info", "errors"):
        value = node.get(key)
        items = value if isinstance(value, list) else [value] if value else []
        for item in items:
            if isinstance(item, dict):
                texts.append(str(item.get("warning") or item.get("message") or item))
            elif item:
                texts.append(str(item))
    return "; ".join(texts)[:400]


def _walk(node: Any, test: str, found: list[Outcome]) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, test, found)
        return
    if not isinstance(node, dict):
        return
    name = node.get("name") or node.get("test_name")
    here = str(name) if isinstance(name, str) else test
    status = node.get("status")
    if isinstance(status, str) and here:
        entity = node.get("gpu_id", node.get("entity_id"))
        found.append(
            Outcome(here, None if entity is None else f"GPU {entity}", status, _warnings(node))
        )
    for key, value in node.items():
        if key not in ("warnings", "warning", "info", "errors"):
            _walk(value, here, found)


def dcgm_outcomes(text: str) -> list[Outcome]:
    """Every status in a ``dcgmi diag -j`` document; ParseError when there is none."""
    found: list[Outcome] = []
    _walk(_json(text, "dcgmi diag"), "", found)
    if not found:
        raise ParseError(f"dcgmi diag: no test results in the JSON document: {text[:200]!r}")
    return found


def dcgm_failures(outcomes: list[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if o.status.strip().lower() in DCGM_FAILED]


def nvbandwidth_outcomes(text: str) -> list[Outcome]:
    """Testcases of ``nvbandwidth -j``; ParseError when there are none."""
    doc = _json(text, "nvbandwidth")
    root = doc.get("nvbandwidth", doc) if isinstance(doc, dict) else {}
    cases = root.get("testcases") if isinstance(root, dict) else None
    if not isinstance(cases, list) or not cases:
        raise ParseError(f"nvbandwidth: no testcases in the JSON document: {text[:200]!r}")
    outcomes = []
    for case in cases:
        if not isinstance(case, dict):
            continue
        detail = ""
        if case.get("sum") is not None:
            detail = f"sum {case['sum']} GB/s"
        if case.get("error"):
            detail = str(case["error"])[:300]
        outcomes.append(Outcome(str(case.get("name", "?")), None, str(case.get("status")), detail))
    return outcomes


def nvbandwidth_failures(outcomes: list[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if o.status.strip().lower() not in NVBANDWIDTH_OK]
