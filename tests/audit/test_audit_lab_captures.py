"""The audit on real probe outputs captured from lab hosts (tests/audit/data/README.md)."""

from __future__ import annotations

from pathlib import Path

from old_profiles import OLD_PROFILES

from gpuhost.audit.host import AuditSettings, audit_host
from gpuhost.facts.build import host_facts_from_text
from gpuhost.matrix import load_matrix

DATA = Path(__file__).resolve().parent / "data"
SETTINGS = AuditSettings(matrix=load_matrix(), profiles={})


def _audit(name: str):
    facts = host_facts_from_text((DATA / name).read_text(encoding="utf-8"))
    assert facts.problems == []
    return audit_host(name, facts, {}, SETTINGS)


def _rules(report, severity=None):
    return {f.rule for f in report.findings if severity is None or f.severity == severity}


def test_clean_lab_host():
    report = _audit("lab-debian12-clean.probe")
    assert _rules(report) == {"gpu.none"}
    assert report.facts.os.codename == "bookworm"
    assert report.facts.sshd.settings["passwordauthentication"] == "no"
    assert report.facts.frameworks[0].found and report.facts.frameworks[0].torch_version is None


def test_full_debian_driver_with_dkms_module_and_holds():
    report = _audit("lab-debian12-nvidia-driver-held-no-gpu.probe")
    facts = report.facts
    assert facts.driver.smi_rc == 9 and facts.driver.smi.state == "driver-not-loaded"
    (build,) = [e for e in facts.dkms if e.module == "nvidia-current"]
    assert (build.version, build.kernel, build.status) == (
        "535.309.01",
        "6.1.0-56-amd64",
        "installed",
    )
    assert facts.kernel.installed == ["6.1.0-56-amd64"]
    assert "nvidia-driver" in facts.packages.held and facts.packages.policy_known
    assert facts.persistenced is not None and facts.persistenced.active == "failed"
    errors = _rules(report, "error")
    assert errors == {"driver.not-loaded"}
    assert not _rules(report) & {"driver.unheld", "driver.upgrade-pending", "driver.packages-mixed"}
    message = report.findings[0].message
    assert "dkms: nvidia-current 535.309.01 for 6.1.0-56-amd64: installed" in message


def test_unheld_nvidia_smi_with_a_newer_security_candidate():
    report = _audit("lab-debian12-nvidia-smi-unheld-no-gpu.probe")
    assert {"driver.not-loaded", "driver.upgrade-pending"} <= _rules(report, "error")
    message = next(f.message for f in report.findings if f.rule == "driver.upgrade-pending")
    assert (
        "nvidia-smi 535.261.03-1 -> 535.309.01-0+deb12u1 from http://deb.debian.org/debian-security"
        in message
    )


def _audit_with_profiles(name: str):
    from gpuhost.matrix.profiles import load_profiles

    facts = host_facts_from_text((DATA / name).read_text(encoding="utf-8"))
    assert facts.problems == []
    # the profile comes from the provision marker on the host (no inventory data)
    settings = AuditSettings(matrix=load_matrix(), profiles=load_profiles(OLD_PROFILES))
    return audit_host(name, facts, {}, settings)


def _finding(report, rule):
    return next(f for f in report.findings if f.rule == rule)


def test_holds_removed_by_hand_while_the_pins_stay():
    report = _audit_with_profiles("lab-debian12-535-provisioned-holds-removed.probe")
    finding = _finding(report, "driver.hold-removed")
    assert finding.severity == "warning"
    assert finding.fix.startswith("gpuhost provision (or apt-mark hold ")
    assert "nvidia-smi" in finding.found and "nvidia-kernel-dkms" in finding.found
    assert not _rules(report) & {"driver.unheld", "driver.upgrade-pending", "driver.pin-missing"}


def test_preferences_file_deleted_while_the_holds_stay():
    report = _audit_with_profiles("lab-debian12-535-provisioned-preferences-deleted.probe")
    finding = _finding(report, "driver.pin-missing")
    assert "nvidia-smi (priority 500)" in finding.found
    assert "/etc/apt/preferences.d/gpuhost-nvidia" in finding.message
    assert not _rules(report) & {"driver.unheld", "driver.hold-removed"}


def test_half_installed_package_and_a_driver_moved_by_hand():
    report = _audit_with_profiles("lab-debian12-535-driver-moved-by-hand-dpkg-unpacked.probe")
    unfinished = _finding(report, "driver.packages-unfinished")
    assert unfinished.severity == "error" and unfinished.found == "dpkg status: libnvidia-ml1 (iU)"
    assert {"driver.packages-mixed", "driver.unheld", "profile.driver"} <= _rules(report)


def test_no_gpu_on_the_bus_is_not_told_to_modprobe():
    report = _audit_with_profiles("lab-debian12-535-provisioned-holds-removed.probe")
    finding = _finding(report, "driver.not-loaded")
    assert "modprobe" not in finding.fix and "no NVIDIA device on the PCI bus" in finding.fix


def test_a_host_without_a_profile_is_not_judged_for_single_layers():
    """Without a profile (no marker, no inventory name) holds *or* pins are enough."""
    report = _audit("lab-debian12-nvidia-driver-held-no-gpu.probe")
    assert not _rules(report) & {"driver.pin-missing", "driver.hold-removed"}
