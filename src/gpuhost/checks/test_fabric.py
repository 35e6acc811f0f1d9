"""The RDMA fabric of each host (``gpuhost check --tier fabric``): ports against the node class /
``gpuhost_fabric``, error counters growing since the last run, GPUDirect RDMA, PCIe ACS and the
IOMMU, GPU/NIC affinity. The same commands as the audit's probe, the same judgement
(gpuhost.fabric.judge); a host with no RDMA port and nothing expected skips, saying so."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from gpuhost.checks.checklib import HostFacts, fail_with
from gpuhost.checks_support.fabric import (
    FabricView,
    counter_key,
    counter_store,
    fabric_view,
)
from gpuhost.fabric import judge
from gpuhost.findings import Finding

pytestmark = pytest.mark.fabric


@pytest.fixture(scope="module")
def fabric(facts: HostFacts, inventory_data: dict[str, Any]) -> FabricView:
    return fabric_view(lambda code: facts.run(f"sh -c {shlex.quote(code)}"), facts, inventory_data)


def _applies(fabric: FabricView) -> None:
    """Skip where the fabric checks do not apply; fail where its facts cannot be read."""
    __tracebackhide__ = True
    if fabric.absent:
        pytest.skip(f"{fabric.host}: {fabric.absent}")
    if fabric.problems:
        pytest.fail(
            f"{fabric.host}: fabric facts unreadable: {'; '.join(fabric.problems)}", pytrace=False
        )


def _fail(facts: HostFacts, what: str, findings: list[Finding]) -> None:
    __tracebackhide__ = True
    fail_with([f"{f.rule}: {f.message}" for f in findings], f"{facts.name}: {what}")


def test_fabric_ports(facts: HostFacts, fabric: FabricView) -> None:
    """Every compute fabric port ACTIVE/LinkUp at the expected rate, as many as expected."""
    _applies(fabric)
    if fabric.expected is None:
        pytest.skip(
            f"{facts.name}: {len(fabric.facts.ports)} RDMA port(s) but no expected count or "
            "rate (no node class of data/node_classes.yaml matches; set gpuhost_node)"
        )
    _fail(facts, "fabric ports", judge.port_findings(fabric.facts.ports, fabric.expected))


def test_fabric_counters(facts: HostFacts, fabric: FabricView) -> None:
    """Error counters did not grow since the previous run (kept in the state folder)."""
    _applies(fabric)
    now = judge.snapshot(fabric.facts.ports)
    if not now:
        pytest.skip(f"{facts.name}: no RDMA error counter could be read")
    store, key = counter_store(), counter_key(facts.name)  # shared with the audit's runs
    previous = store.load(key)
    store.save(key, now)
    if previous is None:
        pytest.skip(f"{facts.name}: first run: the counters are the baseline for the next one")
    _fail(facts, "fabric error counters", judge.counter_findings(fabric.facts.ports, previous))


def test_gpudirect_rdma(facts: HostFacts, fabric: FabricView) -> None:
    """nvidia_peermem loaded (or DMA-BUF possible) where the node class asks for GPUDirect."""
    _applies(fabric)
    if fabric.expected is None or not fabric.expected.peermem:
        pytest.skip(f"{facts.name}: GPUDirect RDMA not required (node class / gpuhost_node)")
    flavor = facts.module.flavor if facts.module else None
    findings = judge.gpudirect_findings(
        fabric.facts.peermem, fabric.expected, fabric.kernel, flavor
    )
    _fail(facts, "GPUDirect RDMA", findings)


def test_pcie_acs_and_iommu(facts: HostFacts, fabric: FabricView) -> None:
    """No PCIe ACS redirect between GPUs and NICs; the IOMMU in passthrough or off."""
    _applies(fabric)
    if fabric.facts.pci is None and fabric.facts.iommu is None:
        pytest.skip(f"{facts.name}: {fabric.facts.pci_problem or 'lspci and IOMMU not read'}")
    _fail(facts, "PCIe path", judge.pcie_findings(fabric.facts.pci, fabric.facts.iommu))


def test_gpu_nic_affinity(facts: HostFacts, fabric: FabricView) -> None:
    """Every GPU has a fabric NIC on its PCIe switch (nvidia-smi topo -m)."""
    _applies(fabric)
    topology = fabric.facts.topology
    if topology is None or not topology.nic_names:
        pytest.skip(f"{facts.name}: nvidia-smi topo -m was not read or lists no NIC")
    nics = {p.device for p in judge.fabric_ports(fabric.facts.ports, fabric.expected)}
    _fail(facts, "GPU/NIC affinity", judge.affinity_findings(topology, nics))
