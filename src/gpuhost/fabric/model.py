"""What a host shows of its fabric, as the audit's probe and the checks read it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from gpuhost.errors import ParseError
from gpuhost.parsers.fabric import (
    IbPort,
    IommuInfo,
    PciFunction,
    parse_ib_sysfs,
    parse_iommu,
    parse_lspci,
    peermem_loaded,
)
from gpuhost.parsers.topo import Topology, parse_topo

T = TypeVar("T")


@dataclass(frozen=True)
class FabricFacts:
    """``ports``: RDMA ports from /sys/class/infiniband (none: no RDMA device);
    ``peermem``: nvidia_peermem loaded; ``pci``: ``lspci -D -vvv`` (None: not read, e.g. lspci
    missing or not root, then ``pci_problem`` says why); ``iommu``: the IOMMU's mode (None: not
    read); ``topology``: ``nvidia-smi topo -m`` (None: not read)."""

    ports: list[IbPort] = field(default_factory=list)
    peermem: bool = False
    pci: list[PciFunction] | None = None
    pci_problem: str | None = None
    iommu: IommuInfo | None = None
    topology: Topology | None = None


@dataclass(frozen=True)
class FabricTexts:
    """What the probe's fabric sections (or the checks' same commands) printed; None: the
    command did not run (no RDMA device, tool missing)."""

    ports: str = ""
    peermem: str = ""
    iommu: str | None = None
    lspci: str | None = None
    topo: str | None = None


LSPCI_DENIED = "lspci could not read the PCIe capabilities (not run as root): ACS not checked"


def read_fabric(texts: FabricTexts) -> tuple[FabricFacts, list[str]]:
    """FabricFacts from the texts, and one problem line per text that could not be read."""
    problems: list[str] = []

    def parse(name: str, parser: Callable[[str], T], text: str, default: T) -> T:
        try:
            return parser(text)
        except ParseError as exc:
            problems.append(f"{name}: {exc}")
            return default

    no_ports: list[IbPort] = []
    ports = parse("rdma-ports", parse_ib_sysfs, texts.ports, no_ports)
    iommu = None
    if texts.iommu is not None and texts.iommu.strip():
        values = [line.partition("=") for line in texts.iommu.splitlines()]
        cmdline = next((v for k, _, v in values if k == "cmdline"), "")
        units = "\n".join(v for k, _, v in values if k == "unit")
        iommu = parse("iommu", lambda t: parse_iommu(t, units), cmdline, None)
    pci: list[PciFunction] | None = None
    pci_problem = None
    if texts.lspci is not None and "access denied" in texts.lspci:
        pci_problem = LSPCI_DENIED
    elif texts.lspci is not None and texts.lspci.strip():
        pci = parse("lspci", parse_lspci, texts.lspci, None)
    topology = None
    if texts.topo is not None and texts.topo.strip():
        topology = parse("nvidia-topo", parse_topo, texts.topo, None)
    facts = FabricFacts(
        ports=ports,
        peermem=peermem_loaded(texts.peermem, ""),
        pci=pci,
        pci_problem=pci_problem,
        iommu=iommu,
        topology=topology,
    )
    return facts, problems
