"""The pure helpers behind checks/: judged on real nvidia-smi captures and hand-made inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from smoke.documents import find_check, gpu_document

from gpuhost.checks_support import expected, gpu, packages, pci, smoke, stress, xid
from gpuhost.checks_support.inventory import CheckHost, load_hosts, ssh_config
from gpuhost.errors import ConfigError, ParseError
from gpuhost.facts.probe_parsers import parse_os_release
from gpuhost.faults.judge import finding_line, xid_findings
from gpuhost.parsers import parse_output, parse_proc_version, parse_xml
from gpuhost.parsers.packages import Package
from gpuhost.smoke import Expectations, judge
from gpuhost.smoke.script import COULD_NOT_RUN, make_check

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"
OWN = Path(__file__).resolve().parents[1] / "fixtures" / "parsers"


def capture(rel: str) -> str:
    """A real captured output (tests/fixtures/captures, sources in its INDEX.json)."""
    return (CAPTURES / rel).read_text()


# --------------------------------------------------------------------------- GPU health


def test_retired_pages_pending_and_ecc_found_on_real_v100_capture() -> None:
    report = parse_xml(capture("nvidia-smi-xml/openpai__nvidia_smi_retired_pages.xml"))
    pages = gpu.retired_page_problems(report)
    assert pages and pages[0].startswith("[gpu.retired-pages-pending, action: reboot] GPU")
    assert "Tesla V100" in pages[0] and "waiting to be retired" in pages[0]
    ecc = gpu.ecc_problems(report)
    assert any(p.startswith("[gpu.ecc-uncorrectable, action: reset-gpu] ") for p in ecc)


def test_healthy_h100_capture_has_no_health_problem() -> None:
    from gpuhost.parsers import parse_query_text

    report = parse_query_text(capture("nvidia-smi-q-text/thamada-gls__H100SXMx8__565.57.01.txt"))
    assert len(report.gpus) == 8
    busy = {g.index: "P0" for g in report.gpus if g.index is not None}
    assert gpu.ecc_problems(report) == []
    assert gpu.retired_page_problems(report) == []
    assert gpu.remapped_row_problems(report) == []
    assert gpu.persistence_problems(report) == []
    assert gpu.pcie_problems(report, busy) == []


def test_pcie_width_always_judged_generation_only_when_busy() -> None:
    report = parse_xml(capture("nvidia-smi-xml/telegraf-pr17482__dual_2070-v13.xml"))
    idle = gpu.pcie_problems(report, {0: "P8", 1: "P8"})
    width = "[gpu.pcie-width, action: inspect-hardware] "
    assert len(idle) == 2 and all(p.startswith(width) for p in idle)
    assert all("PCIe link is x8, below its max x16" in p for p in idle)
    busy = gpu.pcie_problems(report, gpu.parse_pstates("0, P0\n1, P0\n"))
    gen = "[gpu.pcie-gen, action: inspect-hardware] "
    assert sum(p.startswith(gen) and "gen 1 while busy" in p for p in busy) == 2


def test_persistence_off_is_named_per_gpu() -> None:
    report = parse_xml(capture("nvidia-smi-xml/telegraf__a100-sxm4-v12.xml"))
    problems = gpu.persistence_problems(report)
    assert len(problems) == 1
    assert problems[0].startswith("[gpu.persistence] persistence mode is off on 1 of 1 GPU(s)")
    assert "NVIDIA A100-SXM4-80GB" in problems[0]


def test_remapped_row_failure_and_pending() -> None:
    from dataclasses import replace

    from gpuhost.parsers.nvidia_smi import RemappedRows, SmiReport

    base = parse_xml(capture("nvidia-smi-xml/telegraf__a100-sxm4-v12.xml")).gpus[0]
    failed = replace(base, remapped_rows=RemappedRows(0, 3, False, True))
    pending = replace(base, remapped_rows=RemappedRows(0, 1, True, False))
    problems = gpu.remapped_row_problems(SmiReport(gpus=[failed, pending]))
    assert problems[0].startswith("[gpu.remap-failure, action: inspect-hardware] ")
    assert "no spare rows" in problems[0]
    assert problems[1].startswith("[gpu.remap-pending, action: reset-gpu] ")


@pytest.mark.parametrize(
    "capture_file",
    [
        "nvidia-smi-xml/openpai__nvidia_smi_retired_pages.xml",
        "nvidia-smi-xml/telegraf-pr17482__dual_2070-v13.xml",
        "nvidia-smi-xml/telegraf__a100-sxm4-v12.xml",
    ],
)
def test_checks_and_audit_give_the_same_judgement(capture_file: str) -> None:
    """A check fails exactly on the audit's error and warning findings of the same rules."""
    from gpuhost.audit.host import AuditSettings, audit_host
    from gpuhost.facts.host_facts import DriverFacts, HostFacts
    from gpuhost.matrix import load_matrix

    report = parse_xml(capture(capture_file))
    facts = HostFacts(driver=DriverFacts(smi=report, smi_installed=True))
    audited = audit_host("h", facts, {}, AuditSettings(load_matrix(), {}))
    rules = ("gpu.ecc", "gpu.retired-pages", "gpu.remapped-rows", "gpu.pcie-link")
    finding_ids = ("gpu.ecc", "gpu.retired-pages", "gpu.remap", "gpu.pcie")  # id prefixes
    from_audit = sorted(
        finding_line(f)
        for f in audited.findings
        if f.severity in gpu.FAILING and f.rule.startswith(finding_ids)
    )
    from_checks = sorted(p for rule in rules for p in gpu.rule_problems(rule, report))
    assert all(", action: " in line for line in from_audit)
    assert from_checks == from_audit


