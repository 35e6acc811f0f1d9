"""What the fabric checks and the health tier read: the audit probe's fabric commands run on the
host (``fabric_view``), and this machine's RDMA ports straight from sysfs (``port_problems``, the
health tier's cheap part: no command, no network)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gpuhost.errors import ParseError
from gpuhost.fabric import judge
from gpuhost.fabric.counters import CounterStore
from gpuhost.fabric.expected import FabricExpectation, expectation, node_class
from gpuhost.fabric.model import FabricFacts, FabricTexts, read_fabric
from gpuhost.findings import ERROR, Finding
from gpuhost.parsers.fabric import RDMA_FILES, SYSFS_ROOT, parse_ib_sysfs
from gpuhost.parsers.nvidia_smi import SmiReport
from gpuhost.probe.script import (
    IOMMU_CODE,
    LSPCI_CODE,
    PEERMEM_CODE,
    RDMA_PORTS_CODE,
    TOPO_CODE,
)
from gpuhost.statedir import check_state_dir, default_state_dir


class _Host(Protocol):
    name: str

    @property
    def smi(self) -> SmiReport | None: ...


@dataclass(frozen=True)
class FabricView:
    """One host's fabric facts, its expectation and running kernel."""

    host: str
    facts: FabricFacts
    expected: FabricExpectation | None
    kernel: str | None
    problems: tuple[str, ...] = ()

    @property
    def absent(self) -> str | None:
        """Why the fabric checks do not apply (no RDMA port, nothing requires one), or None."""
        return judge.absent_reason(self.facts.ports, self.expected)


def gpu_names(smi: SmiReport | None) -> list[str]:
    return [gpu.name or "" for gpu in smi.gpus] if smi is not None and smi.ok else []


def fabric_view(run: Callable[[str], str], host: _Host, data: Mapping[str, Any]) -> FabricView:
    """Run the probe's fabric commands through ``run`` (stdout of a shell command)."""
    ports = run(RDMA_PORTS_CODE)
    has_rdma = bool(ports.strip())
    texts = FabricTexts(
        ports=ports,
        peermem=run(PEERMEM_CODE),
        iommu=run(IOMMU_CODE) if has_rdma else None,
        lspci=run(f"command -v lspci >/dev/null || exit 0; {LSPCI_CODE}") if has_rdma else None,
        topo=run(f"command -v nvidia-smi >/dev/null || exit 0; {TOPO_CODE} 2>/dev/null; true")
        if has_rdma
        else None,
    )
    facts, problems = read_fabric(texts)
    expected = expectation(gpu_names(host.smi), data)
    kernel = run("uname -r").strip() or None
    return FabricView(host.name, facts, expected, kernel, tuple(problems))


def counter_key(check_host: str) -> str:
    """The host's name in the counter files, as the audit names it: the inventory name
    (testinfra's ``ssh://NAME``), ``localhost`` for this machine."""
    return "localhost" if check_host == "local" else check_host.removeprefix("ssh://")


def counter_store() -> CounterStore:
    """The state folder's counter files (a ConfigError when the folder is unsafe: the check
    fails with that line)."""
    state = default_state_dir(os.environ, Path.home())
    check_state_dir(state)
    return CounterStore(state)


def read_sysfs_ports(root: str = "") -> str:
    """This machine's port files as the probe's ``grep -H .`` lines (``root``: for tests)."""
    base = Path(root + SYSFS_ROOT)
    lines = []
    for device in sorted(base.iterdir()) if base.is_dir() else []:
        for port in sorted((device / "ports").glob("*")):
            for name in RDMA_FILES:
                try:
                    value = (port / name).read_text(encoding="utf-8", errors="replace").strip()
                except OSError:
                    continue
                lines.append(f"{SYSFS_ROOT}/{device.name}/ports/{port.name}/{name}:{value}")
    return "\n".join(lines) + "\n" if lines else ""


def port_problems(gpus: Sequence[str], ports_text: str) -> list[Finding]:
    """The health tier's fabric part: this machine's RDMA ports (``read_sysfs_ports``) down, slow
    or fewer than its node class (found from its GPU names) has, as the audit's findings; [] on
    a machine without any RDMA port (the health tier has no inventory: a node built without a
    fabric is not drained)."""
    try:
        ports = parse_ib_sysfs(ports_text)
    except ParseError as exc:
        return [Finding("fabric.ports", ERROR, f"{SYSFS_ROOT}: {exc}", action=judge.HARDWARE)]
    if not ports:
        return []
    expected = node_class(gpus) or FabricExpectation("present ports")
    return judge.port_findings(ports, expected)
