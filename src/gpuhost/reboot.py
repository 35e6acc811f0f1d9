"""Reboot a host over SSH and wait until it is back — a *new* boot, not the old one answering.

Used by ``gpuhost upgrade`` (restart step, rollback), ``gpuhost rollback`` and
``gpuhost provision --reboot``. A boot is told apart by its boot token: the kernel's boot id
plus PID 1's start time (a container host's reboot restarts PID 1 even where the boot id would
stay). Also the pure decision whether a driver change needs a reboot.
"""

from __future__ import annotations

import time
from typing import Protocol

from gpuhost import pkgmgr
from gpuhost.errors import HostError, ParseError
from gpuhost.parsers.profile_marker import MARKER_PATH, parse_profile_marker
from gpuhost.versions import upstream_of_package_version

BOOT_TOKEN_COMMAND = "cat /proc/sys/kernel/random/boot_id; cut -d' ' -f22 /proc/1/stat"
REBOOT_COMMAND = "nohup sh -c 'sleep 1; systemctl reboot' >/dev/null 2>&1 &"
# The packages whose version is the installed kernel module's, by package manager: Debian's and
# NVIDIA's deb names, NVIDIA's RPM kmod packages (kmod-nvidia-latest-dkms, kmod-nvidia-open-dkms)
KERNEL_MODULE_PACKAGES = {
    "apt": ["nvidia-kernel-dkms", "nvidia-open-kernel-dkms", "nvidia-dkms-*",
            "nvidia-kernel-source-*"],
    "dnf": ["kmod-nvidia-*"],
}
# the loaded module's version, the kernel module package's version (the host's package manager,
# by its os-release), then the provision marker
DRIVER_STATE_COMMAND = (
    "cat /sys/module/nvidia/version 2>/dev/null || echo -; "
    + pkgmgr.by_os_shell({
        family: pkgmgr.for_family(family).versions_command(names)  # type: ignore[union-attr]
        for family, names in KERNEL_MODULE_PACKAGES.items()
    })
    + f" | grep . | head -n1 | grep . || echo -; cat {MARKER_PATH} 2>/dev/null"
)


class _Result(Protocol):
    @property
    def stdout(self) -> str: ...


class Rebootable(Protocol):
    """What rebooting needs from a connection (``gpuhost.upgrade.connect.PyinfraRemote``)."""

    host: str

    def run(self, command: str, timeout: float | None = None) -> _Result: ...

    def close(self) -> None: ...

    def wait_for_ssh(self, timeout_s: float, poll_s: float = 2.0) -> None: ...


def boot_token(remote: Rebootable) -> str:
    return remote.run(BOOT_TOKEN_COMMAND).stdout.strip()


def reboot_and_wait(
    remote: Rebootable, timeout_s: float, before: str | None = None, settle_s: float = 3.0
) -> str:
    """Reboot, wait for SSH and a boot token other than ``before`` (read now when None), then
    for systemd to finish starting. Returns the token from before the reboot. HostError when
    the host does not come back, or answers without having rebooted, within ``timeout_s``."""
    if before is None:
        before = boot_token(remote)
    remote.run(REBOOT_COMMAND)
    remote.close()
    time.sleep(settle_s)
    deadline = time.monotonic() + timeout_s
    while True:
        remote.wait_for_ssh(max(1.0, deadline - time.monotonic()))
        after = boot_token(remote)
        if after and after != before:
            break
        if time.monotonic() > deadline:
            raise HostError(remote.host, "SSH answers but the host did not reboot")
        remote.close()
        time.sleep(2)
    remote.run("systemctl is-system-running --wait >/dev/null 2>&1 || true", timeout=300)
    return before


def parse_driver_state(stdout: str) -> tuple[str | None, str | None]:
    """(loaded module version, installed driver version) from ``DRIVER_STATE_COMMAND``, upstream
    versions, None = none. The installed version is the kernel module package's, else the one
    the provision marker records (pure)."""
    lines = stdout.splitlines()
    head = [line.strip() for line in lines[:2]]
    loaded = head[0] if head and head[0] not in ("", "-") else None
    installed = None
    if len(head) > 1 and head[1] not in ("", "-"):
        installed = upstream_of_package_version(head[1])
    if installed is None:
        try:
            marker = parse_profile_marker("\n".join(lines[2:]))
        except ParseError:
            marker = None
        installed = marker.driver_version if marker else None
    return loaded, installed


def reboot_reason(loaded: str | None, installed: str | None) -> str | None:
    """Why the host must reboot for its driver, or None when the loaded module is the installed
    one (or no driver is installed) (pure)."""
    if installed is None:
        return None
    if loaded is None:
        return f"driver {installed} installed, no nvidia module loaded"
    if loaded != installed:
        return f"loaded module {loaded} differs from the installed driver {installed}"
    return None


def driver_reboot_reason(remote: Rebootable) -> str | None:
    """Why this host must reboot for its driver (``reboot_reason`` on the host's state), or None."""
    return reboot_reason(*parse_driver_state(remote.run(DRIVER_STATE_COMMAND).stdout))


def reboot_for_driver(remote: Rebootable, timeout_s: float) -> tuple[bool, str]:
    """Reboot when the loaded nvidia module is not the installed driver; then check again.
    Returns (ok, what happened): ok when no reboot was needed or the module matches after it."""
    loaded, installed = parse_driver_state(remote.run(DRIVER_STATE_COMMAND).stdout)
    reason = reboot_reason(loaded, installed)
    if reason is None:
        return True, f"no reboot needed (module {loaded or 'none'}, driver {installed or 'none'})"
    reboot_and_wait(remote, timeout_s)
    loaded, installed = parse_driver_state(remote.run(DRIVER_STATE_COMMAND).stdout)
    still = reboot_reason(loaded, installed)
    if still is not None:
        return False, f"rebooted ({reason}); after the reboot: {still}"
    return True, f"rebooted ({reason}); module {loaded} loaded"
