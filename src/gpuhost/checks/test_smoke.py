"""Functional tier: the PyTorch/TensorFlow GPU smoke test (gpuhost.smoke) run on the host with
each Python environment named in inventory data, and in a container when Docker is present.

Policy for COULD-NOT-RUN outcomes: gpuhost.checks_support.smoke (docs/checks.md)."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from gpuhost.checks.checklib import HostFacts, need_spec
from gpuhost.checks_support import smoke
from gpuhost.checks_support.expected import Expected
from gpuhost.errors import GpuhostError
from gpuhost.matrix.peaks import smoke_references
from gpuhost.probe.script import check_pythons
from gpuhost.smoke import Expectations, SmokeResult, judge, parse_result_text
from gpuhost.smoke.judge import gpu_names

pytestmark = pytest.mark.functional
DEFAULT_TIMEOUT_S = 300.0


def _expectations(data: dict[str, Any], result: SmokeResult) -> Expectations:
    """GPU count from inventory data; perf references = the GPUs' published peaks
    (data/gpu_peaks.yaml, with its required fractions)."""
    gpus = data.get("gpuhost_gpus")
    return Expectations(
        gpu_count=len(gpus) if isinstance(gpus, list) and gpus else None,
        references=smoke_references(gpu_names(result)),
    )


def _expected_frameworks(expected: Expected, data: dict[str, Any]) -> set[str]:
    from gpuhost.deploys.guards import load_profile_table

    pins: tuple[str, ...] = ()
    if expected.profile:
        try:
            table = load_profile_table(data.get("gpuhost_profiles_file"))
            pins = table[expected.profile].frameworks if expected.profile in table else ()
        except GpuhostError:
            pins = ()
    return smoke.expected_frameworks(pins, data.get("gpuhost_smoke_frameworks") or [])


def _run(facts: HostFacts, command: str, label: str) -> SmokeResult | str:
    """The judged document, or the reason there is none (a string)."""
    result = facts.host.run(command)
    if result.stdout.startswith(smoke.NOT_FOUND_MARK):
        return result.stdout.strip()
    try:
        return parse_result_text(result.stdout, f"smoke script with {label} on {facts.name}")
    except GpuhostError as exc:
        tail = result.stderr.strip()[-800:]
        return f"{exc} (exit {result.rc}; stderr: {tail or 'empty'})"


def test_smoke_python_envs(
    facts: HostFacts, expected: Expected, inventory_data: dict[str, Any]
) -> None:
    """The smoke test passes with every Python environment of the host (inventory data
    gpuhost_pythons, else python3)."""
    need_spec(expected)
    data = inventory_data
    explicit = data.get("gpuhost_pythons") is not None
    try:
        pythons = check_pythons(data.get("gpuhost_pythons"))
    except GpuhostError as exc:
        pytest.fail(f"{facts.name}: {exc}", pytrace=False)
    wanted = _expected_frameworks(expected, data)
    timeout = float(data.get("gpuhost_smoke_timeout") or DEFAULT_TIMEOUT_S)
    failures: list[str] = []
    skips: list[str] = []
    for python in pythons:
        command = smoke.remote_command(python, quick=True, timeout=timeout)
        got = _run(facts, command, python)
        if isinstance(got, str):
            if got.startswith(smoke.NOT_FOUND_MARK) and not explicit and not wanted:
                skips.append(
                    f"smoke test COULD-NOT-RUN: {python} is not installed and no framework is "
                    "expected"
                )
            else:
                failures.append(f"{python}: {got}")
            continue
        outcome = smoke.judge_run(python, judge(got, _expectations(data, got)), wanted, explicit)
        if outcome.outcome == smoke.FAILED:
            failures.append(outcome.message)
        elif outcome.outcome == smoke.SKIPPED:
            skips.append(outcome.message)
    if failures:
        pytest.fail(f"{facts.name}: smoke test:\n" + "\n".join(failures), pytrace=False)
    if skips and len(skips) == len(pythons):
        pytest.skip(f"{facts.name}: " + "; ".join(skips))


def test_smoke_in_container(
    facts: HostFacts, expected: Expected, inventory_data: dict[str, Any]
) -> None:
    """``docker run --gpus all`` of the image inventory data gpuhost_smoke_image names runs the
    same smoke test (Docker and the nvidia runtime working end to end)."""
    need_spec(expected)
    if not facts.has("docker"):
        pytest.skip(f"Docker is not installed on {facts.name}")
    image = inventory_data.get("gpuhost_smoke_image")
    if not image:
        pytest.skip("inventory data gpuhost_smoke_image names no image for the container smoke run")
    timeout = float(inventory_data.get("gpuhost_smoke_timeout") or DEFAULT_TIMEOUT_S)
    docker = f"docker run --rm --gpus all -i {shlex.quote(str(image))} sh -c " + shlex.quote(
        smoke.remote_command("python3", quick=True, timeout=timeout)
    )
    got = _run(facts, docker, f"python3 in {image}")
    if isinstance(got, str):
        pytest.fail(f"{facts.name}: container smoke run: {got}", pytrace=False)
    wanted = _expected_frameworks(expected, inventory_data) or {"torch"}
    outcome = smoke.judge_run(
        f"python3 in {image}", judge(got, _expectations(inventory_data, got)), wanted, True
    )
    if outcome.outcome != smoke.PASSED:
        pytest.fail(f"{facts.name}: container smoke run:\n{outcome.message}", pytrace=False)
