"""Rules on hand-made probe outputs and on real captures (tests/fixtures/captures)."""

from __future__ import annotations

import dataclasses

import pytest
from old_profiles import OLD_PROFILES
from probe_text import CLEAN_DEBIAN, capture, host_with, probe_output
from rule_modules import rule_modules

from gpuhost.audit.host import AuditSettings, audit_host
from gpuhost.audit.rules import RULE_IDS, RULES
from gpuhost.facts.build import host_facts_from_text
from gpuhost.faults.gpu import CLOCK_EVENTS
from gpuhost.matrix import load_matrix, load_profiles

SETTINGS = AuditSettings(matrix=load_matrix(), profiles={})
DRIVER_PACKAGES = (
    "nvidia-driver\t535.261.03-1\tii \n"
    "nvidia-smi\t535.261.03-1\tii \n"
    "libnvidia-ml1\t535.261.03-1\tii \n"
    "nvidia-kernel-dkms\t535.261.03-1\tii \n"
    "nvidia-persistenced\t535.171.04-1~deb12u1\tii \n"
)
NOT_LOADED = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
    "that the latest NVIDIA driver is installed and running.\n",
    "",
    9,
)
PROC_535_309 = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.309.01  Thu Jan  1 00:00:00 UTC 2026\n"
    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
)


def audit(text: str, host_data: dict | None = None, settings: AuditSettings = SETTINGS):
    return audit_host("h", host_facts_from_text(text), host_data or {}, settings)


def rules_of(report, severity: str | None = None) -> set[str]:
    return {f.rule for f in report.findings if severity is None or f.severity == severity}


def test_every_finding_id_in_the_rules_is_listed_and_documented():
    import inspect
    import re
    from pathlib import Path

    from gpuhost.audit import host, rules

    source = "".join(inspect.getsource(module) for module in rule_modules()) + inspect.getsource(
        host
    )
    literal_ids = set(re.findall(r'(?:Finding|SshdRule)\(\s*"([a-z.-]+)"', source))
    literal_ids |= set(re.findall(r'one_finding\(\s*rule,\s*"([a-z.-]+)"', source))
    literal_ids |= set(re.findall(r'catalog_finding\(\s*"([a-z.-]+)"', source))
    literal_ids |= {rule_id for _, rule_id, _ in CLOCK_EVENTS}
    literal_ids |= {rule_id for rule_id, _, _ in rules.SMI_STATE_RULES.values()}
    assert {"ssh.root-login", "driver.smi-missing", "gpu.remap-pending"} <= literal_ids
    assert {"gpu.fabric.state", "gpu.clocks.hw-thermal", "gpu.recovery-action"} <= literal_ids
    # checks that emit findings under their own id (Finding(rule, ...), one_finding(rule, rule))
    own_ids = {
        name
        for name, check in RULES.items()
        if re.search(r"(?:Finding\(|one_finding\(\s*rule,)\s*rule,", inspect.getsource(check))
    }
    assert {"gpu.clocks", "driver.reboot-needed"} <= own_ids
    assert literal_ids | own_ids <= set(RULE_IDS)
    assert len(set(RULE_IDS)) == len(RULE_IDS)
    doc = Path(__file__).resolve().parents[2] / "docs" / "audit-report.md"
    text = doc.read_text(encoding="utf-8")
    undocumented = [rule_id for rule_id in RULE_IDS if f"`{rule_id}`" not in text]
    assert undocumented == []


def test_clean_host_only_says_there_is_no_gpu():
    report = audit(probe_output(CLEAN_DEBIAN))
    assert rules_of(report) == {"gpu.none"}
    assert report.verdict == "warning"


def test_gpu_on_the_bus_without_a_driver_is_an_error():
    report = audit(host_with(pci="0000:3b:00.0 0x030200 0x2330\n"))
    assert rules_of(report, "error") == {"driver.missing"}


def test_driver_installed_but_not_loaded():
    report = audit(
        host_with(
            nvidia_smi=NOT_LOADED,
            dpkg=DRIVER_PACKAGES,
            apt_holds="nvidia-driver\nnvidia-smi\nlibnvidia-ml1\nnvidia-kernel-dkms\n",
        )
    )
    assert rules_of(report, "error") == {"driver.not-loaded"}
    # 535.261.03 is also behind NVIDIA's security bulletins (fixed on R535 in 535.309.01): the
    # other answer, apart from the verdict
    assert {f.rule for f in report.security_findings if f.severity == "error"} == {
        "security.driver"
    }
    assert report.verdict == "error" and report.security_verdict == "error"
    message = next(f.message for f in report.findings if f.rule == "driver.not-loaded")
    assert "installed driver 535.261.03" in message and "exit 9" in message


