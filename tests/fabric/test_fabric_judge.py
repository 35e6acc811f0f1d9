"""The fabric judgement: each fault on real captures (or a declared variant) gives its finding."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpuhost.fabric import judge
from gpuhost.fabric.expected import FabricExpectation, expectation, node_class
from gpuhost.gpus.node_classes import load_classes
from gpuhost.parsers.fabric import IommuInfo, parse_ib_sysfs, parse_lspci
from gpuhost.parsers.topo import parse_topo

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fabric"
H100 = ["NVIDIA H100 80GB HBM3"] * 8


def ports(name: str = "sysfs-h100-8x-cx7.txt"):  # type: ignore[no-untyped-def]
    return parse_ib_sysfs((FIXTURES / name).read_text())


def hgx() -> FabricExpectation:
    found = node_class(H100)
    assert found is not None
    return found


def ids(findings) -> list[str]:  # type: ignore[no-untyped-def]
    return [f.rule for f in findings]


def test_every_class_row_names_its_source_and_an_hgx_h100_matches() -> None:
    assert all(row.fabric.source.strip() for row in load_classes() if row.fabric)
    assert hgx().name == "hgx-h100-8gpu" and hgx().ports == 8 and hgx().rate_gbps == 400
    assert node_class(H100[:2]) is None  # two GPUs are no HGX board
    assert node_class(["Tesla T4"]) is None


def test_the_inventory_overrides_the_class_and_stands_alone() -> None:
    over = expectation(H100, {"gpuhost_fabric": {"rate_gbps": 200, "ports": 4}})
    assert over is not None and (over.ports, over.rate_gbps, over.link_layer) == (
        4,
        200.0,
        "InfiniBand",
    )
    assert "gpuhost_fabric over hgx-h100-8gpu" in over.source
    node = expectation(H100, {"gpuhost_node": {"ports": 4, "gpus": 8}})
    assert node is not None and node.ports == 4 and node.source.startswith(
        "inventory data gpuhost_node over hgx-h100-8gpu"
    )
    alone = expectation([], {"gpuhost_fabric": {"ports": 2, "link_layer": "Ethernet"}})
    assert alone is not None and alone.ports == 2 and not alone.peermem
    assert expectation([], {}) is None


def test_the_captured_h100_node_is_clean() -> None:
    assert judge.port_findings(ports(), hgx()) == []


def test_a_port_down_a_slow_port_and_a_missing_port() -> None:
    now = ports()
    now[0] = replace(now[0], state="DOWN", phys_state="Polling")
    now[1] = replace(now[1], rate_gbps=200.0, rate="200 Gb/sec (4X HDR)")
    found = judge.port_findings(now, hgx())
    assert ids(found) == ["fabric.port-down", "fabric.port-rate"]
    assert {f.action for f in found} == {"inspect-hardware"}
    assert "mlx5_0/1 DOWN/Polling" in found[0].message
    assert "mlx5_1/1 200 Gb/sec (4X HDR)" in found[1].message
    missing = judge.port_findings(ports()[1:], hgx())
    assert ids(missing) == ["fabric.link-layer"]  # 7 IB ports, and an Ethernet one seen
    only_ib = [p for p in ports()[1:] if p.link_layer == "InfiniBand"]
    assert ids(judge.port_findings(only_ib, hgx())) == ["fabric.ports-missing"]


def test_counters_growing_between_runs() -> None:
    now = ports()
    before = judge.snapshot(now)
    assert before == {"mlx5_1/1": {"link_downed": 255, "excessive_buffer_overrun_errors": 15}}
    assert judge.counter_findings(now, before) == []
    grown = [
        replace(p, counters={**p.counters, "link_downed": 258}) if p.device == "mlx5_1" else p
        for p in now
    ]
    (finding,) = judge.counter_findings(grown, before)
    assert finding.rule == "fabric.counters-growing" and "link_downed 255 -> 258 (+3)" in (
        finding.message
    )
    reset = [replace(p, counters={"link_downed": 0}) if p.device == "mlx5_1" else p for p in now]
    assert judge.counter_findings(reset, before) == []  # a reset is no growth


@pytest.mark.parametrize(
    ("peermem", "kernel", "flavor", "expected"),
    [
        (True, "6.1.0-56-amd64", "proprietary", []),
        (False, "6.1.0-56-amd64", "open", []),  # DMA-BUF
        (False, "5.10.0-30-amd64", "open", ["fabric.peermem"]),
        (False, "6.1.0-56-amd64", "proprietary", ["fabric.peermem"]),
        (False, "6.1.0-56-amd64", None, ["fabric.peermem"]),
    ],
)
def test_gpudirect_rdma(
    peermem: bool, kernel: str, flavor: str | None, expected: list[str]
) -> None:
    assert ids(judge.gpudirect_findings(peermem, hgx(), kernel, flavor)) == expected


def test_acs_on_the_switch_between_a_gpu_and_a_nic() -> None:
    on = parse_lspci((FIXTURES / "lspci-gpu-nic-switch-acs-on.txt").read_text())
    off = parse_lspci((FIXTURES / "lspci-gpu-nic-switch-acs-off.txt").read_text())
    assert [b.address for b in judge.acs_bridges(on)] == ["0000:02:08.0", "0000:02:10.0"]
    (finding,) = judge.pcie_findings(on, None)
    assert finding.action == "reboot"
    assert finding.rule == "fabric.acs" and "0000:02:08.0 ReqRedir+ CmpltRedir+" in finding.message
    assert judge.pcie_findings(off, None) == []  # the root port's ACS is not judged


def test_the_iommu_translating_dma_is_a_warning() -> None:
    translated = IommuInfo("translated", ["intel_iommu=on"], ["dmar0"])
    assert ids(judge.pcie_findings([], translated)) == ["fabric.iommu"]
    assert judge.pcie_findings([], IommuInfo("passthrough", ["iommu=pt"], ["dmar0"])) == []


def test_gpu_nic_affinity_from_the_topology() -> None:
    near = parse_topo((FIXTURES / "topo-8x-a100-17nics.txt").read_text())
    far = parse_topo((FIXTURES / "topo-4x-a10-sys-2nics.txt").read_text())
    assert near is not None and far is not None
    assert judge.affinity_findings(near, {"mlx5_2", "mlx5_6", "mlx5_10", "mlx5_14"}) == []
    (finding,) = judge.affinity_findings(far, {"mlx5_0", "mlx5_1"})
    assert finding.rule == "fabric.affinity" and "4 GPU(s)" in finding.message


def test_a_node_class_alone_never_requires_a_fabric_the_inventory_does() -> None:
    assert judge.absent_reason([], None) == judge.NO_FABRIC
    why = judge.absent_reason([], hgx())
    assert why is not None and "node class hgx-h100-8gpu has 8 InfiniBand ports" in why
    required = expectation(H100, {"gpuhost_fabric": {"ports": 8}})
    assert judge.absent_reason([], required) is None
    assert required is not None and [f.rule for f in judge.port_findings([], required)] == [
        "fabric.ports-missing"
    ]
    assert judge.absent_reason(ports(), hgx()) is None  # ports present: judged by the class
