"""Stress tier (opt-in: gpuhost check --tier stress): DCGM diagnostics, nvbandwidth, and a long
matmul burn through the smoke script. Tools that are not installed skip with that reason."""

from __future__ import annotations

from typing import Any

import pytest

from gpuhost.checks.checklib import HostFacts, need_spec
from gpuhost.checks_support import smoke, stress
from gpuhost.checks_support.expected import Expected
from gpuhost.errors import GpuhostError, ParseError
from gpuhost.probe.script import check_pythons
from gpuhost.smoke import Expectations, judge, parse_result_text

pytestmark = pytest.mark.stress
BURN_TIMEOUT_S = 1800.0


def _fail(facts: HostFacts, what: str, lines: list[str]) -> None:
    __tracebackhide__ = True
    pytest.fail(f"{facts.name}: {what}:\n  " + "\n  ".join(lines), pytrace=False)


def test_dcgm_diag(facts: HostFacts, inventory_data: dict[str, Any]) -> None:
    """``dcgmi diag -r 2`` (or the level in inventory data gpuhost_dcgm_level: 2 or 3) finds no
    failure."""
    if not facts.has("dcgmi"):
        pytest.skip(f"DCGM is not installed on {facts.name} (no dcgmi)")
    level = inventory_data.get("gpuhost_dcgm_level", 2)
    if level not in stress.DCGM_LEVELS:
        pytest.fail(f"gpuhost_dcgm_level: found {level!r}, expected 2 or 3", pytrace=False)
    result = facts.host.run(f"dcgmi diag -r {int(level)} -j")
    try:
        outcomes = stress.dcgm_outcomes(result.stdout)
    except ParseError as exc:
        _fail(facts, f"dcgmi diag -r {level} (exit {result.rc})", [str(exc), result.stderr[-400:]])
    failed = stress.dcgm_failures(outcomes)
    if failed:
        _fail(facts, f"dcgmi diag -r {level} failed", [o.line() for o in failed])
    if result.rc != 0:
        _fail(facts, f"dcgmi diag -r {level} exited {result.rc}", [result.stderr[-400:]])


def test_nvbandwidth(facts: HostFacts) -> None:
    """``nvbandwidth -j``: every testcase runs (copy-engine and SM copies, host and GPUs)."""
    if not facts.has("nvbandwidth"):
        pytest.skip(f"nvbandwidth is not installed on {facts.name}")
    result = facts.host.run("nvbandwidth -j")
    try:
        outcomes = stress.nvbandwidth_outcomes(result.stdout)
    except ParseError as exc:
        _fail(facts, f"nvbandwidth (exit {result.rc})", [str(exc), result.stderr[-400:]])
    failed = stress.nvbandwidth_failures(outcomes)
    if failed:
        _fail(facts, "nvbandwidth testcases failed", [o.line() for o in failed])


def test_matmul_burn(facts: HostFacts, expected: Expected, inventory_data: dict[str, Any]) -> None:
    """The full-size smoke test (matmul burn with result checks) with each Python environment that
    has a framework; judged like the functional smoke test."""
    need_spec(expected)
    try:
        pythons = check_pythons(inventory_data.get("gpuhost_pythons"))
    except GpuhostError as exc:
        pytest.fail(f"{facts.name}: {exc}", pytrace=False)
    timeout = float(inventory_data.get("gpuhost_burn_timeout") or BURN_TIMEOUT_S)
    failures, ran = [], 0
    for python in pythons:
        result = facts.host.run(smoke.remote_command(python, quick=False, timeout=timeout))
        if result.stdout.startswith(smoke.NOT_FOUND_MARK):
            continue
        try:
            doc = parse_result_text(result.stdout, f"smoke script with {python} on {facts.name}")
        except GpuhostError as exc:
            failures.append(f"{python}: {exc} (exit {result.rc})")
            continue
        outcome = smoke.judge_run(python, judge(doc, Expectations()), set(), explicit=False)
        if outcome.outcome == smoke.SKIPPED:
            continue
        ran += 1
        if outcome.outcome == smoke.FAILED:
            failures.append(outcome.message)
    if failures:
        _fail(facts, "matmul burn", failures)
    if not ran:
        pytest.skip(f"no Python environment on {facts.name} has torch or tensorflow to burn with")
