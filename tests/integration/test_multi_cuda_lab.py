"""Several CUDA toolkits side by side on a lab host (the lab's stand-in NVIDIA repository).

A profile listing CUDA 12.6 and 12.4 with 12.4 as the default: provision installs both
``cuda-toolkit-12-6`` and ``cuda-toolkit-12-4``, each pinned to its own version in the apt
preferences (1001 for its series, -1 for the rest) and held; the stand-in toolkits register the
``cuda`` update-alternatives group as NVIDIA's packages do, whose auto mode would pick the newest
(12.6), so provision sets the group to the profile's default; the audit then reports no
``profile.cuda``/``profile.cuda-default``/``cuda.default-link`` finding, and a re-run changes
nothing. Driver-side results are not asserted here (test_provision_lab.py covers them).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from provision_support import lab_profiles_with, repo_data, run_provision, ssh_data, write_inventory

pytestmark = [pytest.mark.lab, pytest.mark.slow]

PROFILE = {
    "description": "lab: R550 550.54.15 + CUDA 12.6 and 12.4 side by side (12.4 the default)",
    "os": ["debian-12"],
    "source": "nvidia-cuda-repo",
    "driver": {"version": "550.54.15", "branch": 550, "kernel_module": "proprietary"},
    "cuda": {"versions": ["12.6", "12.4"], "default": "12.4"},
    "fabric_manager": False,
    "clocks": {"policy": "none"},
    "persistence": True,
}


def test_two_cuda_toolkits_side_by_side_pinned_default_linked_audit_clean(
    lab, fresh_host, tmp_path: Path
) -> None:
    lab_ = lab(lab.count or 1)
    profiles = lab_profiles_with(tmp_path / "profiles.yaml", {"lab-multi-cuda": PROFILE})
    data = {**ssh_data(lab_, fresh_host), **repo_data(lab_),
            "gpuhost_profile": "lab-multi-cuda", "gpuhost_profiles_file": str(profiles)}
    first = run_provision([(fresh_host.name, data)])[fresh_host.name]
    assert any(first.values())

    rows = fresh_host.run("dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' "
                          "'cuda-toolkit-12-*'").stdout.split("\n")
    got = {r.split()[0]: r.split()[1:] for r in rows if r.strip()}
    # the newest release of each series (apt's choice among the 1001 versions), both held
    assert got == {"cuda-toolkit-12-6": ["12.6.2-1", "hi"],
                   "cuda-toolkit-12-4": ["12.4.1-1", "hi"]}, got
    prefs = fresh_host.run("cat /etc/apt/preferences.d/gpuhost-nvidia").stdout
    for name, series in (("cuda-toolkit-12-6", "12.6"), ("cuda-toolkit-12-4", "12.4")):
        assert (f"Package: {name}\nPin: version {series}.*\nPin-Priority: 1001\n\n"
                f"Package: {name}\nPin: version *\nPin-Priority: -1") in prefs, prefs
    # the -1 record is live: apt offers nothing outside the series
    policy = fresh_host.run("apt-cache policy cuda-toolkit-12-4").stdout
    assert " 12.4.1-1 1001" in policy and " 12.4.0-1 1001" in policy, policy

    assert fresh_host.run("readlink /usr/local/cuda").stdout.strip() == "/etc/alternatives/cuda"
    assert fresh_host.run("readlink -f /usr/local/cuda").stdout.strip() == "/usr/local/cuda-12.4"
    alt = fresh_host.run("update-alternatives --query cuda").stdout
    assert "Status: manual" in alt and "Value: /usr/local/cuda-12.4" in alt, alt
    assert "release 12.4," in fresh_host.run("/usr/local/cuda/bin/nvcc --version").stdout

    inventory = write_inventory(tmp_path / "inv.py", [(fresh_host.name, data)])
    report = tmp_path / "audit.json"
    exe = Path(sys.executable).with_name("gpuhost")
    proc = subprocess.run([str(exe), "audit", str(inventory), "--json", str(report)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    (entry,) = json.loads(report.read_text())["hosts"]
    rules = {f["rule"]: f for f in entry["findings"]}
    for rule in ("profile.cuda", "profile.cuda-default", "cuda.default-link"):
        assert rule not in rules, rules[rule]
    toolkits = {t["version"] for t in entry["facts"]["cuda"]["toolkits"]}
    assert toolkits == {"12.6.2", "12.4.1"}, entry["facts"]["cuda"]

    again = run_provision([(fresh_host.name, data)])[fresh_host.name]
    assert not any(again.values()), {k: v for k, v in again.items() if v}
