"""CUDA toolkit, cuDNN, NVIDIA container toolkit and the container runtimes' nvidia runtime."""

from __future__ import annotations

import json
import shlex

import pytest

from gpuhost.checks.checklib import HostFacts, fail_with, need_spec
from gpuhost.checks_support import packages as pk
from gpuhost.checks_support.expected import Expected
from gpuhost.errors import ParseError
from gpuhost.operations.container_runtime import (
    CONTAINERD_CONFIG,
    DAEMON_JSON,
    RUNTIME_BINARY,
)
from gpuhost.parsers import nvcc_release, parse_nvidia_ctk_version
from gpuhost.versions import extends_version


def _component(facts: HostFacts, names: list[str], version: str | None, label: str) -> None:
    """Installed, at ``version`` (upstream prefix) when given, and held."""
    fail_with(_component_problems(facts, names, version, label), f"{facts.name}: {label}")


def _component_problems(
    facts: HostFacts, names: list[str], version: str | None, label: str
) -> list[str]:
    packages = facts.packages(names)
    problems = [f"{n} is not installed" for n in pk.missing(packages, names)]
    if version:
        for p in pk.installed(packages).values():
            if p.name in names and not extends_version(pk.upstream(p.version), version):
                problems.append(f"{p.name} {p.version} is not {label} {version}")
    if facts.manager is not None:
        problems += [f"{n} is not held" for n in pk.not_held(packages, facts.holds, names)]
    return problems


def test_cuda_toolkit(facts: HostFacts, expected: Expected, inventory_data: dict) -> None:
    """Every CUDA toolkit of the profile is installed at its version and held, and the default
    one's nvcc reports the profile's default CUDA."""
    spec, plan = need_spec(expected)
    if inventory_data.get("gpuhost_install_cuda") is False:
        pytest.skip("inventory data gpuhost_install_cuda is false: this host gets no CUDA toolkit")
    if not plan.cuda_toolkit:
        pytest.skip(f"profile {spec.profile} installs no CUDA toolkit")
    problems = []
    for version, packages in plan.cuda_toolkits.items():
        problems += _component_problems(facts, packages, version, f"CUDA toolkit {version}")
    fail_with(problems, f"{facts.name}: CUDA toolkits {', '.join(plan.cuda_toolkits)}")
    candidates = [f"/usr/local/cuda-{spec.cuda_default}/bin/nvcc", "/usr/local/cuda/bin/nvcc"]
    probe = " ".join(shlex.quote(c) for c in candidates)
    out = facts.run(
        f'for n in {probe} "$(command -v nvcc)"; do [ -x "$n" ] && {{ "$n" --version; break; }}; '
        "done; true"
    )
    try:
        release = nvcc_release(out) if out.strip() else None
    except ParseError as exc:
        pytest.fail(f"{facts.name}: nvcc --version unreadable: {exc}", pytrace=False)
    assert release == spec.cuda_default, (
        f"{facts.name}: nvcc reports CUDA {release or '(no nvcc found)'}, profile {spec.profile} "
        f"wants {spec.cuda_default} (looked at {', '.join(candidates)} and PATH)"
    )


def test_cudnn(facts: HostFacts, expected: Expected) -> None:
    """cuDNN at the profile's version, held."""
    spec, plan = need_spec(expected)
    if not spec.cudnn or not plan.cudnn:
        pytest.skip(f"profile {spec.profile} installs no cuDNN")
    _component(facts, plan.cudnn, spec.cudnn, "cuDNN")


def test_container_toolkit(facts: HostFacts, expected: Expected) -> None:
    """The NVIDIA container toolkit at the profile's version (packages and nvidia-ctk), held."""
    spec, plan = need_spec(expected)
    if not spec.container_toolkit or not plan.container_toolkit:
        pytest.skip(f"profile {spec.profile} installs no NVIDIA container toolkit")
    _component(
        facts, plan.container_toolkit, spec.container_toolkit, "NVIDIA container toolkit"
    )
    try:
        found = parse_nvidia_ctk_version(facts.run("nvidia-ctk --version 2>/dev/null; true"))
    except ParseError as exc:
        pytest.fail(f"{facts.name}: nvidia-ctk --version unreadable: {exc}", pytrace=False)
    assert found == spec.container_toolkit, (
        f"{facts.name}: nvidia-ctk reports {found or '(not installed)'}, profile {spec.profile} "
        f"pins {spec.container_toolkit}"
    )


def _needs_runtime(facts: HostFacts, expected: Expected, binary: str, what: str) -> None:
    __tracebackhide__ = True
    spec, _plan = need_spec(expected)
    if not (facts.has(binary) or facts.has(f"{binary}d")):
        pytest.skip(f"{what} is not installed on {facts.name}")
    if not spec.container_toolkit:
        pytest.skip(
            f"profile {spec.profile} installs no NVIDIA container toolkit, so {what} "
            "is not configured for GPUs"
        )


def test_docker_nvidia_runtime(facts: HostFacts, expected: Expected) -> None:
    """Docker's daemon.json registers the nvidia runtime, and the running daemon knows it."""
    _needs_runtime(facts, expected, "docker", "Docker")
    text = facts.run(f"cat {DAEMON_JSON} 2>/dev/null; true")
    try:
        config = json.loads(text) if text.strip() else {}
    except (ValueError, RecursionError) as exc:
        pytest.fail(f"{facts.name}: {DAEMON_JSON} is not valid JSON ({exc})", pytrace=False)
    runtime = (config.get("runtimes") or {}).get("nvidia") if isinstance(config, dict) else None
    problems = []
    if not isinstance(runtime, dict) or RUNTIME_BINARY not in str(runtime.get("path", "")):
        problems.append(f"{DAEMON_JSON} has no nvidia runtime with path {RUNTIME_BINARY}")
    info = facts.host.run("docker info --format '{{json .Runtimes}}'")
    if info.rc != 0:
        problems.append(f"docker info failed: {info.stderr.strip()[:200]}")
    elif "nvidia" not in info.stdout:
        problems.append(
            f"the running Docker daemon lists no nvidia runtime: {info.stdout[:200]}"
            " (restart docker after changing daemon.json)"
        )
    fail_with(problems, f"{facts.name}: Docker nvidia runtime")


def test_containerd_nvidia_runtime(facts: HostFacts, expected: Expected) -> None:
    """containerd's config registers the nvidia runtime (where containerd is configured)."""
    _needs_runtime(facts, expected, "containerd", "containerd")
    text = facts.run(f"cat {CONTAINERD_CONFIG} 2>/dev/null; true")
    if not text.strip():
        pytest.skip(f"containerd has no {CONTAINERD_CONFIG} on {facts.name} (built-in defaults)")
    assert RUNTIME_BINARY in text, (
        f"{facts.name}: {CONTAINERD_CONFIG} does not mention {RUNTIME_BINARY}: run "
        "`nvidia-ctk runtime configure --runtime=containerd` or gpuhost provision"
    )
