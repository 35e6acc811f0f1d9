"""Listening sockets from ``ss -Hltnup`` (iproute2): which service listens on which port.

One line per socket: ``NETID STATE RECV-Q SEND-Q LOCAL PEER [PROCESS]``, e.g.

    tcp LISTEN 0 128 0.0.0.0:22 0.0.0.0:* users:(("sshd",pid=33,fd=3))
    tcp LISTEN 0 128 [::1]:9999 [::]:* users:(("python3",pid=52,fd=3))
    udp UNCONN 0 0 127.0.0.53%lo:53 0.0.0.0:* users:(("systemd-resolve",pid=5,fd=12))

LOCAL is ``ADDRESS:PORT`` with IPv6 in brackets, ``*`` for every address and an optional
``%interface``. PROCESS is only there for sockets of processes ss may see (root sees all).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuhost.errors import ParseError
from gpuhost.parsers._common import first_line, require_text

EXPECTED = "the output of 'ss -Hltnup' (NETID STATE RECV-Q SEND-Q LOCAL:PORT PEER [users:...])"
_LOCAL_RE = re.compile(r"^(?:\[(?P<v6>[^\]]+)\]|(?P<other>[^\[\]]*)):(?P<port>\d{1,5}|\*)$")
_PROCESS_RE = re.compile(r'\("([^"]*)",pid=(\d+)')
NETIDS = frozenset({"tcp", "udp"})


@dataclass(frozen=True)
class Listener:
    proto: str  # "tcp" or "udp"
    address: str  # "0.0.0.0", "::", "*" (any), "127.0.0.1", "::1" (without %interface)
    port: int
    processes: tuple[str, ...] = ()  # process names, each once, in ss's order
    interface: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "proto": self.proto,
            "address": self.address,
            "port": self.port,
            "processes": list(self.processes),
            "interface": self.interface,
        }


def _local(field: str, line: str) -> tuple[str, str | None, int] | None:
    match = _LOCAL_RE.match(field)
    if match is None:
        raise ParseError(f"expected {EXPECTED}, found {first_line(line)!r} (local address)")
    if match["port"] == "*":
        return None  # not bound to a port (can only happen for odd UNCONN sockets)
    address = match["v6"] if match["v6"] is not None else match["other"]
    interface = None
    if "%" in address:
        address, interface = address.split("%", 1)
    return address, interface, int(match["port"])


def parse_ss_listening(text: str) -> list[Listener]:
    """Listeners of ``ss -Hltnup``; empty output (nothing listens) gives []."""
    text = require_text(text, EXPECTED)
    listeners: list[Listener] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) < 6 or fields[0] not in NETIDS or not fields[2].isdigit():
            raise ParseError(f"expected {EXPECTED}, found {first_line(line)!r}")
        local = _local(fields[4], line)
        if local is None:
            continue
        address, interface, port = local
        names = tuple(dict.fromkeys(name for name, _pid in _PROCESS_RE.findall(line)))
        listeners.append(Listener(fields[0], address, port, names, interface))
    return listeners