@pytest.mark.parametrize("installed", [None, "535.309.01-0+deb12u1", "565.57.01-1"])
def test_driver_checks_give_the_audits_profile_findings(installed: str | None) -> None:
    """test_driver's version and flavour checks and the health check fail on exactly the
    audit's profile.driver / profile.kernel-module findings: an open 565.57.01 module loaded
    (real capture) on a host whose profile pins the proprietary 535.309.01."""
    from gpuhost.audit.host import AuditSettings, audit_host
    from gpuhost.desired import DesiredState
    from gpuhost.facts.host_facts import DriverFacts, HostFacts, PackageFacts
    from gpuhost.matrix import load_profiles
    from gpuhost.parsers.packages import Package

    name = "debian12-nonfree-535-security"
    profile = load_profiles()[name]
    module = parse_proc_version(
        capture("proc-driver-version/open-kmod__565.57.01__ubuntu24.04.txt")
    )
    smi = parse_xml(capture("nvidia-smi-xml/telegraf__a100-sxm4-v12.xml"))
    packages = [Package("libcuda1", installed, "ii")] if installed else []
    facts = HostFacts(
        driver=DriverFacts(smi=smi, smi_installed=True, loaded_module=module),
        packages=PackageFacts(manager="dpkg", packages=packages),
    )
    settings = AuditSettings(None, {name: profile})
    audited = audit_host("h", facts, {"gpuhost_profile": name}, settings)
    from_audit = sorted(
        f"[{f.rule}] {f.message}" for f in audited.findings if f.rule in gpu.DRIVER_FINDINGS
    )
    spec = DesiredState.from_profile(profile, ["NVIDIA A100-SXM4-80GB"])
    from_checks = sorted(gpu.profile_driver_problems(smi, module, spec, packages))
    assert from_checks == from_audit
    assert [line.split("]")[0] for line in from_checks] == [
        "[profile.driver",
        "[profile.kernel-module",
    ]
    reboot = "fix: reboot the host" in from_checks[0]
    assert reboot == (installed == "535.309.01-0+deb12u1")


@pytest.mark.parametrize(
    ("fixture", "said"),
    [
        ("nvidia-smi-errors/gpu-is-lost__linux.txt", "gpu-lost"),
        ("nvidia-smi-errors/no-devices-were-found__rtx5090.txt", "no-devices"),
        (
            "nvidia-smi-errors/nvml-driver-library-mismatch__nvml-570.124.txt",
            "driver-library-mismatch",
        ),
    ],
)
def test_unavailable_reason_names_the_real_state(fixture: str, said: str) -> None:
    text = capture(fixture)
    reason = gpu.unavailable_reason(text, parse_output(text), None)
    assert reason is not None and said in reason and "kernel module is not loaded" in reason


def test_unavailable_reason_names_the_audit_rule_and_fix() -> None:
    text = capture("nvidia-smi-errors/nvml-driver-library-mismatch__nvml-570.124.txt")
    reason = gpu.unavailable_reason(text, parse_output(text), None)
    assert reason is not None and "[driver.library-mismatch: " in reason
    assert "fix: reboot the host" in reason


