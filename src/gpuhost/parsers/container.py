"""Parse NVIDIA container toolkit outputs: ``nvidia-ctk --version``, ``nvidia-container-cli -V``
and ``nvidia-container-cli info``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuhost.errors import ParseError
from gpuhost.parsers._common import clean, first_line, is_blank, require_text, to_int
from gpuhost.parsers.smi_model import _ToDict

CTK_EXPECTED = "nvidia-ctk --version ('NVIDIA Container Toolkit CLI version X.Y.Z')"
CTK_RE = re.compile(
    r"NVIDIA Container (?:Toolkit|Runtime)[\w ]*?version\s+v?(\d+(?:\.\d+)+\S*)", re.I
)
CLI_VERSION_RE = re.compile(r"^cli-version:\s*(\S+)", re.M)
INFO_EXPECTED = "nvidia-container-cli info ('NVRM version:' / 'CUDA version:' / 'Device Index:')"
INFO_LINE_RE = re.compile(r"^(?P<key>[A-Z][A-Za-z ]+?):\s+(?P<value>.*?)\s*$")


def parse_nvidia_ctk_version(text: str) -> str | None:
    """The toolkit version from ``nvidia-ctk --version`` (or ``nvidia-container-cli -V``'s
    cli-version). Empty output (tool absent) → None."""
    text = require_text(text, CTK_EXPECTED)
    if is_blank(text):
        return None
    match = CTK_RE.search(text) or CLI_VERSION_RE.search(text)
    if match is None:
        raise ParseError(f"expected {CTK_EXPECTED}, found: {first_line(text)!r}")
    return match.group(1)


@dataclass(frozen=True)
class ContainerDevice(_ToDict):
    index: int | None
    model: str | None
    uuid: str | None
    bus_location: str | None
    architecture: str | None


@dataclass(frozen=True)
class ContainerCliInfo(_ToDict):
    """``nvidia-container-cli info``: driver (NVRM) and CUDA versions it sees, and devices.
    "(null)" values (Tegra/Jetson) become None."""

    driver_version: str | None
    cuda_version: str | None
    devices: list[ContainerDevice] = field(default_factory=list)


def parse_container_cli_info(text: str) -> ContainerCliInfo | None:
    """Parse the info summary block. Empty output → None."""
    text = require_text(text, INFO_EXPECTED)
    if is_blank(text):
        return None
    top: dict[str, str | None] = {}
    blocks: list[dict[str, str | None]] = []
    for line in text.split("\n"):
        match = INFO_LINE_RE.match(line.strip())
        if not match:
            continue
        key, value = match.group("key"), clean(match.group("value"))
        if key == "Device Index":
            blocks.append({})
        (blocks[-1] if blocks else top)[key] = value
    if "NVRM version" not in top and "CUDA version" not in top:
        raise ParseError(f"expected {INFO_EXPECTED}, found: {first_line(text)!r}")
    devices = [
        ContainerDevice(
            index=to_int(b.get("Device Index")),
            model=b.get("Model"),
            uuid=b.get("GPU UUID"),
            bus_location=b.get("Bus Location"),
            architecture=b.get("Architecture"),
        )
        for b in blocks
    ]
    return ContainerCliInfo(top.get("NVRM version"), top.get("CUDA version"), devices)