def test_unheld_driver_with_a_newer_candidate_is_an_upgrade_pending_error():
    policy = (
        "nvidia-smi:\n  Installed: 535.261.03-1\n  Candidate: 535.309.01-0+deb12u1\n"
        "  Version table:\n     535.309.01-0+deb12u1 500\n"
        "        500 https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64  "
        "Packages\n *** 535.261.03-1 500\n        100 /var/lib/dpkg/status\n"
    )
    report = audit(host_with(nvidia_smi=NOT_LOADED, dpkg=DRIVER_PACKAGES, apt_policy=policy))
    assert "driver.upgrade-pending" in rules_of(report, "error")
    message = next(f.message for f in report.findings if f.rule == "driver.upgrade-pending")
    assert "the NVIDIA CUDA repository" in message
    assert "apt-mark hold libnvidia-ml1 nvidia-driver nvidia-kernel-dkms nvidia-smi" in message


def test_unheld_driver_without_candidate_change_is_a_warning_and_pins_count_as_held():
    report = audit(host_with(nvidia_smi=NOT_LOADED, dpkg=DRIVER_PACKAGES))
    assert "driver.unheld" in rules_of(report, "warning")
    pinned = "".join(
        f"{name}:\n  Installed: 535.261.03-1\n  Candidate: 535.261.03-1\n  Version table:\n"
        " *** 535.261.03-1 1001\n        100 /var/lib/dpkg/status\n"
        for name in ("nvidia-driver", "nvidia-smi", "libnvidia-ml1", "nvidia-kernel-dkms")
    )
    report = audit(host_with(nvidia_smi=NOT_LOADED, dpkg=DRIVER_PACKAGES, apt_policy=pinned))
    assert not rules_of(report) & {"driver.unheld", "driver.upgrade-pending"}


def test_loaded_module_older_than_installed_userspace_needs_a_reboot():
    old = PROC_535_309.replace("535.309.01", "535.261.03")
    newer = DRIVER_PACKAGES.replace("535.261.03-1", "535.309.01-0+deb12u1")
    report = audit(
        host_with(
            proc_driver=old,
            dpkg=newer,
            nvidia_smi=(
                "Failed to initialize NVML: Driver/library version mismatch\n"
                "NVML library version: 535.309\n",
                "",
                18,
            ),
        )
    )
    errors = rules_of(report, "error")
    assert {"driver.reboot-needed", "driver.library-mismatch"} <= errors
    message = next(f.message for f in report.findings if f.rule == "driver.reboot-needed")
    assert "535.261.03" in message and "535.309.01" in message


def test_next_boot_kernel_without_a_dkms_module():
    report = audit(
        host_with(
            dkms="nvidia-current/535.309.01, 6.1.0-56-amd64, x86_64: installed\n",
            kernels="link=boot/vmlinuz-6.1.0-57-amd64\nboot=6.1.0-56-amd64\nboot=6.1.0-57-amd64\n",
            dpkg=DRIVER_PACKAGES,
            nvidia_smi=NOT_LOADED,
        )
    )
    assert "kernel.next-boot-module" in rules_of(report, "error")
    message = next(f.message for f in report.findings if f.rule == "kernel.next-boot-module")
    assert "6.1.0-57-amd64" in message and "built for: 6.1.0-56-amd64" in message


def test_fabric_manager_must_match_the_driver():
    report = audit(
        host_with(
            proc_driver=PROC_535_309,
            fabricmanager="Fabric Manager version is : 535.261.03\n",
            services="Id=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState=failed\n"
            "SubState=failed\nUnitFileState=enabled\n",
        )
    )
    assert "fabricmanager.version" in rules_of(report, "error")
    assert "fabricmanager.inactive" in rules_of(report, "warning")


def test_ssh_password_logins_are_flagged():
    report = audit(
        host_with(
            sshd="passwordauthentication yes\npermitrootlogin yes\n"
            "usepam yes\nkbdinteractiveauthentication yes\n"
        )
    )
    assert {"ssh.password-auth", "ssh.root-login", "ssh.keyboard-interactive"} <= rules_of(report)