def test_unavailable_reason_missing_tool_and_ok() -> None:
    missing = gpu.unavailable_reason(gpu.NOT_FOUND, None, None)
    assert missing is not None and missing.startswith("nvidia-smi is not installed")
    text = capture("nvidia-smi-xml/telegraf__a100-sxm4-v12.xml")
    module = parse_proc_version(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.261.03  Release Build\n"
    )
    assert gpu.unavailable_reason(text, parse_xml(text), module) is None


# --------------------------------------------------------------------------- Xid


def test_xid_events_judged_by_the_catalog() -> None:
    log = xid.parse_kernel_log(
        "#gpuhost-kernel-log source=journal rc=0\n"
        "Nov 22 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
        "Nov 22 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
        "Nov 22 kernel: NVRM: Xid (0000:01:00): 13, Graphics SM Warp Exception\n"
        "Nov 22 kernel: NVRM: GPU at PCI:0000:3b:00: GPU-abc\n"
    )
    assert log.error is None and log.source == "journal"
    events = xid.xid_events(log.nvrm_lines)
    assert [e.code for e in events] == [79, 79, 13]
    judged = {f.rule: f for f in xid_findings(events)}
    assert judged["gpu.xid.13"].severity == "info"  # an application fault fails nothing
    lost = judged["gpu.xid.79"]
    assert (lost.severity, lost.action) == ("error", "reboot")
    assert finding_line(lost).startswith(
        "[gpu.xid.79, action: reboot] Xid 79 (GPU has fallen off the bus) on 0000:3b:00 x2"
    )


def test_real_syslog_without_xid_and_unreadable_log() -> None:
    lines = capture("nvidia-smi-errors/no-devices-were-found__rtx5090__syslog-NVRM.txt")
    nvrm = "\n".join(line for line in lines.splitlines() if "NVRM:" in line)
    assert all(e.code >= 0 for e in xid.xid_events(nvrm))
    broken = xid.parse_kernel_log(
        "#gpuhost-kernel-log source=dmesg rc=1\ndmesg: read kernel buffer failed: "
        "Operation not permitted\n"
    )
    assert broken.error == (
        "dmesg failed: dmesg: read kernel buffer failed: Operation not permitted"
    )
    assert xid.parse_kernel_log("junk").error is not None


# --------------------------------------------------------------------------- expected state


MARKER = json.dumps({"schema": 1, "profile": "debian12-nonfree-535-security"})
DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'


def test_profile_from_inventory_resolves_like_the_deploys() -> None:
    got = expected.resolve(
        "h1",
        {"gpuhost_profile": "debian12-nonfree-535-security"},
        expected.Marker(False),
        parse_os_release(DEBIAN).key,
    )
    assert got.problem is None and got.spec is not None and got.plan is not None
    assert got.os_key == "debian-12" and got.spec.driver_version == "535.309.01"
    assert "nvidia-driver" in got.plan.coupled and "nvidia-persistenced" in got.plan.companions
    assert got.origin == "inventory data gpuhost_profile"


def test_profile_from_marker_and_problems() -> None:
    marker = expected.parse_marker(MARKER)
    got = expected.resolve("h1", {}, marker, "debian-12")
    assert got.profile == "debian12-nonfree-535-security"
    assert got.origin.startswith("the provision marker")
    none = expected.resolve("h2", {}, expected.parse_marker(""), "debian-12")
    assert none.spec is None and "gpuhost_profile is not set" in (none.problem or "")
    unknown = expected.resolve("h3", {"gpuhost_profile": "nope"}, marker, "debian-12")
    assert unknown.spec is None and "'nope' is not a known profile" in (unknown.problem or "")
    other_os = expected.resolve(
        "h4", {"gpuhost_profile": "debian12-nonfree-535-security"}, marker, "ubuntu-22.04"
    )
    assert other_os.plan is None and "no package names" in (other_os.problem or "")
    assert expected.parse_marker("{not json").problem is not None


def test_marker_read_like_the_audit_reads_it() -> None:
    legacy = expected.parse_marker("debian12-nonfree-535-security\n")
    assert legacy.present and legacy.problem is None
    assert legacy.profile == "debian12-nonfree-535-security"
    assert expected.resolve("h1", {}, legacy, "debian-12").spec is not None
    full = expected.parse_marker(
        json.dumps({"schema": 1, "profile": "p", "driver": {"version": "535.261.03"}})
    )
    assert full.recorded is not None and full.recorded.driver_version == "535.261.03"
    wrong = expected.parse_marker('{"schema": 1, "profile": "p", "cuda": {"versions": 11}}')
    assert wrong.profile is None and "cuda.versions: found 11" in (wrong.problem or "")


