"""Parse ``nvidia-smi topo -m`` (the GPU/NIC connection matrix)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuhost.errors import ParseError
from gpuhost.parsers._common import clean, first_line, is_blank, require_text
from gpuhost.parsers.smi_model import _ToDict

EXPECTED = "nvidia-smi topo -m output (a GPU0 ... matrix)"
SMI_ERROR_RE = re.compile(r"^ERROR:\s")
ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
DEVICE_RE = re.compile(r"^(GPU|NIC|mlx\d+_)\d+$|^mlx\d+_\d+$")
NIC_LEGEND_RE = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$", re.M)
LINK_RE = re.compile(r"^(X|SYS|NODE|PHB|PXB|PIX|NV\d+|SOC|PHB\d*|N/A)$")


@dataclass(frozen=True)
class Topology(_ToDict):
    """``devices``: matrix labels (GPU0, NIC0...); ``links[a][b]``: connection type ("NV12",
    "PXB", "SYS", "X"...); ``cpu_affinity``/``numa_affinity`` per GPU when shown."""

    devices: list[str] = field(default_factory=list)
    links: dict[str, dict[str, str]] = field(default_factory=dict)
    cpu_affinity: dict[str, str | None] = field(default_factory=dict)
    numa_affinity: dict[str, str | None] = field(default_factory=dict)
    error: str | None = None  # nvidia-smi refused (e.g. "ERROR: Option -m is missing its value")
    nic_names: dict[str, str] = field(default_factory=dict)  # "NIC0" -> "mlx5_2" (NIC Legend)

    @property
    def nvlink(self) -> bool:
        return any(v.startswith("NV") for row in self.links.values() for v in row.values())


def parse_topo(text: str) -> Topology | None:
    """Parse the matrix; the legend is ignored. Empty output → None."""
    text = require_text(text, EXPECTED)
    if is_blank(text):
        return None
    if SMI_ERROR_RE.match(text.lstrip()):
        return Topology(error=first_line(text, limit=200))
    lines = [ANSI_RE.sub("", line).rstrip() for line in text.split("\n")]
    header_at = next(
        (i for i, ln in enumerate(lines) if ln.split()[:1] == ["GPU0"] and ln[:1].isspace()),
        None,
    )
    if header_at is None:
        raise ParseError(f"expected {EXPECTED}, found: {first_line(text)!r}")
    columns = [t for t in lines[header_at].split() if DEVICE_RE.match(t)]
    topology = Topology(devices=list(columns))
    for line in lines[header_at + 1 :]:
        tokens = line.split()
        if not tokens or not DEVICE_RE.match(tokens[0]):
            if tokens and tokens[0].startswith("Legend"):
                break
            continue
        label, cells = tokens[0], tokens[1 : 1 + len(columns)]
        if len(cells) < len(columns) or not all(LINK_RE.match(c) for c in cells):
            raise ParseError(f"expected {EXPECTED}, found a malformed row: {line.strip()[:80]!r}")
        topology.links[label] = dict(zip(columns, cells, strict=True))
        extra = tokens[1 + len(columns) :]
        if label.startswith("GPU") and extra:
            topology.cpu_affinity[label] = clean(extra[0])
            topology.numa_affinity[label] = clean(extra[1]) if len(extra) > 1 else None
    if not topology.links:
        raise ParseError(f"expected {EXPECTED}, found a header without rows")
    topology.nic_names.update(NIC_LEGEND_RE.findall("\n".join(lines)))
    return topology
