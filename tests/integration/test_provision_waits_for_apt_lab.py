"""Issue 20 (found by the tester): after a Ctrl-C during ``gpuhost provision`` the host's apt-get
keeps running, and an immediate re-run failed with "Could not get lock
/var/lib/dpkg/lock-frontend". Now provision's first operation (``apt_pin.dpkg_settled``) waits
for apt/dpkg left running, then converges.

On one fresh lab host an ``apt-get install`` of a small package is started in the background
(a systemd unit, as if left behind) and kept holding dpkg's lock for ``HOLD_S`` seconds (a
``DPkg::Pre-Invoke`` sleep runs after apt took the lock, before dpkg starts); ``gpuhost
provision`` with the built-in debian12-nonfree-535-security (CUDA left out: a 1.6 GB download) is
started right away: it waits, the background install completes untouched, the driver is
installed, pinned and held, and a second run changes nothing (nothing to wait for: no change).
About 60 s on one host.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from provision_support import ssh_data

pytestmark = [pytest.mark.lab, pytest.mark.slow]

PROFILE = "debian12-nonfree-535-security"
GPUHOST = str(Path(sys.executable).with_name("gpuhost"))
HOLD_S = 25
PACKAGE = "hello"  # 50 kB, Debian main
BACKGROUND = (
    "systemd-run --unit=gpuhost-test-apt --collect -E DEBIAN_FRONTEND=noninteractive "
    f"apt-get install -y -q -o 'DPkg::Pre-Invoke::=sleep {HOLD_S}' {PACKAGE}"
)


def _gpuhost(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GPUHOST, *args], capture_output=True, text=True, timeout=1500,
                          stdin=subprocess.DEVNULL)


def _wait_for_lock_holder(host: Any) -> None:
    """Until apt-get is in its Pre-Invoke sleep, i.e. holds dpkg's frontend lock."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if host.run(f"pgrep -x apt-get >/dev/null && pgrep -fx 'sleep {HOLD_S}'").returncode == 0:
            return
        time.sleep(0.5)
    pytest.fail("the background apt-get never reached its Pre-Invoke sleep: "
                + host.run("journalctl -u gpuhost-test-apt --no-pager | tail -20").stdout)


def test_provision_waits_for_apt_left_running(lab: Any, fresh_host: Any, tmp_path: Path) -> None:
    host = fresh_host
    view = lab(max(1, lab.count))
    assert host.run("apt-get update -qq", timeout=300).returncode == 0
    data = {**ssh_data(view, host), "gpuhost_profile": PROFILE, "gpuhost_install_cuda": False,
            "gpuhost_harden": False}  # lab hosts have no CAP_NET_ADMIN for nftables
    inventory = tmp_path / "inventory.py"
    inventory.write_text(f"gpu_nodes = {[(host.name, data)]!r}\n")

    started = host.run(BACKGROUND)
    assert started.returncode == 0, started.stderr
    _wait_for_lock_holder(host)
    lock = host.run("apt-get install -y -q -o DPkg::Lock::Timeout=0 hello 2>&1")
    assert "Could not get lock /var/lib/dpkg/lock-frontend" in lock.stdout  # the tester's case
    began = time.monotonic()
    run = _gpuhost("provision", str(inventory))
    took = time.monotonic() - began
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    assert "Could not get lock" not in out
    assert f"{host.name}: ok" in run.stdout, run.stdout[-2000:]
    lines = out.splitlines()
    wait = next(i for i, x in enumerate(lines) if "| Wait for apt/dpkg" in x)
    assert lines[wait + 1].strip() == f"[{host.name}] Success", lines[wait : wait + 2]  # waited
    # the background install finished on its own, untouched, before provision's first install
    state = host.run(f"dpkg-query -W -f='${{db:Status-Abbrev}}' {PACKAGE}; "
                     "dpkg --audit; apt-mark showhold")
    assert state.stdout.startswith("ii "), state.stdout
    assert "nvidia-driver" in state.stdout and "nvidia-kernel-dkms" in state.stdout, state.stdout
    assert host.run("pgrep -x 'apt-get|apt|dpkg'").returncode == 1
    assert took > 5, f"provision took {took:.0f}s: it cannot have waited"

    again = _gpuhost("provision", str(inventory))  # nothing to wait for: no change
    assert again.returncode == 0 and f"{host.name}: ok, 0 changed" in again.stdout, (
        again.stdout[-3000:] + again.stderr[-1000:])
