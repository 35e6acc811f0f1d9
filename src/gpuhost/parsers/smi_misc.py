"""Small nvidia-smi outputs: ``--version``, ``-L``, ``nvlink -s`` and ``nvlink -e``."""

from __future__ import annotations

import re
from typing import Any

from gpuhost.errors import ParseError
from gpuhost.parsers._common import first_line, is_blank, require_text, version_value

VERSION_EXPECTED = "nvidia-smi --version output ('NVIDIA-SMI version : X')"
VERSION_LINE_RE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z -]*?)\s*:\s*(?P<value>.*?)\s*$")
LIST_EXPECTED = "nvidia-smi -L output ('GPU 0: NAME (UUID: GPU-...)')"
GPU_LIST_RE = re.compile(
    r"^GPU\s+(?P<index>\d+):\s*(?P<name>.+?)\s*\(UUID:\s*(?P<uuid>[^)]+)\)\s*$"
)
MIG_LIST_RE = re.compile(
    r"^\s+MIG\s+(?P<profile>\S+)\s+Device\s+(?P<index>\d+):\s*\(UUID:\s*(?P<uuid>[^)]+)\)\s*$"
)
NVLINK_LINE_RE = re.compile(r"^\s+Link\s+(?P<link>\d+):\s*(?P<value>.+?)\s*$")
# nvlink -e: "         Link 0: Replay Errors: 0"
NVLINK_COUNTER_RE = re.compile(
    r"^\s+Link\s+(?P<link>\d+):\s*(?P<name>[A-Za-z][A-Za-z ]*?)\s*:\s*(?P<count>\d+)\s*$"
)


def _version_number(value: str) -> str | None:
    value_clean = version_value(value)
    if value_clean is None or not re.match(r"^\d", value_clean):
        return None  # e.g. 'Deprecated, see "KMD version" instead'
    return value_clean


def parse_smi_version(text: str) -> dict[str, str | None] | None:
    """Keys: smi_version, nvml_version, driver_version (KMD version on 610+), cuda_version
    (CUDA UMD version on 610+). Empty → None."""
    text = require_text(text, VERSION_EXPECTED)
    if is_blank(text):
        return None
    values: dict[str, str] = {}
    for line in text.split("\n"):
        match = VERSION_LINE_RE.match(line)
        if match:
            values[match.group("key").strip().lower()] = match.group("value")
    if "nvidia-smi version" not in values:
        raise ParseError(f"expected {VERSION_EXPECTED}, found: {first_line(text)!r}")

    def pick(*keys: str) -> str | None:
        for key in keys:
            number = _version_number(values.get(key, ""))
            if number:
                return number
        return None

    return {
        "smi_version": pick("nvidia-smi version"),
        "nvml_version": pick("nvml version"),
        "driver_version": pick("kmd version", "driver version"),
        "cuda_version": pick("cuda umd version", "cuda version"),
    }


def _gpu_entry(gpu: re.Match[str], **extra: Any) -> dict[str, Any]:
    """A ``GPU_LIST_RE`` match (``GPU 0: <name> (UUID: <uuid>)``) → its dict, then ``extra``."""
    return {
        "index": int(gpu.group("index")),
        "name": gpu.group("name"),
        "uuid": gpu.group("uuid"),
        **extra,
    }


def parse_gpu_list(text: str, *, strict: bool = True) -> list[dict[str, Any]]:
    """``nvidia-smi -L``: [{"index", "name", "uuid", "mig_devices": [{"profile", "uuid"}]}].
    With ``strict`` any other line raises ParseError. Empty → []."""
    text = require_text(text, LIST_EXPECTED)
    gpus: list[dict[str, Any]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        gpu = GPU_LIST_RE.match(line)
        mig = MIG_LIST_RE.match(line)
        if gpu:
            gpus.append(_gpu_entry(gpu, mig_devices=[]))
        elif mig and gpus:
            gpus[-1]["mig_devices"].append(
                {"profile": mig.group("profile"), "uuid": mig.group("uuid")}
            )
        elif strict:
            raise ParseError(f"expected {LIST_EXPECTED}, found on line {number}: {line[:100]!r}")
    return gpus


def parse_nvlink_status(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi nvlink -s``: per GPU {"index", "name", "uuid", "links": {n: "26.562 GB/s"},
    "note": message such as "Device does not have or support Nvlink"}. Empty → []."""
    text = require_text(text, "nvidia-smi nvlink -s output")
    gpus: list[dict[str, Any]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        gpu = GPU_LIST_RE.match(line)
        link = NVLINK_LINE_RE.match(line)
        if gpu:
            gpus.append(_gpu_entry(gpu, links={}, note=None))
        elif gpus and link:
            gpus[-1]["links"][int(link.group("link"))] = link.group("value")
        elif gpus and gpus[-1]["note"] is None:
            gpus[-1]["note"] = line.strip()
        else:
            raise ParseError(
                f"expected nvidia-smi nvlink -s output, found on line {number}: {line[:100]!r}"
            )
    return gpus


def parse_nvlink_errors(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi nvlink -e``: per GPU {"index", "name", "uuid", "links": {n: {"Replay Errors":
    0, "Recovery Errors": 0, "CRC Errors": 0}}, "note": a message instead of links}. Empty → []."""
    text = require_text(text, "nvidia-smi nvlink -e output")
    gpus: list[dict[str, Any]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        gpu = GPU_LIST_RE.match(line)
        counter = NVLINK_COUNTER_RE.match(line)
        if gpu:
            gpus.append(_gpu_entry(gpu, links={}, note=None))
        elif gpus and counter:
            link = gpus[-1]["links"].setdefault(int(counter.group("link")), {})
            link[counter.group("name").strip()] = int(counter.group("count"))
        elif gpus and gpus[-1]["note"] is None and not gpus[-1]["links"]:
            gpus[-1]["note"] = line.strip()
        else:
            raise ParseError(
                f"expected nvidia-smi nvlink -e output, found on line {number}: {line[:100]!r}"
            )
    return gpus
