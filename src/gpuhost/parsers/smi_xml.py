"""Parse ``nvidia-smi -q -x`` (XML, DTD v9 to v13, also trimmed files and files without DOCTYPE).

The XML is parsed with xml.etree after refusing any DTD internal subset or entity declaration, so
no entity expansion can happen (external DTDs are never fetched by expat).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

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

EXPECTED = "nvidia-smi -q -x XML"
UNSAFE_DTD_RE = re.compile(r"<!DOCTYPE[^>]*\[|<!ENTITY", re.I)
ROOT_TAG = "nvidia_smi_log"


def _text(node: ET.Element | None, path: str) -> str | None:
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    return found.text.strip()


def _value(node: ET.Element | None, path: str) -> str | None:
    return clean(_text(node, path))


def _first(node: ET.Element | None, *paths: str) -> str | None:
    for path in paths:
        value = _text(node, path)
        if clean(value) is not None:
            return value
    return None


def _ecc_totals(node: ET.Element | None) -> tuple[int | None, int | None]:
    """(correctable, uncorrectable) of a <volatile> or <aggregate> element, any schema."""
    if node is None:
        return None, None
    if node.find("single_bit") is not None or node.find("double_bit") is not None:
        return to_int(_text(node, "single_bit/total")), to_int(_text(node, "double_bit/total"))
    correctable = sum_known(
        to_int(_text(node, tag)) for tag in ("sram_correctable", "dram_correctable")
    )
    uncorrectable = sum_known(
        to_int(_text(node, tag))
        for tag in (
            "sram_uncorrectable",
            "sram_uncorrectable_parity",
            "sram_uncorrectable_secded",
            "dram_uncorrectable",
        )
    )
    return correctable, uncorrectable


def _ecc(gpu: ET.Element) -> Ecc:
    vol_c, vol_u = _ecc_totals(gpu.find("ecc_errors/volatile"))
    agg_c, agg_u = _ecc_totals(gpu.find("ecc_errors/aggregate"))
    return Ecc(
        mode_current=to_bool(_text(gpu, "ecc_mode/current_ecc")),
        mode_pending=to_bool(_text(gpu, "ecc_mode/pending_ecc")),
        volatile_correctable=vol_c,
        volatile_uncorrectable=vol_u,
        aggregate_correctable=agg_c,
        aggregate_uncorrectable=agg_u,
    )


def _clocks(gpu: ET.Element) -> Clocks:
    app = [
        _text(gpu, "applications_clocks/graphics_clock"),
        _text(gpu, "applications_clocks/mem_clock"),
        _text(gpu, "default_applications_clocks/graphics_clock"),
        _text(gpu, "default_applications_clocks/mem_clock"),
    ]
    return Clocks(
        graphics=to_int(_text(gpu, "clocks/graphics_clock")),
        sm=to_int(_text(gpu, "clocks/sm_clock")),
        mem=to_int(_text(gpu, "clocks/mem_clock")),
        applications_graphics=to_int(app[0]),
        applications_mem=to_int(app[1]),
        default_applications_graphics=to_int(app[2]),
        default_applications_mem=to_int(app[3]),
        max_graphics=to_int(_text(gpu, "max_clocks/graphics_clock")),
        max_sm=to_int(_text(gpu, "max_clocks/sm_clock")),
        max_mem=to_int(_text(gpu, "max_clocks/mem_clock")),
        auto_boost=to_bool(_text(gpu, "clock_policy/auto_boost")),
        auto_boost_default=to_bool(_text(gpu, "clock_policy/auto_boost_default")),
        applications_clocks_supported=applications_clocks_supported(app),
    )


def applications_clocks_supported(values: list[str | None]) -> bool | None:
    """True if any application clock is a number; False if they are shown but only as "N/A",
    "Not Supported" or "Requested functionality has been deprecated"; None if not shown."""
    if any(to_int(v) is not None for v in values):
        return True
    if any(v is not None for v in values):
        return False
    return None


def _power(gpu: ET.Element) -> PowerLimits:
    node = gpu.find("gpu_power_readings")
    if node is None:
        node = gpu.find("power_readings")
    return PowerLimits(
        current=to_number(
            _first(node, "current_power_limit", "enforced_power_limit", "power_limit")
        ),
        default=to_number(_text(node, "default_power_limit")),
        min=to_number(_text(node, "min_power_limit")),
        max=to_number(_text(node, "max_power_limit")),
        draw=to_number(_first(node, "power_draw", "average_power_draw", "instant_power_draw")),
    )


def _pcie(gpu: ET.Element) -> PcieLink:
    link = gpu.find("pci/pci_gpu_link_info")
    return PcieLink(
        gen_current=to_int(_text(link, "pcie_gen/current_link_gen")),
        gen_max=to_int(_text(link, "pcie_gen/max_link_gen")),
        width_current=to_int(_text(link, "link_widths/current_link_width")),
        width_max=to_int(_text(link, "link_widths/max_link_width")),
    )


# <clocks_event_reasons> (schema v12+) or <clocks_throttle_reasons> (older): field -> tag suffix
CLOCK_EVENT_TAGS = {
    "idle": "gpu_idle",
    "sw_power_cap": "sw_power_cap",
    "hw_slowdown": "hw_slowdown",
    "hw_thermal": "hw_thermal_slowdown",
    "power_brake": "hw_power_brake_slowdown",
    "sw_thermal": "sw_thermal_slowdown",
}


def _clock_events(gpu: ET.Element) -> ClockEvents:
    for parent, prefix in (
        ("clocks_event_reasons", "clocks_event_reason_"),
        ("clocks_throttle_reasons", "clocks_throttle_reason_"),
    ):
        node = gpu.find(parent)
        if node is not None:
            values = {k: to_bool(_text(node, prefix + t)) for k, t in CLOCK_EVENT_TAGS.items()}
            return ClockEvents(**values)
    return ClockEvents()


def _fabric(gpu: ET.Element) -> Fabric:
    return Fabric(
        state=_value(gpu, "fabric/state"),
        status=_value(gpu, "fabric/status"),
        clique_id=_value(gpu, "fabric/cliqueId"),
    )


def _gpu(gpu: ET.Element, index: int) -> GpuInfo:
    mig_devices = gpu.findall("mig_devices/mig_device")
    return GpuInfo(
        name=reported_name(_value(gpu, "product_name")),
        index=index,
        uuid=_value(gpu, "uuid"),
        pci_bus_id=_value(gpu, "pci/pci_bus_id") or clean(gpu.get("id")),
        pci_device_id=pci_device_id(_value(gpu, "pci/pci_device_id")),
        vbios=_value(gpu, "vbios_version"),
        product_architecture=_value(gpu, "product_architecture"),
        compute_capability=_value(gpu, "compute_cap"),
        persistence_mode=to_bool(_text(gpu, "persistence_mode")),
        memory_total_mib=to_int(_text(gpu, "fb_memory_usage/total")),
        mig=MigMode(
            current=to_bool(_text(gpu, "mig_mode/current_mig")),
            pending=to_bool(_text(gpu, "mig_mode/pending_mig")),
            devices=len(mig_devices),
        ),
        ecc=_ecc(gpu),
        retired_pages=RetiredPages(
            single_bit=to_int(
                _text(gpu, "retired_pages/multiple_single_bit_retirement/retired_count")
            ),
            double_bit=to_int(_text(gpu, "retired_pages/double_bit_retirement/retired_count")),
            pending=to_bool(_text(gpu, "retired_pages/pending_retirement")),
        ),
        remapped_rows=RemappedRows(
            correctable=to_int(_text(gpu, "remapped_rows/remapped_row_corr")),
            uncorrectable=to_int(_text(gpu, "remapped_rows/remapped_row_unc")),
            pending=to_bool(_text(gpu, "remapped_rows/remapped_row_pending")),
            failure=to_bool(_text(gpu, "remapped_rows/remapped_row_failure")),
        ),
        clocks=_clocks(gpu),
        power=_power(gpu),
        pcie=_pcie(gpu),
        clock_events=_clock_events(gpu),
        fabric=_fabric(gpu),
        recovery_action=_value(gpu, "gpu_recovery_action"),
    )


def parse_xml(text: str) -> SmiReport:
    """Parse ``nvidia-smi -q -x`` output.

    Empty output gives state "absent"; a known nvidia-smi error message gives its error state;
    anything else that is not well-formed nvidia_smi_log XML raises ParseError.
    """
    text, early = absent_or_error(text, EXPECTED)
    if early is not None:
        return early
    if UNSAFE_DTD_RE.search(text):
        raise ParseError(f"expected {EXPECTED}, found a DTD with entity declarations (refused)")
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as exc:
        raise ParseError(
            f"expected {EXPECTED}, found malformed XML ({exc}); starts with: {first_line(text)!r}"
        ) from exc
    if root.tag != ROOT_TAG:
        raise ParseError(f"expected {EXPECTED} with root <{ROOT_TAG}>, found <{root.tag}>")
    gpus = [_gpu(node, i) for i, node in enumerate(root.findall("gpu"))]
    return SmiReport(
        source="xml",
        driver_version=version_value(_first(root, "kmd_version", "driver_version")),
        cuda_version=version_value(_first(root, "cuda_umd_version", "cuda_version")),
        nvml_version=_value(root, "nvml_version"),
        attached_gpus=to_int(_text(root, "attached_gpus")),
        gpus=gpus,
    )
