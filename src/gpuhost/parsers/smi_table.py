"""Parse the default ``nvidia-smi`` table (driver 390 to 610 layouts, Linux and Windows).

Reads the header (driver and CUDA version) and, per GPU, index, name (possibly shortened by
nvidia-smi with "..."), persistence mode, bus id, power draw / cap, memory total and MIG mode.
"""

from __future__ import annotations

import re

from gpuhost.errors import ParseError
from gpuhost.parsers._common import (
    clean,
    first_line,
    to_bool,
    to_int,
    to_number,
)
from gpuhost.parsers.smi_errors import absent_or_error
from gpuhost.parsers.smi_model import (
    Ecc,
    GpuInfo,
    MigMode,
    PowerLimits,
    SmiReport,
    reported_name,
)

EXPECTED = "the nvidia-smi table"
TABLE_HEADER_RE = re.compile(
    r"NVIDIA-SMI\s+(?P<smi>\d[\w.-]*)\s+(?:Driver|KMD) Version:\s*(?P<driver>\S+)"
    r"(?:\s+CUDA(?: UMD)? Version:\s*(?P<cuda>\S+))?"
)
BUS_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]"
# "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:00:09.0 Off |                   On |"
GPU_ROW_RE = re.compile(
    r"^\|\s*(?P<index>\d+)\s+(?P<name>.*?)\s+(?P<mode>On|Off|WDDM|TCC|MCDM|N/A)\s*\|"
    rf"\s*(?P<bus>{BUS_ID})\s+(?P<disp>\S+)\s*\|\s*(?P<ecc>[^|]*?)\s*\|\s*$"
)
# "| N/A   52C    P0            432W /  700W |   11125MiB /  81559MiB |     N/A      Default |"
STATS_ROW_RE = re.compile(
    r"^\|[^|]*?(?P<draw>\S+?)W?\s*/\s*(?P<cap>\S+?)W?\s*\|"
    r"\s*(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB\s*\|"
)
# "|                                         |                        |              Enabled |"
MIG_ROW_RE = re.compile(r"^\|\s*\|\s*\|\s*(?P<mig>Enabled|Disabled|N/A)\s*\|\s*$")
MIG_SECTION_RE = re.compile(r"^\|\s*MIG devices:", re.M)
MIG_DEVICE_ROW_RE = re.compile(r"^\|\s*(?P<gpu>\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\|")


def looks_like_table(text: str) -> bool:
    return bool(TABLE_HEADER_RE.search(text))


def _mig_devices_per_gpu(lines: list[str]) -> dict[int, int]:
    counts: dict[int, int] = {}
    in_mig = False
    for line in lines:
        if MIG_SECTION_RE.match(line):
            in_mig = True
            continue
        if in_mig and line.startswith("| Processes:"):
            break
        if in_mig:
            match = MIG_DEVICE_ROW_RE.match(line)
            if match:
                gpu = int(match.group("gpu"))
                counts[gpu] = counts.get(gpu, 0) + 1
    return counts


def _gpu(lines: list[str], at: int, mig_devices: dict[int, int]) -> GpuInfo:
    row = GPU_ROW_RE.match(lines[at])
    assert row is not None
    index = int(row.group("index"))
    stats = STATS_ROW_RE.match(lines[at + 1]) if at + 1 < len(lines) else None
    mig_row = MIG_ROW_RE.match(lines[at + 2]) if at + 2 < len(lines) else None
    ecc_cell = row.group("ecc")
    mode = row.group("mode")
    return GpuInfo(
        name=reported_name(clean(row.group("name"))),
        index=index,
        pci_bus_id=row.group("bus"),
        persistence_mode=to_bool(mode) if mode in ("On", "Off") else None,
        memory_total_mib=int(stats.group("total")) if stats else None,
        mig=MigMode(
            current=to_bool(mig_row.group("mig")) if mig_row else None,
            devices=mig_devices.get(index, 0),
        ),
        ecc=Ecc(
            mode_current=False if ecc_cell == "Off" else None,
            volatile_uncorrectable=to_int(ecc_cell),
        ),
        power=PowerLimits(
            current=to_number(stats.group("cap")) if stats else None,
            draw=to_number(stats.group("draw")) if stats else None,
        ),
    )


def parse_table(text: str) -> SmiReport:
    """Parse the default ``nvidia-smi`` output.

    Empty output gives state "absent"; a known nvidia-smi error message gives its error state;
    text without the "NVIDIA-SMI ... Driver Version:" header raises ParseError.
    """
    text, early = absent_or_error(text, EXPECTED)
    if early is not None:
        return early
    header = TABLE_HEADER_RE.search(text)
    if header is None:
        raise ParseError(
            f"expected {EXPECTED} (a 'NVIDIA-SMI ... Driver Version:' header), "
            f"found: {first_line(text)!r}"
        )
    lines = [line.rstrip() for line in text.split("\n")]
    mig_devices = _mig_devices_per_gpu(lines)
    gpus = [_gpu(lines, i, mig_devices) for i, line in enumerate(lines) if GPU_ROW_RE.match(line)]
    return SmiReport(
        source="table",
        driver_version=clean(header.group("driver")),
        cuda_version=clean(header.group("cuda")),
        gpus=gpus,
    )
