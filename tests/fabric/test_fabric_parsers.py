"""The fabric parsers on real captures (tests/fixtures/fabric/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.errors import ParseError
from gpuhost.parsers.fabric import (
    parse_ib_sysfs,
    parse_ibstat,
    parse_ibv_devinfo,
    parse_iommu,
    parse_lspci,
    peermem_loaded,
)
from gpuhost.parsers.topo import parse_topo

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fabric"


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_the_h100_nodes_sysfs_has_eight_ndr_infiniband_ports_and_a_roce_bond() -> None:
    ports = parse_ib_sysfs(read("sysfs-h100-8x-cx7.txt"))
    ib = [p for p in ports if p.link_layer == "InfiniBand"]
    assert len(ports) == 9 and len(ib) == 8
    assert all(p.active and p.rate_gbps == 400.0 for p in ports)
    assert ports[0].state == "ACTIVE" and ports[0].phys_state == "LinkUp"
    assert ports[0].rate == "400 Gb/sec (4X NDR)"
    bond = next(p for p in ports if p.device == "mlx5_bond_0")
    assert bond.link_layer == "Ethernet"
    one = next(p for p in ports if p.device == "mlx5_1")
    assert one.counters == {"link_downed": 255, "excessive_buffer_overrun_errors": 15}


def test_a_counter_without_a_pma_is_left_out_and_other_lines_are_refused() -> None:
    text = (
        "/sys/class/infiniband/mlx5_0/ports/1/state:1: DOWN\n"
        "/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error:N/A (no PMA)\n"
    )
    port = parse_ib_sysfs(text)[0]
    assert port.state == "DOWN" and not port.active and port.counters == {}
    with pytest.raises(ParseError, match="FILE:VALUE"):
        parse_ib_sysfs("grep: /sys/class/infiniband: No such file\n")


def test_ibstat_of_a_down_and_an_active_port() -> None:
    ports = parse_ibstat(read("ibstat-mlx4-rdma-core-847.txt"))
    assert [(p.name, p.state, p.phys_state, p.rate_gbps) for p in ports] == [
        ("mlx4_0/1", "DOWN", "Disabled", 10.0),
        ("mlx4_0/2", "ACTIVE", "LinkUp", 56.0),
    ]
    assert ports[0].link_layer == "InfiniBand" and not ports[0].active and ports[1].active


def test_ibstat_with_elided_identifiers_and_an_ibpanic_line() -> None:
    (port,) = parse_ibstat(read("ibstat-gpud-752.txt"))
    assert port.name == "mlx5_7/1" and port.active and port.rate_gbps == 200.0
    with pytest.raises(ParseError):
        parse_ibstat("ibpanic: nothing here\n")


def test_lspci_bridges_bus_ranges_and_acs_controls() -> None:
    (bridge,) = parse_lspci(read("lspci-plx-excerpt.txt"))
    assert bridge.address == "0000:02:08.0" and bridge.bridge
    assert (bridge.secondary, bridge.subordinate) == (0x82, 0x82) and bridge.acs is None
    functions = {f.address: f for f in parse_lspci(read("lspci-gpu-nic-switch-acs-on.txt"))}
    port = functions["0000:02:08.0"]
    assert port.acs is not None and port.acs["ReqRedir"] and not port.acs["TransBlk"]
    assert functions["0000:03:00.0"].description.startswith("3D controller: NVIDIA")
    assert not functions["0000:03:00.0"].bridge


def test_an_address_without_a_domain_is_in_domain_0000() -> None:
    (fn,) = parse_lspci(
        "02:08.0 PCI bridge: PLX\n\tBus: primary=02, secondary=03, subordinate=03\n"
    )
    assert fn.address == "0000:02:08.0" and fn.domain == "0000" and fn.bus == 2


@pytest.mark.parametrize(
    ("cmdline", "units", "mode"),
    [
        ("BOOT_IMAGE=/vmlinuz ro quiet", "", "off"),
        ("BOOT_IMAGE=/vmlinuz ro intel_iommu=on", "dmar0\ndmar1\n", "translated"),
        ("BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt", "dmar0\n", "passthrough"),
        ("ro amd_iommu=off", "ivhd0\n", "passthrough"),
    ],
)
def test_the_iommu_mode(cmdline: str, units: str, mode: str) -> None:
    assert parse_iommu(cmdline, units).mode == mode


def test_peermem_from_proc_modules_or_sys_module() -> None:
    line = "nvidia_peermem 16384 0 - Live 0x0000000000000000 (OE)\n"
    assert peermem_loaded(line, "") and peermem_loaded("", "nv_peer_mem\n")
    assert not peermem_loaded("nvidia_uvm 1 0 - Live 0x0\n", "")


def test_the_topology_names_its_nics() -> None:
    topology = parse_topo(read("topo-8x-a100-17nics.txt"))
    assert topology is not None
    assert topology.nic_names["NIC0"] == "mlx5_2" and topology.nic_names["NIC16"] == "mlx5_bond_0"
    assert topology.links["GPU0"]["NIC0"] == "PXB"


def test_ibv_devinfo_state_and_link_layer() -> None:
    down = parse_ibv_devinfo(read("ibv-devinfo-deepep-60.txt"))
    assert [(p.name, p.state, p.link_layer) for p in down] == [("mlx5_12/1", "DOWN", "Ethernet")]
    (up,) = parse_ibv_devinfo(read("ibv-devinfo-deepep-55.txt"))  # a leading cut block ignored
    assert (up.name, up.state, up.link_layer, up.rate_gbps) == (
        "mlx5_3/1",
        "ACTIVE",
        "InfiniBand",
        None,
    )
    with pytest.raises(ParseError):
        parse_ibv_devinfo("No IB devices found\n")