def test_unreadable_section_is_reported_not_raised():
    report = audit(host_with(dpkg="this is not dpkg output at all\n"))
    assert "host.probe-incomplete" in rules_of(report, "warning")


PROFILES = load_profiles(OLD_PROFILES)  # built-ins + the old ones the cases name


def test_drift_from_the_pinned_profile():
    settings = dataclasses.replace(SETTINGS, profiles=PROFILES)
    loaded_535_261 = PROC_535_309.replace("535.309.01", "535.261.03")
    report = audit(
        host_with(proc_driver=loaded_535_261),
        {"gpuhost_profile": "nvidia-repo-580-cuda13.0"},
        settings,
    )
    errors = rules_of(report, "error")
    assert {
        "profile.driver",
        "profile.kernel-module",
        "profile.cuda",
        "profile.cudnn",
        "profile.container-toolkit",
    } <= errors
    message = next(f.message for f in report.findings if f.rule == "profile.driver")
    assert "535.261.03" in message and "580.178.04" in message
    # a component the host lacks reads "no cuDNN installed", never "cuDNN not installed found"
    message = next(f.message for f in report.findings if f.rule == "profile.cudnn")
    assert message.startswith("no cuDNN installed, profile nvidia-repo-580-cuda13.0 pins")
    assert not any("not installed found" in f.message for f in report.findings)


def test_old_module_still_loaded_after_a_driver_change_is_fixed_by_a_reboot():
    # the profile's driver is installed, the module of the driver before it is still loaded:
    # nothing to upgrade, the host needs the reboot the upgrade/provision left pending
    settings = dataclasses.replace(SETTINGS, profiles=PROFILES)
    loaded_535_261 = PROC_535_309.replace("535.309.01", "535.261.03")
    installed_535_309 = DRIVER_PACKAGES.replace("535.261.03", "535.309.01")
    report = audit(
        host_with(proc_driver=loaded_535_261, dpkg=installed_535_309),
        {"gpuhost_profile": "debian12-nonfree-535-security"},
        settings,
    )
    finding = next(f for f in report.findings if f.rule == "profile.driver")
    assert finding.fix is not None and finding.fix.startswith("reboot the host")
    assert "loaded driver 535.261.03 (installed 535.309.01)" in finding.message
    assert "gpuhost upgrade" not in finding.message


def test_host_matching_its_profile_has_no_profile_finding():
    settings = dataclasses.replace(SETTINGS, profiles=PROFILES)
    nvcc = "path=/usr/bin/nvcc\nCuda compilation tools, release 11.8, V11.8.89\n"
    report = audit(
        host_with(
            proc_driver=PROC_535_309, nvcc=nvcc, profile_marker="debian12-nonfree-535-security\n"
        ),
        {},
        settings,
    )
    assert not {r for r in rules_of(report) if r.startswith("profile.")}
    assert report.results and any(r.rule == "profile" and not r.skipped for r in report.results)


def test_clocks_at_max_when_the_profile_says_so():
    xml = capture("nvidia-smi-xml/telegraf__a100-sxm4-v12.xml")
    settings = dataclasses.replace(SETTINGS, profiles=PROFILES)
    report = audit(
        host_with(nvidia_smi=xml), {"gpuhost_profile": "nvidia-repo-550-cuda12.4"}, settings
    )
    result = next(r for r in report.results if r.rule == "gpu.clocks")
    gpu = report.facts.driver.smi.gpus[0]
    at_max = gpu.clocks.applications_graphics == gpu.clocks.max_graphics
    assert result.skipped is None
    assert bool(result.findings) != at_max or gpu.clocks.applications_clocks_supported is False


def test_unknown_profile_from_the_marker_file():
    report = audit(host_with(profile_marker="no-such-profile\n"))
    finding = next(f for f in report.findings if f.rule == "profile.unknown")
    assert finding.severity == "error"
    assert "/etc/gpuhost/profile" in finding.message


def _xml_host(relative: str) -> str:
    xml = capture(relative)
    return host_with(nvidia_smi=xml, proc_driver=PROC_535_309, dpkg="")


