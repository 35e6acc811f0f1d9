"""Parse ``nvidia-smi -q`` text (full, or partial such as ``-q -d CLOCK`` / ``-q -d POWER``).

The text is an indented outline ("Key : Value" lines and section titles); it is read into a small
tree first, then the fields gpuhost needs are looked up by path. Truncated files give what they
contain; text that is not an NVSMI log raises ParseError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuhost.errors import ParseError
from gpuhost.parsers._common import (
    clean,
    first_line,
    sum_known,
    to_bool,
    to_int,
    to_number,
    version_value,
)
from gpuhost.parsers.smi_errors import absent_or_error
from gpuhost.parsers.smi_model import (
    ClockEvents,
    Clocks,
    Ecc,
    Fabric,
    GpuInfo,
    MigMode,
    PcieLink,
    PowerLimits,
    RemappedRows,
    RetiredPages,
    SmiReport,
    pci_device_id,
    reported_name,
)
from gpuhost.parsers.smi_xml import applications_clocks_supported

EXPECTED = "nvidia-smi -q text (an NVSMI LOG)"
HEADER_RE = re.compile(r"^=+\s*NVSMI LOG\s*=+\s*$", re.M)
TOP_KEY_RE = re.compile(r"^(Driver Version|Attached GPUs)\s*:", re.M)
BUS_ID = r"(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]"
GPU_LINE_RE = re.compile(rf"^GPU ({BUS_ID})\s*$")
KEY_VALUE_RE = re.compile(r"^(\s*)(\S.*?)\s+:(?:\s(.*))?$|^(\s*)([^:]+?):\s+(.*)$")
SECTION_RE = re.compile(r"^(\s*)(\S.*?)\s*$")


@dataclass
class Node:
    key: str
    value: str | None = None
    children: list[Node] = field(default_factory=list)

    def child(self, key: str) -> Node | None:
        wanted = key.lower()
        for node in self.children:
            if node.key.lower() == wanted:
                return node
        return None

    def all(self, key: str) -> list[Node]:
        wanted = key.lower()
        return [node for node in self.children if node.key.lower() == wanted]

    def get(self, path: str) -> str | None:
        """Raw value at a "/"-separated path of keys (case-insensitive), or None."""
        node: Node | None = self
        for part in path.split("/"):
            node = node.child(part) if node is not None else None
        return node.value if node is not None else None

    def first(self, *paths: str) -> str | None:
        for path in paths:
            value = self.get(path)
            if clean(value) is not None:
                return value
        return None


def looks_like_query_text(text: str) -> bool:
    return bool(HEADER_RE.search(text) or TOP_KEY_RE.search(text))


def read_outline(text: str) -> Node:
    """The outline as a tree; GPU sections are children keyed "GPU" with the bus id as value."""
    root = Node("")
    stack: list[tuple[int, Node]] = [(-1, root)]
    for line in text.split("\n"):
        if not line.strip() or HEADER_RE.match(line):
            continue
        gpu = GPU_LINE_RE.match(line)
        if gpu:
            indent, node = 0, Node("GPU", gpu.group(1))
        else:
            match = KEY_VALUE_RE.match(line)
            if match:
                if match.group(2) is not None:
                    spaces, key, value = match.group(1), match.group(2), match.group(3)
                else:
                    spaces, key, value = match.group(4), match.group(5), match.group(6)
                indent, node = len(spaces.expandtabs(4)), Node(key.strip(), (value or "").strip())
            else:
                section = SECTION_RE.match(line)
                assert section is not None  # any non-blank line matches
                indent = len(section.group(1).expandtabs(4))
                node = Node(section.group(2).strip())
        while stack[-1][0] >= indent:
            stack.pop()
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root


def _ecc_totals(node: Node | None) -> tuple[int | None, int | None]:
    if node is None:
        return None, None
    if node.child("Single Bit") is not None or node.child("Double Bit") is not None:
        return to_int(node.get("Single Bit/Total")), to_int(node.get("Double Bit/Total"))
    correctable = sum_known(to_int(node.get(k)) for k in ("SRAM Correctable", "DRAM Correctable"))
    uncorrectable = sum_known(
        to_int(node.get(k))
        for k in (
            "SRAM Uncorrectable",
            "SRAM Uncorrectable Parity",
            "SRAM Uncorrectable SEC-DED",
            "DRAM Uncorrectable",
        )
    )
    return correctable, uncorrectable


def _power_node(gpu: Node) -> Node | None:
    return gpu.child("GPU Power Readings") or gpu.child("Power Readings")


def _mig(gpu: Node) -> MigMode:
    devices = gpu.all("MIG Device")
    listing = gpu.child("MIG Devices")
    if listing is not None:
        devices += listing.all("MIG Device")
    return MigMode(
        current=to_bool(gpu.get("MIG Mode/Current")),
        pending=to_bool(gpu.get("MIG Mode/Pending")),
        devices=len(devices),
    )


def _ecc(gpu: Node) -> Ecc:
    ecc_errors = gpu.child("ECC Errors")
    vol_c, vol_u = _ecc_totals(ecc_errors.child("Volatile") if ecc_errors else None)
    agg_c, agg_u = _ecc_totals(ecc_errors.child("Aggregate") if ecc_errors else None)
    return Ecc(
        mode_current=to_bool(gpu.get("ECC Mode/Current")),
        mode_pending=to_bool(gpu.get("ECC Mode/Pending")),
        volatile_correctable=vol_c,
        volatile_uncorrectable=vol_u,
        aggregate_correctable=agg_c,
        aggregate_uncorrectable=agg_u,
    )


def _clocks(gpu: Node) -> Clocks:
    app = [
        gpu.get("Applications Clocks/Graphics"),
        gpu.get("Applications Clocks/Memory"),
        gpu.get("Default Applications Clocks/Graphics"),
        gpu.get("Default Applications Clocks/Memory"),
    ]
    return Clocks(
        graphics=to_int(gpu.get("Clocks/Graphics")),
        sm=to_int(gpu.get("Clocks/SM")),
        mem=to_int(gpu.get("Clocks/Memory")),
        applications_graphics=to_int(app[0]),
        applications_mem=to_int(app[1]),
        default_applications_graphics=to_int(app[2]),
        default_applications_mem=to_int(app[3]),
        max_graphics=to_int(gpu.get("Max Clocks/Graphics")),
        max_sm=to_int(gpu.get("Max Clocks/SM")),
        max_mem=to_int(gpu.get("Max Clocks/Memory")),
        auto_boost=to_bool(gpu.get("Clock Policy/Auto Boost")),
        auto_boost_default=to_bool(gpu.get("Clock Policy/Auto Boost Default")),
        applications_clocks_supported=applications_clocks_supported(app),
    )


def _power(gpu: Node) -> PowerLimits:
    power = _power_node(gpu) or Node("")
    return PowerLimits(
        current=to_number(
            power.first(
                "Current Power Limit",
                "GPU Ceiling Power Limit/Current Power Limit",
                "Enforced Power Limit",
                "Power Limit",
            )
        ),
        default=to_number(
            power.first("Default Power Limit", "GPU Ceiling Power Limit/Default Power Limit")
        ),
        min=to_number(power.get("Min Power Limit")),
        max=to_number(power.get("Max Power Limit")),
        draw=to_number(power.first("Power Draw", "Average Power Draw", "Instantaneous Power Draw")),
    )


# "Clocks Event Reasons" (newer) or "Clocks Throttle Reasons" (older): field -> key below it
CLOCK_EVENT_KEYS = {
    "idle": "Idle",
    "sw_power_cap": "SW Power Cap",
    "hw_slowdown": "HW Slowdown",
    "hw_thermal": "HW Slowdown/HW Thermal Slowdown",
    "power_brake": "HW Slowdown/HW Power Brake Slowdown",
    "sw_thermal": "SW Thermal Slowdown",
}


def _clock_events(gpu: Node) -> ClockEvents:
    for section in ("Clocks Event Reasons", "Clocks Throttle Reasons"):
        node = gpu.child(section)
        if node is not None:
            values = {k: to_bool(_event(node, key)) for k, key in CLOCK_EVENT_KEYS.items()}
            return ClockEvents(**values)
    return ClockEvents()


def _event(node: Node, path: str) -> str | None:
    """An event reason's value: nested under HW Slowdown (newer drivers) or beside it."""
    value = node.get(path)
    return value if value is not None else node.get(path.rpartition("/")[2])


