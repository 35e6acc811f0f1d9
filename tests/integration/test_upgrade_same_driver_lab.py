"""``gpuhost upgrade --to`` a profile with the host's driver but other settings (issue 20, HQA
18:16): one GPU-shaped lab host (emulated T4) provisioned with the built-in
debian12-nonfree-535-security, then upgraded to the same profile with clocks at max
(tests/integration/data/same_driver_profiles.yaml). The upgrade runs (the marker names the
target, clocks are applied); the same command again finds the host current and changes nothing.
About a minute on an idle machine with a warm apt cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from provision_support import ssh_data

pytestmark = [pytest.mark.lab, pytest.mark.slow]

PROFILES = Path(__file__).parent / "data" / "same_driver_profiles.yaml"
BUILT_IN = "debian12-nonfree-535-security"
TARGET = "lab-535-security-max-clocks"


def _gpuhost(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuhost", *args], capture_output=True,
                          text=True, timeout=900, cwd=workdir, check=False)


@pytest.fixture
def t4_host(lab: Any) -> Any:
    view = lab(max(1, lab.count))
    index = int(view.hosts[-1].name[1:])
    view.manager.set_shape(index, ("t4", 1), None)
    try:
        yield lab(max(1, lab.count)).hosts[index - 1]
    finally:
        view.manager.set_shape(index, None, None)


def test_same_driver_other_settings_is_upgraded_then_current(lab: Any, t4_host: Any,
                                                             tmp_path: Path) -> None:
    view = lab(max(1, lab.count))
    data = {**ssh_data(view, t4_host), "gpuhost_profile": BUILT_IN,
            "gpuhost_install_cuda": False, "gpuhost_harden": False}
    inventory = tmp_path / "inventory.py"
    inventory.write_text(f"hosts = {[(t4_host.name, data)]!r}\n")
    provision = _gpuhost(tmp_path, "provision", str(inventory), "--reboot")
    assert provision.returncode == 0, provision.stdout + provision.stderr
    before = json.loads(t4_host.run("cat /etc/gpuhost/profile").stdout)
    assert before["profile"] == BUILT_IN and before["clocks"]["mode"] == "off"

    args = ("upgrade", str(inventory), "--limit", t4_host.name, "--to", TARGET,
            "--profiles", str(PROFILES), "--state-dir", str(tmp_path / "state"))
    upgrade = _gpuhost(tmp_path, *args)
    out = upgrade.stdout + upgrade.stderr
    assert upgrade.returncode == 0, out
    assert f"{t4_host.name}: upgraded" in out and "already on" not in out, out
    after = json.loads(t4_host.run("cat /etc/gpuhost/profile").stdout)
    assert after["profile"] == TARGET and after["clocks"]["mode"] == "auto", after
    assert after["driver"] == before["driver"] and after["companions"] == before["companions"]
    clocks = t4_host.run("cat /usr/local/lib/gpuhost/apply-clocks.sh").stdout
    assert "nvidia-smi -i 0 -ac " in clocks, clocks

    again = _gpuhost(tmp_path, *args)
    out = again.stdout + again.stderr
    assert again.returncode == 0, out
    assert f"already on {TARGET}, validated" in out and f"{t4_host.name}: current" in out, out
