"""``gpuhost check`` on this machine (@local): exit codes, JUnit XML, tiers, the smoke test with
this machine's real CPU-only PyTorch. This machine has no GPU: GPU checks must FAIL with why."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpuhost.cli import main

pytestmark = pytest.mark.slow


def _check(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("gpuhost")
    return subprocess.run(
        [str(exe), "check", *args], capture_output=True, text=True, timeout=600, cwd=cwd
    )


def test_bad_inventory_and_limit_exit_2(tmp_path: Path) -> None:
    assert main(["check", str(tmp_path / "missing.py")]) == 2
    inv = tmp_path / "inv.py"
    inv.write_text("hosts = [('@local', {})]\n")
    assert main(["check", str(inv), "--limit", "nosuch"]) == 2


def test_static_tier_on_this_machine_fails_with_reasons_and_valid_junit(tmp_path: Path) -> None:
    junit = tmp_path / "report.xml"
    proc = _check(["--tier", "static", "--junit", str(junit)])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "the NVIDIA kernel module is not loaded" in out
    assert "nvidia-smi is not installed" in out or "nvidia-smi reports" in out
    root = ET.parse(junit).getroot()
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "gpuhost-check"
    cases = suite.findall("testcase")
    assert cases and int(suite.get("tests", "0")) == len(cases)
    for case in cases:
        # testinfra puts the host first in the parameter id: test_x[local] or test_x[local-param]
        assert re.search(r"\[local(\]|-)", case.get("name", "")), case.get("name")
        prop = case.find("properties/property[@name='host']")
        assert prop is not None and prop.get("value") == "local"
    names = {c.get("name") for c in cases}
    assert "test_driver_loaded[local]" in names
    assert not any("smoke" in n for n in names)  # functional checks deselected
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert "test_driver_loaded[local]" in failed
    assert all(c.find("error") is None for c in cases)  # host state is a FAIL, not an error


def test_functional_smoke_with_cpu_torch_fails_on_gpu_host(tmp_path: Path) -> None:
    """The smoke script runs for real with this venv's CPU-only torch; on a host gpuhost checks,
    torch without a usable GPU is a failure."""
    pytest.importorskip("torch", reason="this environment has no PyTorch to smoke-test")
    inv = tmp_path / "local.py"
    data = {"gpuhost_pythons": [sys.executable], "gpuhost_profile": "debian12-nonfree-535-security"}
    inv.write_text(f"hosts = [('@local', {data!r})]\n")
    proc = _check([str(inv), "--", "-k", "smoke_python_envs"])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "torch.cuda_available (could not run on a GPU host)" in out


def test_no_check_selected_exits_2() -> None:
    """pytest's 5 (nothing selected) is a usage problem: gpuhost exits 2 with one line."""
    proc = _check(["@local", "--tier", "static", "--", "-k", "no_such_check_name"])
    assert proc.returncode == 2, proc.stdout[-2000:]
    assert "no check was selected" in proc.stderr


def test_profiles_option_gives_every_host_the_profiles_file(tmp_path: Path) -> None:
    """``--profiles FILE`` (docs/profiles.md: the same option as provision, audit, upgrade)
    takes the place of inventory data gpuhost_profiles_file: a site profile resolves with it,
    is refused as unknown without it, and a missing file is one line and exit 2."""
    profiles = tmp_path / "site.yaml"
    profiles.write_text(
        "schema: 1\nprofiles:\n  site-t4:\n"
        '    description: "site: Debian 12 non-free 535.309.01"\n'
        "    os: [debian-12]\n    source: debian-nonfree\n"
        '    driver: {version: "535.309.01", branch: 535, kernel_module: proprietary}\n'
        '    cuda: {versions: ["11.8"], default: "11.8"}\n'
        "    fabric_manager: false\n"
    )
    inv = tmp_path / "inv.py"
    inv.write_text("hosts = [('@local', {'gpuhost_profile': 'site-t4'})]\n")
    select = ["--tier", "static", "--", "-k", "test_profile_resolves"]
    without = _check([str(inv), *select])
    # refused by the inventory loader before any check runs (one line, exit 2)
    assert without.returncode == 2, without.stdout[-2000:] + without.stderr[-2000:]
    assert "'site-t4' is not a known profile" in without.stderr
    given = _check([str(inv), "--profiles", profiles.name, *select], cwd=tmp_path)
    assert given.returncode == 0, given.stdout[-2000:] + given.stderr[-2000:]
    assert "1 passed" in given.stdout
    missing = _check([str(inv), "--profiles", str(tmp_path / "nope.yaml"), *select])
    assert missing.returncode == 2 and "nope.yaml" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_no_profile_is_said_once_before_the_checks_and_they_still_fail(tmp_path: Path) -> None:
    """A host with no profile: one line naming the host and why, before the first check runs;
    the checks that need the profile FAIL (never skip), each in one short line, and the cause is
    not repeated per check. With a profile in the inventory there is no such line."""
    proc = _check(["--tier", "static"], cwd=tmp_path)
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:]
    cause = "no profile for local: inventory data gpuhost_profile is not set"
    lines = out.splitlines()
    said = [i for i, line in enumerate(lines) if line.startswith(f"gpuhost check: {cause}")]
    first_check = next(i for i, line in enumerate(lines) if "test_" in line and ".py" in line)
    assert len(said) == 1 and said[0] < first_check, out[:2000]
    assert out.count(cause) == 1, out
    short = "local: no profile: no expected state (why: the line before the checks)"
    failed = re.findall(r"^FAILED \S+::(test_\w+)\[local\]", out, re.M)
    assert "test_profile_resolves" in failed and out.count(short) >= 5, out[-3000:]
    assert "test_cuda_toolkit" in failed  # needs the profile: fails, not skipped

    from gpuhost.matrix.profiles import load_profiles

    inv = tmp_path / "inv.py"
    inv.write_text(f"hosts = [('@local', {{'gpuhost_profile': {sorted(load_profiles())[0]!r}}})]\n")
    proc = _check([str(inv), "--tier", "static"], cwd=tmp_path)
    said = [x for x in proc.stdout.splitlines() if x.startswith("gpuhost check: ")]
    assert proc.returncode == 1 and all("hosts done, " in x for x in said), proc.stdout[-2000:]


def test_pytest_arguments_after_double_dash_keep_the_default_inventory() -> None:
    """'gpuhost check --tier static -- -k driver' (as the help shows) took '-k' as the inventory
    and exited 2 with 'inventory file not found'; the checks run on @local, -k selecting."""
    proc = _check(["--tier", "static", "--", "-k", "test_nvidia_smi_lists_gpus"])
    out = proc.stdout + proc.stderr
    assert "inventory file not found" not in out
    assert proc.returncode == 1, out[-3000:]  # this machine has no GPU: the one check fails
    assert "test_nvidia_smi_lists_gpus[local]" in out and "deselected" in out
    assert re.search(r"\b1 failed\b", out), out[-2000:]
