"""The fabric judgement (pure): facts and the expectation in, findings out. The audit's
``fabric.*`` rules, the ``fabric`` check tier and the health tier all call these.

Finding ids (docs/audit-report.md): ``fabric.ports-missing``, ``fabric.port-down``,
``fabric.port-rate``, ``fabric.link-layer``, ``fabric.counters-growing``, ``fabric.peermem``,
``fabric.acs``, ``fabric.iommu``, ``fabric.affinity``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from gpuhost.fabric.expected import FabricExpectation
from gpuhost.findings import ERROR, WARNING, Finding
from gpuhost.parsers.fabric import ERROR_COUNTERS, IbPort, IommuInfo, PciFunction
from gpuhost.parsers.topo import Topology

Counters = dict[str, dict[str, int]]  # "mlx5_0/1" -> {counter: value}
DMABUF_KERNEL = (5, 12)
#: the redirect/blocking ACS controls that send peer-to-peer traffic up to the root complex
ACS_REDIRECTS = ("ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl")
NEAR_LINKS = ("PIX", "PXB")
# What each finding calls for (gpuhost.findings.ACTIONS): a port, link or counter fault is the
# cable, transceiver, adapter or switch port; ACS and the IOMMU change in the BIOS or on the
# kernel command line, then a reboot; nvidia_peermem is a module to load (no action of the list
# fits: none is set).
HARDWARE = "inspect-hardware"
REBOOT = "reboot"
_KERNEL_RE = re.compile(r"^(\d+)\.(\d+)")
#: why every fabric rule and check skips on a host without a fabric
NO_FABRIC = (
    "no RDMA port (/sys/class/infiniband is empty or absent) and no fabric expected (no node "
    "class of data/node_classes.yaml matches the GPUs, no gpuhost_node)"
)


def absent_reason(ports: Sequence[IbPort], exp: FabricExpectation | None) -> str | None:
    """Why the fabric is not judged on a host (None: it is): no RDMA port, and nothing or only a
    node class expects one (the inventory's gpuhost_fabric makes a missing fabric a fault)."""
    if ports:
        return None
    if exp is None:
        return NO_FABRIC
    if exp.required:
        return None
    return (
        f"no RDMA port (/sys/class/infiniband is empty or absent); the node class {exp.name} "
        f"has {exp.ports} {exp.link_layer} ports, judged only on a host that has RDMA ports or "
        "whose inventory data gpuhost_fabric asks for them"
    )


def fabric_ports(ports: Iterable[IbPort], exp: FabricExpectation | None) -> list[IbPort]:
    """The compute fabric's ports: those of the expected link layer (all without one)."""
    if exp is None or exp.link_layer is None:
        return list(ports)
    return [p for p in ports if p.link_layer == exp.link_layer]


def _names(ports: Sequence[IbPort], limit: int = 8) -> str:
    names = [p.name for p in ports[:limit]]
    return ", ".join(names) + (f" (+{len(ports) - limit} more)" if len(ports) > limit else "")


def port_findings(ports: Sequence[IbPort], exp: FabricExpectation) -> list[Finding]:
    """Count, state, rate and link layer of the ports against ``exp``."""
    found: list[Finding] = []
    mine = fabric_ports(ports, exp)
    layer = exp.link_layer or "RDMA"
    if exp.ports is not None and len(mine) < exp.ports:
        others = [p for p in ports if p not in mine]
        seen = f"; also {_names(others)} of another link layer" if others else ""
        found.append(
            Finding(
                "fabric.ports-missing" if not others else "fabric.link-layer",
                ERROR,
                f"{len(mine)} {layer} port(s), expected {exp.ports} ({exp.name}){seen}",
                found=f"{len(mine)} {layer} port(s): {_names(mine) or 'none'}{seen}",
                expected=f"{exp.ports} {layer} ports ({exp.source})",
                fix="check that every adapter is seated and its driver loaded (ibstat, "
                "ibv_devinfo); a port in Ethernet mode: set its link type (mlxconfig "
                "LINK_TYPE_P1)",
                action=HARDWARE,
            )
        )
    down = [p for p in mine if not p.active]
    if down:
        states = ", ".join(f"{p.name} {p.state or '?'}/{p.phys_state or '?'}" for p in down[:8])
        found.append(
            Finding(
                "fabric.port-down",
                ERROR,
                f"{len(down)} {layer} port(s) not ACTIVE/LinkUp: {states}",
                found=states,
                expected="every fabric port ACTIVE with physical state LinkUp",
                fix="check the cable and the switch port; an InfiniBand port stuck in INIT "
                "has no subnet manager (opensm / UFM)",
                action=HARDWARE,
            )
        )
    if exp.rate_gbps is not None:
        slow = [p for p in mine if p.active and (p.rate_gbps or 0) < exp.rate_gbps]
        if slow:
            rates = ", ".join(f"{p.name} {p.rate or 'unknown'}" for p in slow[:8])
            found.append(
                Finding(
                    "fabric.port-rate",
                    ERROR,
                    f"{len(slow)} port(s) below {exp.rate_gbps:g} Gb/s: {rates}",
                    found=rates,
                    expected=f"at least {exp.rate_gbps:g} Gb/s per port ({exp.source})",
                    fix="reseat or replace the cable/transceiver; check the switch port's "
                    "speed and width (a lane down halves the rate)",
                    action=HARDWARE,
                )
            )
    return found


def snapshot(ports: Iterable[IbPort]) -> Counters:
    """The error counters to keep until the next run."""
    return {
        p.name: {k: v for k, v in p.counters.items() if k in ERROR_COUNTERS}
        for p in ports
        if p.counters
    }


def counter_findings(
    ports: Sequence[IbPort], previous: Mapping[str, Mapping[str, int]]
) -> list[Finding]:
    """Error counters that grew since ``previous`` (a counter that went down was reset: not
    growth)."""
    grew: list[str] = []
    for port in ports:
        before = previous.get(port.name, {})
        for name in ERROR_COUNTERS:
            now, then = port.counters.get(name), before.get(name)
            if now is not None and then is not None and now > then:
                grew.append(f"{port.name} {name} {then} -> {now} (+{now - then})")
    if not grew:
        return []
    return [
        Finding(
            "fabric.counters-growing",
            ERROR,
            f"error counters grew since the last run: {'; '.join(grew[:6])}"
            + (f" (+{len(grew) - 6} more)" if len(grew) > 6 else ""),
            found="; ".join(grew),
            expected="no growth of symbol errors, link downs or receive errors between runs",
            fix="a flapping or noisy link: check the cable/transceiver of the named port and "
            "its switch port; drain the node if link_downed keeps growing",
            action=HARDWARE,
        )
    ]


def _kernel_at_least(release: str | None, wanted: tuple[int, int]) -> bool:
    match = _KERNEL_RE.match(release or "")
    return match is not None and (int(match.group(1)), int(match.group(2))) >= wanted


def dmabuf_possible(kernel: str | None, module_flavor: str | None) -> bool:
    """DMA-BUF GPUDirect RDMA: the open GPU kernel module on kernel 5.12 or later."""
    return module_flavor == "open" and _kernel_at_least(kernel, DMABUF_KERNEL)


def gpudirect_findings(
    peermem: bool, exp: FabricExpectation, kernel: str | None, module_flavor: str | None
) -> list[Finding]:
    if not exp.peermem or peermem or dmabuf_possible(kernel, module_flavor):
        return []
    flavor = module_flavor or "no loaded module"
    return [
        Finding(
            "fabric.peermem",
            ERROR,
            "GPUDirect RDMA unavailable: nvidia_peermem is not loaded and DMA-BUF needs the "
            f"open kernel module on kernel >= 5.12 (found {flavor}, kernel {kernel or '?'})",
            found=f"nvidia_peermem not loaded; module {flavor}; kernel {kernel or '?'}",
            expected=f"nvidia_peermem loaded, or DMA-BUF support ({exp.source})",
            fix="modprobe nvidia_peermem, and load it at boot (/etc/modules-load.d)",
        )
    ]


def _is_gpu(fn: PciFunction) -> bool:
    return "NVIDIA" in fn.description and fn.description.startswith(
        ("3D controller", "VGA compatible controller")
    )


def _is_nic(fn: PciFunction) -> bool:
    d = fn.description
    return d.startswith("Infiniband controller") or (
        d.startswith("Ethernet controller") and "Mellanox" in d
    )


def _upstream(bridges: Sequence[PciFunction], fn: PciFunction) -> list[PciFunction]:
    return [
        b
        for b in bridges
        if b.domain == fn.domain
        and b is not fn
        and (b.secondary or 0) <= fn.bus <= (b.subordinate or -1)
    ]


def acs_bridges(pci: Sequence[PciFunction]) -> list[PciFunction]:
    """PCIe switch ports above a GPU or an RDMA NIC whose ACS redirects peer-to-peer traffic
    (root ports, which have no bridge above them, are left out)."""
    bridges = [fn for fn in pci if fn.bridge]
    flagged: dict[str, PciFunction] = {}
    for end in (fn for fn in pci if _is_gpu(fn) or _is_nic(fn)):
        for bridge in _upstream(bridges, end):
            on = [k for k in ACS_REDIRECTS if (bridge.acs or {}).get(k)]
            if on and _upstream(bridges, bridge):
                flagged[bridge.address] = bridge
    return [flagged[a] for a in sorted(flagged)]


def pcie_findings(pci: Sequence[PciFunction] | None, iommu: IommuInfo | None) -> list[Finding]:
    found: list[Finding] = []
    flagged = acs_bridges(pci or [])
    if flagged:
        lines = [
            f"{b.address} " + " ".join(f"{k}+" for k in ACS_REDIRECTS if (b.acs or {}).get(k))
            for b in flagged
        ]
        found.append(
            Finding(
                "fabric.acs",
                ERROR,
                f"PCIe ACS redirects peer-to-peer on {len(flagged)} switch port(s) between GPUs "
                f"and NICs: {'; '.join(lines[:6])}",
                found="; ".join(lines),
                expected="ACSCtl ReqRedir- CmpltRedir- (ACS off) on the switches between GPUs "
                "and NICs (NCCL troubleshooting: PCI Access Control Services)",
                fix="disable ACS in the BIOS, or at boot: setpci -s BRIDGE ECAP_ACS+0x6.w=0000",
                action=REBOOT,
            )
        )
    if iommu is not None and iommu.mode == "translated":
        found.append(
            Finding(
                "fabric.iommu",
                WARNING,
                "the IOMMU translates DMA (no iommu=pt): GPUDirect RDMA and GPU peer-to-peer go "
                "through it, slower or refused",
                found=f"IOMMU units {', '.join(iommu.units[:4])}; options: "
                f"{' '.join(iommu.options) or 'none'}",
                expected="iommu=pt (passthrough) or the IOMMU off on the kernel command line",
                fix="add iommu=pt to the kernel command line (GRUB_CMDLINE_LINUX) and reboot",
                action=REBOOT,
            )
        )
    return found


def affinity_findings(topology: Topology, nics: Iterable[str]) -> list[Finding]:
    """GPUs with no fabric NIC behind the same PCIe switch (PIX/PXB) in ``nvidia-smi topo -m``."""
    wanted = set(nics)
    labels = [label for label, name in topology.nic_names.items() if not wanted or name in wanted]
    far: list[str] = []
    for gpu, row in topology.links.items():
        if gpu.startswith("GPU") and not any(row.get(n) in NEAR_LINKS for n in labels):
            best = sorted({row.get(n, "?") for n in labels})
            far.append(f"{gpu} ({'/'.join(best)})")
    if not far:
        return []
    return [
        Finding(
            "fabric.affinity",
            WARNING,
            f"{len(far)} GPU(s) have no fabric NIC on their PCIe switch: {', '.join(far[:8])}",
            found=", ".join(far),
            expected="every GPU with a fabric NIC at PIX or PXB in nvidia-smi topo -m",
            fix="check the NICs' slots against the board's GPU/NIC pairing; NCCL then sends "
            "these GPUs' traffic across the CPU interconnect",
            action=HARDWARE,
        )
    ]
