"""A lab host reboots like a server: ``systemctl reboot`` inside it makes systemd-nspawn exit 133,
and the lab boots it again on the same overlay and network namespace."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.lab


def _boot_id(host) -> str | None:
    proc = host.run("cat /proc/sys/kernel/random/boot_id; systemctl is-system-running",
                    timeout=15)
    lines = proc.stdout.split()
    if proc.returncode != 0 or len(lines) != 2 or lines[1] not in ("running", "degraded"):
        return None
    return lines[0]


def test_reboot_brings_the_host_back_with_a_new_boot_id_and_its_files(fresh_host) -> None:
    before = _boot_id(fresh_host)
    assert before is not None
    fresh_host.run("echo kept > /root/survives-reboot")
    fresh_host.run("nohup sh -c 'sleep 1; systemctl reboot' >/dev/null 2>&1 &")
    fresh_host.manager._ssh_close(fresh_host.record)
    deadline = time.monotonic() + 90
    after = before
    while time.monotonic() < deadline:
        after = _boot_id(fresh_host)
        if after is not None and after != before:
            break
        time.sleep(1)
    assert after is not None and after != before, "host did not come back with a new boot id"
    # same overlay root, same address, and the lab still finds its systemd (nsenter)
    assert fresh_host.run("cat /root/survives-reboot").stdout.strip() == "kept"
    assert fresh_host.exec("cat /proc/sys/kernel/random/boot_id").stdout.strip() == after
    status = fresh_host.manager.status()
    assert all(r["running"] for r in status if r["name"] == fresh_host.name), status
