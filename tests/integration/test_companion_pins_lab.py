"""Issue 20: provision refuses, naming the version, when the host's sources cannot give a
companion at the profile's exact version (here a Debian revision that does not exist), with one
line, nothing installed, no marker (the companions at their versions on a host whose sources
offer newer ones: test_provision_lab.test_debian_nonfree_driver_pinned_held_survives_
full_upgrade). Since issue 33 (item 9) the refusal is provision's apt guard, while the run is
prepared (deploys/apt_offered.py): exit 2, the host unchanged (no preferences file, no source
components added). About 15 s."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from provision_support import ssh_data

pytestmark = [pytest.mark.lab]

PROFILES = Path(__file__).parent / "data" / "same_driver_profiles.yaml"
MISSING = "535.309.01-0+deb12u99"


def test_a_companion_version_the_sources_lack_is_refused_naming_it(lab: Any, fresh_host: Any,
                                                                  tmp_path: Path) -> None:
    view = lab(max(1, lab.count))
    profiles = yaml.safe_load(PROFILES.read_text())
    profile = next(iter(profiles["profiles"].values()))
    profile["companions"]["nvidia-modprobe"] = MISSING
    profiles["profiles"] = {"lab-missing-companion": profile}
    path = tmp_path / "profiles.yaml"
    path.write_text(yaml.safe_dump(profiles))
    data = {**ssh_data(view, fresh_host), "gpuhost_profile": "lab-missing-companion",
            "gpuhost_install_cuda": False, "gpuhost_harden": False}
    inventory = tmp_path / "inventory.py"
    inventory.write_text(f"hosts = {[(fresh_host.name, data)]!r}\n")
    proc = subprocess.run([sys.executable, "-m", "gpuhost", "provision", str(inventory),
                           "--profiles", str(path)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out, out
    line = next(x for x in out.splitlines() if x.startswith(f"{fresh_host.name}: failed: "))
    assert line.startswith(f"{fresh_host.name}: failed: not offered by the apt sources at the "
                           "profile's version"), line
    assert f"nvidia-modprobe {MISSING} (offered: " in line and "nothing was changed" in line, line
    assert fresh_host.run("test -e /etc/apt/preferences.d/gpuhost-nvidia").returncode != 0
    installed = fresh_host.run("dpkg-query -W -f='${Package}\\n' 'nvidia-*' 2>/dev/null").stdout
    assert installed.strip() == "", installed
    assert fresh_host.run("test -e /etc/gpuhost/profile").returncode != 0