@pytest.mark.parametrize(
    "relative",
    [
        "nvidia-smi-xml/openpai__nvidia_smi_retired_pages.xml",
        "nvidia-smi-xml/telegraf__a100-sxm4-v12.xml",
        "nvidia-smi-xml/telegraf-pr17482__dual_a5000-v13.xml",
    ],
)
def test_real_captures_are_judged_without_crashing(relative):
    report = audit(_xml_host(relative))
    assert report.facts is not None and report.facts.driver.smi.state == "ok"
    assert report.facts.driver.smi.gpus
    # Rules that need a GPU ran instead of skipping.
    skipped = {r.rule for r in report.results if r.skipped}
    assert not skipped & {"gpu.persistence", "gpu.ecc", "gpu.pcie-link"}


def test_retired_pages_capture():
    report = audit(_xml_host("nvidia-smi-xml/openpai__nvidia_smi_retired_pages.xml"))
    gpus = report.facts.driver.smi.gpus
    retired = [
        g for g in gpus if (g.retired_pages.single_bit or 0) + (g.retired_pages.double_bit or 0)
    ]
    if not retired:
        pytest.skip("this capture shows no retired page count")
    assert rules_of(report) & {"gpu.retired-pages", "gpu.retired-pages-pending"}


def test_all_xml_captures_build_facts():
    from probe_text import CAPTURES

    folder = CAPTURES / "nvidia-smi-xml"
    assert len(list(folder.glob("*.xml"))) > 20
    for path in sorted(folder.glob("*.xml")):
        report = audit(host_with(nvidia_smi=path.read_text(encoding="utf-8")))
        assert report.facts is not None, path.name
        assert report.facts.driver.smi.state in ("ok", "unknown-error"), path.name


def _marker_json(profile: str, **changes: object) -> str:
    """The marker provision writes for ``profile`` (gpuhost.deploys: DesiredState.to_marker())."""
    from gpuhost.deploys.guards import spec_from_profile
    from gpuhost.operations.marker import render_marker

    spec = dataclasses.replace(spec_from_profile(PROFILES[profile], []), **changes)
    return render_marker(spec.to_marker())


def test_json_marker_of_the_inventory_profile_is_no_drift():
    settings = dataclasses.replace(SETTINGS, profiles=PROFILES)
    nvcc = "path=/usr/bin/nvcc\nCuda compilation tools, release 11.8, V11.8.89\n"
    name = "debian12-nonfree-535-security"
    report = audit(
        host_with(proc_driver=PROC_535_309, nvcc=nvcc, profile_marker=_marker_json(name)),
        {"gpuhost_profile": name},
        settings,
    )
    assert report.facts.profile_marker == name
    assert report.facts.provision_marker.driver_version == "535.309.01"
    assert not {r for r in rules_of(report) if r.startswith("profile.")}
    assert "host.probe-incomplete" not in rules_of(report)


def test_json_marker_alone_names_the_profile():
    settings = dataclasses.replace(SETTINGS, profiles=PROFILES)
    report = audit(
        host_with(proc_driver=PROC_535_309, profile_marker=_marker_json("debian12-nonfree-535")),
        {},
        settings,
    )
    assert "profile.unknown" not in rules_of(report)
    message = next(f.message for f in report.findings if f.rule == "profile.driver")
    assert "535.309.01 found, profile debian12-nonfree-535 pins 535.261.03" in message


def test_json_marker_of_another_profile_warns():
    settings = dataclasses.replace(SETTINGS, profiles=PROFILES)
    report = audit(
        host_with(profile_marker=_marker_json("debian12-nonfree-535")),
        {"gpuhost_profile": "debian12-nonfree-535-security"},
        settings,
    )
    message = next(f.message for f in report.findings if f.rule == "profile.marker")
    assert "provisioned with debian12-nonfree-535 (/etc/gpuhost/profile)" in message


def test_marker_recording_an_older_pin_of_the_same_profile_warns():
    settings = dataclasses.replace(SETTINGS, profiles=PROFILES)
    name = "debian12-nonfree-535-security"
    report = audit(
        host_with(
            proc_driver=PROC_535_309,
            profile_marker=_marker_json(name, driver_version="535.261.03"),
        ),
        {"gpuhost_profile": name},
        settings,
    )
    finding = next(f for f in report.findings if f.rule == "profile.marker")
    assert finding.severity == "warning"
    assert "at driver 535.261.03" in finding.message and "now pins 535.309.01" in finding.message