# --------------------------------------------------------------------------- packages


def test_package_judges() -> None:
    found = [
        Package("nvidia-driver", "535.261.03-1", "hi"),
        Package("nvidia-smi", "535.309.01-0+deb12u1", "ii"),
        Package("libcuda1", None, "un"),
    ]
    names = ["nvidia-driver", "nvidia-smi", "libcuda1"]
    assert packages.missing(found, names) == ["libcuda1"]
    assert packages.off_version(found, names, "535.261.03") == ["nvidia-smi 535.309.01-0+deb12u1"]
    assert packages.not_held(found, {"nvidia-driver"}, names) == ["nvidia-smi"]
    assert "'nvidia-smi'" not in packages.dpkg_command(["nvidia-smi"])


def test_nvswitch_detection() -> None:
    listing = (
        "0000:3b:00.0 0x10de 0x030200\n0000:05:00.0 0x10de 0x068000\n0000:00:1f.0 0x8086 0x060100\n"
    )
    assert pci.nvswitches(listing) == ["0000:05:00.0"]
    assert pci.nvswitches("") == []


# --------------------------------------------------------------------------- smoke policy


def _cpu_torch_document() -> dict:
    doc = gpu_document(count=0)
    doc["nvidia_smi"] = {
        "available": False,
        "reason": "nvidia-smi is not installed",
        "driver_version": None,
        "cuda_version": None,
    }
    doc["gpus"] = []
    torch = doc["frameworks"]["torch"]
    torch["checks"] = [
        make_check("import", "PASS", "torch 2.13.0+cpu imported", value="2.13.0+cpu"),
        make_check("cuda_available", COULD_NOT_RUN, "torch.cuda.is_available() is False"),
    ]
    torch["cuda"], torch["devices"] = None, []
    return doc


def test_smoke_policy_gpu_host_without_usable_gpu_fails() -> None:
    verdicts = judge(_cpu_torch_document(), Expectations())
    out = smoke.judge_run("python3", verdicts, set(), explicit=False)
    assert out.outcome == smoke.FAILED
    assert "torch.cuda_available (could not run on a GPU host)" in out.message


def test_smoke_policy_missing_frameworks() -> None:
    doc = _cpu_torch_document()
    for name in ("torch", "tensorflow"):
        doc["frameworks"][name] = {
            "installed": False,
            "reason": f"{name} is not installed",
            "version": None,
            "cuda": None,
            "cudnn": None,
            "arch_list": [],
            "devices": [],
            "checks": [make_check("import", COULD_NOT_RUN, f"{name} is not installed")],
        }
    verdicts = judge(doc, Expectations())
    assert smoke.judge_run("python3", verdicts, set(), explicit=False).outcome == smoke.SKIPPED
    named = smoke.judge_run("/opt/venv/bin/python", verdicts, set(), explicit=True)
    assert named.outcome == smoke.FAILED and "named in gpuhost_pythons" in named.message
    pinned = smoke.judge_run("python3", verdicts, {"torch"}, explicit=False)
    assert pinned.outcome == smoke.FAILED and "torch is expected" in pinned.message


def test_smoke_policy_healthy_and_wrong_result() -> None:
    doc = gpu_document()
    ok = smoke.judge_run("python3", judge(doc, Expectations(gpu_count=2)), {"torch"}, True)
    assert ok.outcome == smoke.PASSED
    find_check(doc, "matmul_correct", 1)["numbers"]["max_rel_error"] = 0.5
    bad = smoke.judge_run("python3", judge(doc, Expectations(gpu_count=2)), {"torch"}, True)
    assert bad.outcome == smoke.FAILED and "matmul_correct[gpu1]" in bad.message


def test_expected_frameworks_from_pins() -> None:
    assert smoke.expected_frameworks(["torch==2.5.1+cu124"], ["tensorflow"]) == {
        "torch",
        "tensorflow",
    }
    assert smoke.expected_frameworks([], []) == set()


def test_remote_command_cleans_up_and_checks_interpreter() -> None:
    command = smoke.remote_command("/opt/venv/bin/python", quick=True, timeout=60)
    assert command.startswith("command -v /opt/venv/bin/python")
    assert '"$gh_smoke" --framework all --timeout 60 --quick' in command
    assert command.endswith('rm -f "$gh_smoke"; exit $gh_rc')


