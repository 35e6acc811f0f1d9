"""Parse what a host shows of its network fabric (pure; text in, typed data out).

* ``parse_ib_sysfs``: ``grep -H . FILE...`` over ``/sys/class/infiniband/DEV/ports/N/`` (state,
  phys_state, rate, link_layer, counters/*); the files' formats are the kernel's
  (Documentation/ABI/stable/sysfs-class-infiniband): ``4: ACTIVE``, ``5: LinkUp``,
  ``400 Gb/sec (4X NDR)``, ``InfiniBand`` or ``Ethernet`` (RoCE), counters one integer each
  (``N/A (no PMA)`` where the device has no performance management agent).
* ``parse_ibstat``: ``ibstat`` (infiniband-diags) with the same port data; ``parse_ibv_devinfo``:
  ``ibv_devinfo`` (rdma-core), state and link layer (it prints no rate).
* ``parse_lspci``: ``lspci -D -vvv`` (as root: the ACS lines need it), reduced to the device lines,
  the bridges' ``Bus:`` ranges and ``ACSCtl:`` lines.
* ``parse_iommu``: ``/proc/cmdline`` and the ``/sys/class/iommu`` listing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from gpuhost.errors import ParseError
from gpuhost.parsers._common import finite, first_line, require_text
from gpuhost.parsers.smi_model import _ToDict

SYSFS_ROOT = "/sys/class/infiniband"
#: error counters whose growth means a bad link (the kernel's names under ports/N/counters)
ERROR_COUNTERS = (
    "symbol_error",
    "link_downed",
    "link_error_recovery",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
)
#: the port files read (the probe, the checks and the health tier)
RDMA_FILES = ("state", "phys_state", "rate", "link_layer") + tuple(
    f"counters/{name}" for name in ERROR_COUNTERS
)
_SYSFS_RE = re.compile(
    rf"^{re.escape(SYSFS_ROOT)}/(?P<dev>[^/\s]+)/ports/(?P<port>\d+)/"
    r"(?P<file>(?:counters/)?[a-z_]+):(?P<value>.*)$"
)
_NUMBERED_RE = re.compile(r"^\s*(\d+)\s*:\s*(\S.*?)\s*$")
_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec\b")
_CA_RE = re.compile(r"^CA '(?P<dev>[^']+)'$")
_PORT_RE = re.compile(r"^Port (\d+):$")


@dataclass(frozen=True)
class IbPort(_ToDict):
    """One RDMA port (InfiniBand or RoCE). ``state``: ACTIVE, DOWN, INIT, ARMED...;
    ``phys_state``: LinkUp, Polling, Disabled...; ``rate_gbps`` None when unknown;
    ``counters``: error counters that could be read."""

    device: str
    port: int
    state: str | None = None
    phys_state: str | None = None
    rate_gbps: float | None = None
    rate: str | None = None
    link_layer: str | None = None
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.device}/{self.port}"

    @property
    def active(self) -> bool:
        return (self.state or "").upper() == "ACTIVE" and (self.phys_state or "") == "LinkUp"


def _numbered(value: str) -> str:
    """``4: ACTIVE`` -> ``ACTIVE`` (sysfs prints the enum's number and name)."""
    match = _NUMBERED_RE.match(value)
    return match.group(2) if match else value.strip()


def rate_gbps(value: str) -> float | None:
    match = _RATE_RE.match(value)
    return finite(match.group(1)) if match else None


def parse_ib_sysfs(text: str) -> list[IbPort]:
    """``grep -H .`` lines of the sysfs port files -> one IbPort per device/port (sorted)."""
    text = require_text(text, "grep -H . /sys/class/infiniband/*/ports/*/... lines")
    fields: dict[tuple[str, int], dict[str, str]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _SYSFS_RE.match(line)
        if match is None:
            raise ParseError(
                f"expected {SYSFS_ROOT}/DEVICE/ports/N/FILE:VALUE lines, found: {line[:80]!r}"
            )
        key = (match.group("dev"), int(match.group("port")))
        fields.setdefault(key, {})[match.group("file")] = match.group("value").strip()
    return [_port(device, port, values) for (device, port), values in sorted(fields.items())]


def _port(device: str, port: int, values: dict[str, str]) -> IbPort:
    counters = {
        name.removeprefix("counters/"): int(value)
        for name, value in values.items()
        if name.startswith("counters/") and value.isascii() and value.isdigit()
    }
    rate = values.get("rate")
    return IbPort(
        device=device,
        port=port,
        state=_numbered(values["state"]) if "state" in values else None,
        phys_state=_numbered(values["phys_state"]) if "phys_state" in values else None,
        rate_gbps=rate_gbps(rate) if rate else None,
        rate=rate,
        link_layer=values.get("link_layer"),
        counters=counters,
    )


def parse_ibstat(text: str) -> list[IbPort]:
    """``ibstat`` output -> ports (``Rate: 400`` is Gb/s; other lines, ibwarn/ibpanic noise,
    are ignored)."""
    text = require_text(text, "ibstat output (CA '...' blocks)")
    ports: list[IbPort] = []
    device: str | None = None
    current: dict[str, str] | None = None
    number = 0

    def flush() -> None:
        if device is not None and current is not None:
            rate = current.get("Rate")
            ports.append(
                IbPort(
                    device=device,
                    port=number,
                    state=current.get("State", "").upper() or None,
                    phys_state=current.get("Physical state") or None,
                    rate_gbps=finite(rate) if rate and re.fullmatch(r"\d+(\.\d+)?", rate) else None,
                    rate=f"{rate} Gb/sec" if rate else None,
                    link_layer=current.get("Link layer") or None,
                )
            )

    for raw in text.splitlines():
        line = raw.strip()
        ca = _CA_RE.match(line)
        port = _PORT_RE.match(line)
        if ca:
            flush()
            device, current = ca.group("dev"), None
        elif port and device is not None:
            flush()
            number, current = int(port.group(1)), {}
        elif current is not None and raw.startswith("\t\t") and ":" in line:
            key, _, value = line.partition(":")
            current[key.strip()] = value.strip()
    flush()
    if not ports and text.strip():
        raise ParseError(f"expected ibstat output (CA '...' blocks), found: {first_line(text)!r}")
    return _once(ports, "ibstat output")


def _once(ports: list[IbPort], what: str) -> list[IbPort]:
    """``ports`` when each device/port is listed once: a port listed twice (output repeated or
    made up) would count twice towards the expected number of ports."""
    seen: set[str] = set()
    for port in ports:
        if port.name in seen:
            raise ParseError(f"expected {what} listing each port once, found {port.name} twice")
        seen.add(port.name)
    return ports


_HCA_RE = re.compile(r"^hca_id:\s*(\S+)$")
_IBV_PORT_RE = re.compile(r"^port:\s*(\d+)$")
_IBV_STATE_RE = re.compile(r"^PORT_([A-Z_]+)\b")


def parse_ibv_devinfo(text: str) -> list[IbPort]:
    """``ibv_devinfo`` (rdma-core) -> ports with state and link layer (it prints no rate);
    lines before the first ``hca_id:`` are ignored."""
    text = require_text(text, "ibv_devinfo output (hca_id: blocks)")
    ports: list[IbPort] = []
    device: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        hca, port = _HCA_RE.match(line), _IBV_PORT_RE.match(line)
        key, _, value = line.partition(":")
        value = value.strip()
        if hca:
            device = hca.group(1)
        elif port and device is not None:
            ports.append(IbPort(device=device, port=int(port.group(1))))
        elif ports and ports[-1].device == device and key == "state":
            state = _IBV_STATE_RE.match(value)
            ports[-1] = replace(ports[-1], state=state.group(1) if state else value)
        elif ports and ports[-1].device == device and key == "link_layer":
            ports[-1] = replace(ports[-1], link_layer=value)
    if device is None and text.strip():
        raise ParseError(
            f"expected ibv_devinfo output (hca_id: blocks), found: {first_line(text)!r}"
        )
    return _once(ports, "ibv_devinfo output")


# ------------------------------------------------------------------------------------ lspci

_DEVICE_RE = re.compile(
    r"^(?P<addr>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(?P<desc>.+)$"
)
_BUS_RE = re.compile(
    r"Bus:\s*primary=(?P<p>[0-9a-fA-F]+),\s*secondary=(?P<s>[0-9a-fA-F]+),\s*"
    r"subordinate=(?P<u>[0-9a-fA-F]+)"
)
_FLAG_RE = re.compile(r"([A-Za-z]+)([+-])")


@dataclass(frozen=True)
class PciFunction(_ToDict):
    """One PCI function of ``lspci -D -vvv``: address ``0000:02:08.0``, the description, and for
    a bridge its secondary..subordinate bus range and ACS control flags (None: no ACS line)."""

    address: str
    description: str
    secondary: int | None = None
    subordinate: int | None = None
    acs: dict[str, bool] | None = None

    @property
    def domain(self) -> str:
        return self.address.split(":")[0]

    @property
    def bus(self) -> int:
        return int(self.address.split(":")[1], 16)

    @property
    def bridge(self) -> bool:
        return self.secondary is not None


def parse_lspci(text: str) -> list[PciFunction]:
    """Device lines, ``Bus:`` ranges and ``ACSCtl:`` lines of ``lspci -D -vvv`` (the full
    output or only those lines); an address without a domain is in domain 0000."""
    text = require_text(text, "lspci -D -vvv output")
    found: list[dict[str, object]] = []
    for raw in text.splitlines():
        device = _DEVICE_RE.match(raw)
        if device:
            address = device.group("addr").lower()
            if address.count(":") == 1:
                address = "0000:" + address
            found.append({"address": address, "description": device.group("desc").strip()})
            continue
        if not found or not raw[:1].isspace():
            continue
        line = raw.strip()
        bus = _BUS_RE.search(line)
        if bus:
            found[-1]["secondary"] = int(bus.group("s"), 16)
            found[-1]["subordinate"] = int(bus.group("u"), 16)
        elif line.startswith("ACSCtl:"):
            flags = _FLAG_RE.findall(line.removeprefix("ACSCtl:"))
            found[-1]["acs"] = {name: sign == "+" for name, sign in flags}
    if not found and text.strip():
        raise ParseError(f"expected lspci -D -vvv output, found: {first_line(text)!r}")
    return [PciFunction(**entry) for entry in found]  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ IOMMU


@dataclass(frozen=True)
class IommuInfo(_ToDict):
    """``mode``: "off" (no IOMMU unit in /sys/class/iommu), "passthrough" (iommu=pt, or an
    off switch on the command line) or "translated" (units present, DMA remapped).
    ``options``: the kernel command line's IOMMU words; ``units``: /sys/class/iommu entries."""

    mode: str
    options: list[str] = field(default_factory=list)
    units: list[str] = field(default_factory=list)


_IOMMU_WORD_RE = re.compile(r"^(iommu|intel_iommu|amd_iommu|iommu\.passthrough)=")
_PASSTHROUGH = {"iommu=pt", "iommu.passthrough=1", "iommu.passthrough=y", "iommu=off"}


def parse_iommu(cmdline: str, units: str) -> IommuInfo:
    """``/proc/cmdline`` and ``ls /sys/class/iommu`` (one name a line) -> the IOMMU's mode."""
    cmdline = require_text(cmdline, "/proc/cmdline")
    options = [word for word in cmdline.split() if _IOMMU_WORD_RE.match(word)]
    names = sorted(line.strip() for line in units.splitlines() if line.strip())
    off = any(w in ("intel_iommu=off", "amd_iommu=off") for w in options)
    if not names:
        return IommuInfo("off", options, names)
    if off or any(w in _PASSTHROUGH for w in options):
        return IommuInfo("passthrough", options, names)
    return IommuInfo("translated", options, names)


def peermem_loaded(proc_modules: str, sys_module: str) -> bool:
    """nvidia_peermem (or the older nv_peer_mem) in /proc/modules or /sys/module."""
    names = {line.split()[0] for line in proc_modules.splitlines() if line.split()}
    names |= {line.strip() for line in sys_module.splitlines() if line.strip()}
    return bool(names & {"nvidia_peermem", "nv_peer_mem"})