def test_kernel_module_auto_is_judged_by_the_flavour_the_marker_recorded():
    settings = dataclasses.replace(SETTINGS, profiles=PROFILES)
    name = "nvidia-repo-550-cuda12.4"
    host = {"gpuhost_profile": name}
    open_marker = host_with(
        proc_driver=PROC_535_309, profile_marker=_marker_json(name, kernel_module="open")
    )
    assert "profile.kernel-module" in rules_of(audit(open_marker, host, settings))
    proprietary = host_with(
        proc_driver=PROC_535_309, profile_marker=_marker_json(name, kernel_module="proprietary")
    )
    assert "profile.kernel-module" not in rules_of(audit(proprietary, host, settings))


def test_unreadable_marker_is_a_probe_problem_not_a_profile_name():
    report = audit(host_with(profile_marker='{"schema": 1, "profile": 5}\n'))
    assert report.facts.profile_marker is None
    assert "host.probe-incomplete" in rules_of(report)
    assert "profile.unknown" not in rules_of(report)


def test_no_cuda_drift_when_the_host_data_leaves_cuda_out():
    settings = dataclasses.replace(SETTINGS, profiles=PROFILES)
    name = "debian12-nonfree-535-security"
    driver_only = {"gpuhost_profile": name, "gpuhost_install_cuda": False}
    report = audit(host_with(proc_driver=PROC_535_309), driver_only, settings)
    assert not {"profile.cuda", "profile.cuda-default"} & rules_of(report)
    default = audit(host_with(proc_driver=PROC_535_309), {"gpuhost_profile": name}, settings)
    assert "profile.cuda" in rules_of(default)


def test_cudnn_of_the_profile_installed_beside_another_majors_cudnn_is_not_drift():
    # after 'gpuhost upgrade' from nvidia-repo-580-cuda12.9 to nvidia-repo-580-cuda13.0 (lab
    # stand-in repository): the 12.9 profile's libcudnn9-cuda-12 stays installed beside the new
    # libcudnn9-cuda-13 (side by side is legal); the audit judged the first one it listed
    settings = dataclasses.replace(SETTINGS, profiles=PROFILES)
    both = (
        "libcudnn9-cuda-12\t9.10.2.21-1\tii \n"
        "libcudnn9-cuda-13\t9.17.0.29-1\tii \n"
    )
    data = {"gpuhost_profile": "nvidia-repo-580-cuda13.0"}
    report = audit(host_with(dpkg=DRIVER_PACKAGES + both), data, settings)
    assert "profile.cudnn" not in rules_of(report)
    only_old = audit(host_with(dpkg=DRIVER_PACKAGES + both.splitlines(True)[0]), data, settings)
    message = next(f.message for f in only_old.findings if f.rule == "profile.cudnn")
    assert message.startswith("cuDNN 9.10.2.21 found, profile nvidia-repo-580-cuda13.0 pins 9.17")


def test_cudnn_at_the_profiles_version_but_for_another_cuda_major_is_drift():
    # libcudnn9-cuda-12 at 9.17.0 does not serve a CUDA 13 profile that pins 9.17.0
    settings = dataclasses.replace(SETTINGS, profiles=PROFILES)
    other_major = "libcudnn9-cuda-12\t9.17.0.29-1\tii \n"
    data = {"gpuhost_profile": "nvidia-repo-580-cuda13.0"}
    report = audit(host_with(dpkg=DRIVER_PACKAGES + other_major), data, settings)
    assert "profile.cudnn" in rules_of(report, "error")


def test_a_named_interpreter_missing_from_the_host_is_a_warning():
    """--python /opt/venv/bin/python that the host lacks was a silent skip (exit 0, no finding)."""
    missing = ("", "sh: 1: /opt/venv/bin/python: not found\n", 127)
    report = audit(host_with(pythons="/opt/venv/bin/python\n", python_0=missing))
    (finding,) = [f for f in report.findings if f.rule == "frameworks.probe"]
    assert finding.severity == "warning" and finding.found == "/opt/venv/bin/python: not found"
    assert "--python or gpuhost_pythons" in (finding.fix or "")
    # the default python3 absent from a host is no finding: nobody asked for it
    report = audit(host_with(pythons="python3\n", python_0=missing))
    assert "frameworks.probe" not in rules_of(report)
