"""Drift by hand on a provisioned lab host, reported by ``gpuhost audit`` and repaired by one
``gpuhost provision`` (real Debian NVIDIA packages, issue 20).

One fresh lab host is provisioned with ``debian12-nonfree-535`` (535.261.03 from bookworm,
pinned at 1001 and held; the CUDA toolkit left out: a 1.6 GB download). Then, as an operator
or a half-finished run would leave it:

1. the holds are released (``apt-mark unhold``): the audit reports ``driver.hold-removed``;
2. the preferences file is deleted, one coupled package is put at another version by hand
   (``dpkg -i --force-depends`` of bookworm-security's nvidia-smi 535.309.01) and another is left
   half-installed (``dpkg --unpack`` of libnvidia-cfg1, not configured): the audit reports
   ``driver.packages-mixed``, ``driver.packages-unfinished`` and ``driver.upgrade-pending``;
3. ``gpuhost provision --dry`` plans the repair (it used to stop before any operation) and
   changes nothing; one ``gpuhost provision`` repairs it all: the packages, holds, pins and dpkg
   state are exactly as after the first provision, the audit finds what it found then, and a
   second run changes nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.slow]

PROFILE = "debian12-nonfree-535"
GPUHOST = str(Path(sys.executable).with_name("gpuhost"))
OLD_PROFILES = str(Path(__file__).resolve().parents[1] / "data" / "old_profiles.yaml")
PREFERENCES = "/etc/apt/preferences.d/gpuhost-nvidia"
STATE = (
    "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' | grep -i nvidia | sort; "
    "echo holds; apt-mark showhold; echo dpkg-audit; dpkg --audit; "
    f"echo pins; sha256sum {PREFERENCES} 2>&1; cat /etc/gpuhost/profile"
)
HAND_INSTALL = (
    "cd /tmp && apt-get download -q nvidia-smi=535.309.01-0+deb12u1 libnvidia-cfg1=535.261.03-1 "
    "&& dpkg -i --force-depends nvidia-smi_535.309.01-0+deb12u1_amd64.deb "
    "&& dpkg --unpack libnvidia-cfg1_535.261.03-1_amd64.deb"
)


def _gpuhost(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GPUHOST, *args], capture_output=True, text=True, timeout=1500,
                          stdin=subprocess.DEVNULL)


def _audit(inventory: Path, out: Path) -> set[str]:
    _gpuhost("audit", str(inventory), "--json", str(out))
    report = json.loads(out.read_text())
    (host,) = report["hosts"]
    assert host["reachable"], host
    return {f["rule"] for f in host["findings"]}


def test_provision_repairs_what_the_audit_reports(
    fresh_host: Any, lab: Any, tmp_path: Path
) -> None:
    host = fresh_host
    view = lab(max(1, lab.count))
    assert host.run("apt-get update -qq", timeout=300).returncode == 0
    data = {
        "ssh_hostname": host.address,
        "ssh_user": "root",
        "ssh_key": str(view.key_path),
        "ssh_known_hosts_file": str(view.known_hosts_path),
        "ssh_strict_host_key_checking": "yes",
        "gpuhost_profile": PROFILE,
        "gpuhost_install_cuda": False,
        "gpuhost_harden": False,  # lab hosts have no CAP_NET_ADMIN for nftables
        # 535.261.03 left the built-in profiles (NVIDIA security bulletins): test data now
        "gpuhost_profiles_file": OLD_PROFILES,
    }
    inventory = tmp_path / "inventory.py"
    inventory.write_text(f"gpu_nodes = {[(host.name, data)]!r}\n")
    first = _gpuhost("provision", str(inventory))
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    provisioned = host.run(STATE).stdout
    baseline = _audit(inventory, tmp_path / "baseline.json")
    assert "driver.packages-mixed" not in baseline

    # 1. holds released by hand, pins still there
    unhold = host.run("apt-mark unhold $(apt-mark showhold) >/dev/null")
    assert unhold.returncode == 0, unhold.stderr
    assert "driver.hold-removed" in _audit(inventory, tmp_path / "unheld.json")

    # 2. pins deleted, one package at another version, one left half-installed
    assert host.run(f"rm {PREFERENCES}").returncode == 0
    hand = host.run(HAND_INSTALL, timeout=300)
    assert hand.returncode == 0, hand.stdout[-2000:] + hand.stderr[-2000:]
    drifted = host.run(STATE).stdout
    assert "nvidia-smi 535.309.01-0+deb12u1 ii" in drifted
    assert "libnvidia-cfg1 535.261.03-1 iU" in drifted
    found = _audit(inventory, tmp_path / "drifted.json")
    assert {"driver.packages-mixed", "driver.packages-unfinished",
            "driver.upgrade-pending"} <= found, found

    # 3. the plan, then one repair
    dry = _gpuhost("provision", str(inventory), "--dry")
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-2000:]
    assert "NVIDIA driver 535.261.03" in dry.stdout and "would change" in dry.stdout
    assert host.run(STATE).stdout == drifted  # --dry changed nothing
    repair = _gpuhost("provision", str(inventory))
    assert repair.returncode == 0, repair.stdout[-4000:] + repair.stderr[-2000:]
    assert host.run(STATE).stdout == provisioned  # versions, holds, pins, dpkg, marker
    assert _audit(inventory, tmp_path / "repaired.json") == baseline
    again = _gpuhost("provision", str(inventory))
    assert again.returncode == 0 and f"{host.name}: ok, 0 changed" in again.stdout, again.stdout
