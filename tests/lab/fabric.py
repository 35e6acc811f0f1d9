"""Emulated RDMA fabric on a lab host (test equipment; never part of the gpuhost package).

A lab host is a container sharing this machine's kernel, which has no InfiniBand device. ``attach``
makes one appear where gpuhost reads it, at the REAL paths, inside that host's mount namespace
only (the product code has no test-only root):

* ``/sys/class``: a tmpfs over it, every class the container had bind-mounted back, plus
  ``infiniband/`` built from the real capture tests/fixtures/fabric/sysfs-h100-8x-cx7.txt (an
  8x H100 node: 8 ConnectX-7 at 400 Gb/s NDR and a RoCE bond) and an empty ``iommu/`` (no IOMMU
  unit: the machine's own IOMMU does not leak into the judgement);
* ``/sys/module``: ``nvidia_peermem`` present (a tmpfs over it where it is still the machine's
  sysfs: the machine's modules are hidden there, as the GPU emulator does);
* ``lspci``: /usr/local/sbin/lspci prints tests/fixtures/fabric/lspci-gpu-nic-switch-acs-*.txt
  (hand-made from real lines, SOURCES.md), ACS off until a fault turns it on.

``inject(host, fault, ...)`` changes that state: ``port-down DEV``, ``rate DEV TEXT``,
``counter DEV NAME VALUE``, ``peermem-off``, ``acs-on``. Every change is a file write in those
tmpfs mounts; a reset or reboot of the host drops all of it.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fabric"
SYSFS = FIXTURES / "sysfs-h100-8x-cx7.txt"
LSPCI = {
    "off": FIXTURES / "lspci-gpu-nic-switch-acs-off.txt",
    "on": FIXTURES / "lspci-gpu-nic-switch-acs-on.txt",
}
STATE = "/etc/gpuhost-lab-fabric"
PORTS = "/sys/class/infiniband"

MOUNT_CLASS = """set -e
mkdir -p /run/gpuhost-lab-fabric/class
if ! mountpoint -q /run/gpuhost-lab-fabric/class; then
  mount --bind /sys/class /run/gpuhost-lab-fabric/class
  mount -t tmpfs -o mode=0755,size=1m gpuhost-lab-fabric /sys/class
  for c in /run/gpuhost-lab-fabric/class/*; do
    n=${c##*/}; [ "$n" = iommu ] && continue
    mkdir -p /sys/class/$n; mount --bind "$c" /sys/class/$n
  done
  mkdir -p /sys/class/iommu /sys/class/infiniband
fi
if [ "$(stat -f -c %T /sys/module)" != tmpfs ]; then
  mount -t tmpfs -o mode=0755,size=1m gpuhost-lab-fabric /sys/module
fi
mkdir -p /sys/module/nvidia_peermem
"""


def _write(path: str, value: str) -> str:
    return (
        f"mkdir -p {shlex.quote(path.rpartition('/')[0])}; "
        f"printf '%s\\n' {shlex.quote(value)} > {shlex.quote(path)}"
    )


def tree_commands(text: str) -> list[str]:
    """One write per ``PATH:VALUE`` line of a sysfs capture listing."""
    commands = []
    for line in text.splitlines():
        path, sep, value = line.partition(":")
        if sep and path.startswith(PORTS + "/"):
            commands.append(_write(path, value))
    return commands


def _lspci_script() -> str:
    return (
        "#!/bin/sh\n# gpuhost lab: emulated lspci (tests/lab/fabric.py)\n"
        f"exec cat {STATE}/lspci.txt\n"
    )


def attach(host: Any) -> None:
    """Give the running lab ``host`` (tests/lab/plugin.Host) the healthy emulated fabric."""
    script = "\n".join(
        [
            MOUNT_CLASS,
            f"mkdir -p {STATE}",
            f"cat > {STATE}/lspci.txt <<'EOF_LSPCI'\n{LSPCI['off'].read_text()}\nEOF_LSPCI",
            f"cat > /usr/local/sbin/lspci <<'EOF_SCRIPT'\n{_lspci_script()}EOF_SCRIPT",
            "chmod 0755 /usr/local/sbin/lspci",
            *tree_commands(SYSFS.read_text()),
        ]
    )
    _run(host, script)


def inject(host: Any, fault: str, *args: str) -> None:
    """One fault (see the module doc) on a host ``attach`` prepared."""
    port = f"{PORTS}/{args[0]}/ports/1" if args else ""
    commands = {
        "port-down": lambda: (
            _write(f"{port}/state", "1: DOWN") + "; " + _write(f"{port}/phys_state", "3: Disabled")
        ),
        "rate": lambda: _write(f"{port}/rate", args[1]),
        "counter": lambda: _write(f"{port}/counters/{args[1]}", args[2]),
        "peermem-off": lambda: "rmdir /sys/module/nvidia_peermem",
        "acs-on": lambda: (
            f"cat > {STATE}/lspci.txt <<'EOF_LSPCI'\n{LSPCI['on'].read_text()}\nEOF_LSPCI"
        ),
    }
    _run(host, "set -e\n" + commands[fault]())


def _run(host: Any, script: str) -> None:
    proc = host.exec(script, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{host.name}: emulated fabric: exit {proc.returncode}: "
            f"{(proc.stderr or proc.stdout).strip()[-500:]}"
        )