def _gpu(gpu: Node, index: int) -> GpuInfo:
    return GpuInfo(
        name=reported_name(clean(gpu.get("Product Name"))),
        index=index,
        uuid=clean(gpu.get("GPU UUID")),
        pci_bus_id=clean(gpu.get("PCI/Bus Id")) or clean(gpu.value),
        pci_device_id=pci_device_id(clean(gpu.get("PCI/Device Id"))),
        vbios=clean(gpu.get("VBIOS Version")),
        product_architecture=clean(gpu.get("Product Architecture")),
        compute_capability=clean(gpu.get("Compute Capability")),
        persistence_mode=to_bool(gpu.get("Persistence Mode")),
        memory_total_mib=to_int(gpu.get("FB Memory Usage/Total")),
        mig=_mig(gpu),
        ecc=_ecc(gpu),
        retired_pages=RetiredPages(
            single_bit=to_int(gpu.get("Retired Pages/Single Bit ECC")),
            double_bit=to_int(gpu.get("Retired Pages/Double Bit ECC")),
            pending=to_bool(
                gpu.first("Retired Pages/Pending Page Blacklist", "Retired Pages/Pending")
            ),
        ),
        remapped_rows=RemappedRows(
            correctable=to_int(gpu.get("Remapped Rows/Correctable Error")),
            uncorrectable=to_int(gpu.get("Remapped Rows/Uncorrectable Error")),
            pending=to_bool(gpu.get("Remapped Rows/Pending")),
            failure=to_bool(gpu.get("Remapped Rows/Remapping Failure Occurred")),
        ),
        clocks=_clocks(gpu),
        power=_power(gpu),
        pcie=PcieLink(
            gen_current=to_int(gpu.get("PCI/GPU Link Info/PCIe Generation/Current")),
            gen_max=to_int(gpu.get("PCI/GPU Link Info/PCIe Generation/Max")),
            width_current=to_int(gpu.get("PCI/GPU Link Info/Link Width/Current")),
            width_max=to_int(gpu.get("PCI/GPU Link Info/Link Width/Max")),
        ),
        clock_events=_clock_events(gpu),
        fabric=Fabric(
            state=clean(gpu.get("Fabric/State")),
            status=clean(gpu.get("Fabric/Status")),
            clique_id=clean(gpu.get("Fabric/CliqueId")),
        ),
        recovery_action=clean(gpu.get("GPU Recovery Action")),
    )


def parse_query_text(text: str) -> SmiReport:
    """Parse ``nvidia-smi -q`` text output (any ``-d`` selection).

    Empty output gives state "absent"; a known nvidia-smi error message gives its error state;
    other text that is not an NVSMI log raises ParseError.
    """
    text, early = absent_or_error(text, EXPECTED)
    if early is not None:
        return early
    if not looks_like_query_text(text):
        raise ParseError(f"expected {EXPECTED}, found: {first_line(text)!r}")
    root = read_outline(text)
    gpus = [_gpu(node, i) for i, node in enumerate(root.all("GPU"))]
    return SmiReport(
        source="query-text",
        driver_version=version_value(root.first("KMD Version", "Driver Version")),
        cuda_version=version_value(root.first("CUDA UMD Version", "CUDA Version")),
        nvml_version=clean(root.get("NVML Version")),
        attached_gpus=to_int(root.get("Attached GPUs")),
        gpus=gpus,
    )