# --------------------------------------------------------------------------- stress readers


def test_dcgm_outcomes_and_failures() -> None:
    doc = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "GPU Memory",
                            "results": [
                                {"gpu_id": "0", "status": "Pass"},
                                {
                                    "gpu_id": "1",
                                    "status": "Fail",
                                    "warnings": [{"warning": "DBE detected", "error_id": 12}],
                                },
                            ],
                        },
                        {"name": "Diagnostic", "results": [{"gpu_id": "0", "status": "Skip"}]},
                    ],
                }
            ]
        }
    }
    outcomes = stress.dcgm_outcomes("Running...\n" + json.dumps(doc))
    assert len(outcomes) == 3
    failed = stress.dcgm_failures(outcomes)
    assert [f.line() for f in failed] == ["GPU Memory on GPU 1: Fail (DBE detected)"]
    with pytest.raises(ParseError):
        stress.dcgm_outcomes("Error: unable to connect to host engine")


def test_nvbandwidth_outcomes() -> None:
    doc = {
        "nvbandwidth": {
            "testcases": [
                {"name": "host_to_device_memcpy_ce", "status": "Passed", "sum": 52.1},
                {"name": "device_to_device_memcpy_read_ce", "status": "Waived"},
                {"name": "all_to_host_memcpy_ce", "status": "Error", "error": "CUDA error"},
            ]
        }
    }
    failed = stress.nvbandwidth_failures(stress.nvbandwidth_outcomes(json.dumps(doc)))
    assert [f.line() for f in failed] == ["all_to_host_memcpy_ce: Error (CUDA error)"]


# --------------------------------------------------------------------------- inventory


def test_inventory_hosts_and_ssh_config(tmp_path: Path) -> None:
    inv = tmp_path / "inv.py"
    inv.write_text(
        "gpu = [('n1', {'ssh_hostname': '10.123.9.9', 'ssh_user': 'root', 'ssh_port': 2222,\n"
        "               'ssh_key': '/k', 'gpuhost_profile': 'debian12-nonfree-535-security'}),\n"
        "       ('n2', {})]\n"
    )
    hosts = load_hosts(str(inv))
    assert [h.spec for h in hosts] == ["ssh://n1", "ssh://n2"]
    assert hosts[0].data["gpuhost_profile"] == "debian12-nonfree-535-security"
    text = ssh_config(hosts, "/tmp/ctl")
    assert "Host n1\n    HostName 10.123.9.9\n    Port 2222\n    User root\n" in text
    assert "IdentityFile /k" in text and "ControlPath /tmp/ctl/%C" in text
    assert [h.name for h in load_hosts(str(inv), limit="n2")] == ["n2"]
    assert load_hosts(None) == [CheckHost("@local")]
    with pytest.raises(ConfigError, match="--limit nope: matches no host"):
        load_hosts(str(inv), limit="nope")
    bad = tmp_path / "pw.py"
    bad.write_text("hosts = [('n1', {'ssh_password': 'x'})]\n")
    with pytest.raises(ConfigError, match="ssh_password is not supported"):
        load_hosts(str(bad))


def test_hardening_checks_skip_only_where_the_host_opts_out() -> None:
    from gpuhost.checks_support.harden import firewall_skip_reason, ssh_skip_reason

    assert ssh_skip_reason({}) is None
    assert firewall_skip_reason({"gpuhost_firewall_roles": ["slurm-compute"]}) is None
    assert firewall_skip_reason({"gpuhost_firewall_enabled": True}) is None
    unasked = firewall_skip_reason({})  # a bare host gets no default-deny firewall
    assert unasked is not None and "no gpuhost firewall asked for" in unasked
    assert ssh_skip_reason({"gpuhost_harden": True}) is None
    reason = ssh_skip_reason({"gpuhost_harden": False})
    assert reason is not None and "gpuhost_harden is false" in reason
    fw = firewall_skip_reason({"gpuhost_harden": False})
    assert fw is not None and "firewall" in fw
    fw_only = firewall_skip_reason({"gpuhost_firewall_enabled": False})
    assert fw_only is not None and "gpuhost_firewall_enabled is false" in fw_only
    assert ssh_skip_reason({"gpuhost_firewall_enabled": False}) is None
