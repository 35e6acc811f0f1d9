"""PCIe Advanced Error Reporting counters from sysfs (``/sys/bus/pci/devices/<dev>/
aer_dev_correctable``, ``aer_dev_fatal``, ``aer_dev_nonfatal``; kernel 4.19+).

Each file has one ``NAME COUNT`` line per error type (names as the kernel prints them: the ABI
document's sample says ``Receiver Error 2``, current kernels ``RxErr 2``) and ends with the total
(``TOTAL_ERR_COR``, ``TOTAL_ERR_FATAL``, ``TOTAL_ERR_NONFATAL``). Pure: text in, counters out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuhost.errors import ParseError
from gpuhost.parsers._common import first_line, is_blank, require_text
from gpuhost.parsers.marked import split_marked

EXPECTED = "an AER counter file (aer_dev_correctable/fatal/nonfatal: 'NAME COUNT' lines)"
LINE_RE = re.compile(r"^\s*(?P<name>\S.*?)\s+(?P<count>\d+)\s*$")
TOTAL_RE = re.compile(r"^TOTAL_ERR_(?P<kind>COR|FATAL|NONFATAL)$")


@dataclass(frozen=True)
class AerCounters:
    """One AER file: the count per error name and the file's total (None when it has no
    TOTAL_ERR_* line; then the sum of the counts is the total)."""

    kind: str | None = None  # "COR", "FATAL", "NONFATAL"
    counts: dict[str, int] = field(default_factory=dict)
    total_line: int | None = None

    @property
    def total(self) -> int:
        return self.total_line if self.total_line is not None else sum(self.counts.values())


def parse_aer_counters(text: str) -> AerCounters:
    """One ``aer_dev_*`` file's text → :class:`AerCounters`; empty text → no counters; a line
    that is not ``NAME COUNT`` raises ParseError naming it."""
    text = require_text(text, EXPECTED)
    if is_blank(text):
        return AerCounters()
    kind: str | None = None
    counts: dict[str, int] = {}
    total: int | None = None
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        match = LINE_RE.match(line)
        if match is None:
            raise ParseError(f"expected {EXPECTED}, found on line {number}: {line[:100]!r}")
        name, count = match.group("name"), int(match.group("count"))
        is_total = TOTAL_RE.match(name)
        if is_total:
            kind, total = is_total.group("kind"), count
        else:
            counts[name] = count
    if not counts and total is None:
        raise ParseError(f"expected {EXPECTED}, found: {first_line(text)!r}")
    return AerCounters(kind, counts, total)


AER_MARK = "##GPUHOST "  # the probe's "##GPUHOST aer DEVICE KIND" lines before each file


def parse_gpu_aer(text: str) -> dict[str, dict[str, AerCounters]]:
    """The probe's ``gpu-aer`` section (each file after ``##GPUHOST aer 0000:3b:00.0 fatal``) →
    {device: {"correctable"|"fatal"|"nonfatal": AerCounters}}; empty → {}."""
    text = require_text(text, "the probe's gpu-aer section")
    found: dict[str, dict[str, AerCounters]] = {}
    for section in split_marked(text.split("\n"), AER_MARK):
        if section.name != "aer" or len(section.args) != 2:
            raise ParseError(f"expected '##GPUHOST aer DEVICE KIND', found {section.args!r}")
        device, kind = section.args
        found.setdefault(device, {})[kind] = parse_aer_counters("\n".join(section.lines))
    return found
