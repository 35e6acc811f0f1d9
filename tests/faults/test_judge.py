"""The one fault judgement on real captures: each fault class gives its finding id and action.
Faulty variants are made from real captures by the tests (named where they are)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpuhost.faults.catalog import drain_policy
from gpuhost.faults.judge import (
    FaultInputs,
    aer_findings,
    fabric_manager_findings,
    finding_line,
    gpu_findings,
    judge,
    nvlink_error_findings,
    nvlink_findings,
    xid_findings,
)
from gpuhost.faults.node_class import NodeExpectation, expectation_for
from gpuhost.parsers.aer import parse_aer_counters
from gpuhost.parsers.nvidia_smi import parse_output
from gpuhost.parsers.smi_misc import parse_nvlink_errors, parse_nvlink_status
from gpuhost.parsers.xid import xid_events

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CAPTURES = FIXTURES / "captures"
FAULTS = FIXTURES / "faults"
H100X8 = CAPTURES / "nvidia-smi-q-text" / "thamada-gls__H100SXMx8__565.57.01.txt"
MISC = CAPTURES / "nvidia-smi-misc"
H100_NVLINK = MISC / "utku__linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__nvlink-s.txt"
BLACKWELL_XML = CAPTURES / "nvidia-smi-xml" / "telegraf-pr17482__pro-6000-maxq-blackwell-v13.xml"
OLD_XML = CAPTURES / "nvidia-smi-xml" / "openpai__nvidia_smi_out_of_order.xml"
V100_SICK = CAPTURES / "nvidia-smi-xml" / "openpai__nvidia_smi_retired_pages.xml"


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _ids_actions(findings):
    """(id, action) of the findings that warn or fail (an idle GPU's PCIe generation is info)."""
    return [(f.rule, f.action) for f in findings if f.severity != "info"]


def test_a_healthy_hgx_h100_node_has_no_finding():
    report = parse_output(_text(H100X8))
    assert len(report.gpus) == 8
    expect = expectation_for(report.gpus[0].name)
    assert expect is not None and expect.name == "hgx-h100-8gpu"
    links = parse_nvlink_status(_text(H100_NVLINK))
    assert judge(FaultInputs(report, xid=[], nvlink=links, expect=expect)) == []


def test_first_gpu_variant(text: str, old: str, new: str) -> str:
    """``text`` with ``old`` replaced by ``new`` in the first GPU only (a hand-made variant)."""
    assert old in text
    return text.replace(old, new, 1)


test_first_gpu_variant.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        # nvidia-smi -q text (H100 SXM, 565.57.01): the hardware slows the clocks down
        (
            "        HW Slowdown                       : Not Active",
            "        HW Slowdown                       : Active",
            [("gpu.clocks.hw-slowdown", "inspect-hardware")],
        ),
        (
            "            HW Thermal Slowdown           : Not Active",
            "            HW Thermal Slowdown           : Active",
            [("gpu.clocks.hw-thermal", "inspect-hardware")],
        ),
        (
            "        SW Thermal Slowdown               : Not Active",
            "        SW Thermal Slowdown               : Active",
            [("gpu.clocks.sw-thermal", "watch")],
        ),
        # the NVSwitch fabric has not registered the GPU yet / failed to
        (
            "        State                             : Completed",
            "        State                             : In Progress",
            [("gpu.fabric.state", "drain")],
        ),
        (
            "        Status                            : Success",
            "        Status                            : Failure",
            [("gpu.fabric.status", "drain")],
        ),
    ],
)
def test_each_fault_of_the_smi_report_has_its_action(old, new, expected):
    report = parse_output(test_first_gpu_variant(_text(H100X8), old, new))
    found = [f for gpu in report.gpus for f in gpu_findings(gpu)]
    assert _ids_actions(found) == expected
    assert found[0].message.startswith("GPU 0 (NVIDIA H100 80GB HBM3")


def test_hw_thermal_with_hw_slowdown_reports_the_specific_reason():
    text = _text(H100X8)
    text = test_first_gpu_variant(
        text,
        "        HW Slowdown                       : Not Active",
        "        HW Slowdown                       : Active",
    )
    text = test_first_gpu_variant(
        text,
        "            HW Thermal Slowdown           : Not Active",
        "            HW Thermal Slowdown           : Active",
    )
    found = gpu_findings(parse_output(text).gpus[0])
    assert _ids_actions(found) == [("gpu.clocks.hw-thermal", "inspect-hardware")]
    assert drain_policy(found[0]) == "persistent"


def test_xml_clock_events_new_and_old_schemas():
    blackwell = test_first_gpu_variant(
        _text(BLACKWELL_XML),
        "<clocks_event_reason_hw_power_brake_slowdown>Not Active<",
        "<clocks_event_reason_hw_power_brake_slowdown>Active<",
    )
    gpu = parse_output(blackwell).gpus[0]
    assert _ids_actions(gpu_findings(gpu)) == [("gpu.clocks.power-brake", "inspect-hardware")]
    old = test_first_gpu_variant(
        _text(OLD_XML),
        "<clocks_throttle_reason_sw_thermal_slowdown>Not Active<",
        "<clocks_throttle_reason_sw_thermal_slowdown>Active<",
    )
    clocks = [f for f in gpu_findings(parse_output(old).gpus[0]) if f.rule.startswith("gpu.clocks")]
    assert _ids_actions(clocks) == [("gpu.clocks.sw-thermal", "watch")]


def test_the_drivers_recovery_action_in_nvidia_smi():
    xml = _text(CAPTURES / "nvidia-smi-xml" / "llamaland__rtx-a5000-laptop__575.57.08.xml")
    assert parse_output(xml).gpus[0].recovery_action is None  # "None": nothing asked
    asked = xml.replace("<gpu_recovery_action>None<", "<gpu_recovery_action>Reset<", 1)
    judged = gpu_findings(parse_output(asked).gpus[0])
    (finding,) = [f for f in judged if f.rule == "gpu.recovery-action"]
    assert (finding.rule, finding.action, drain_policy(finding)) == (
        "gpu.recovery-action",
        "reset-gpu",
        "persistent",
    )


def test_memory_faults_on_a_real_sick_v100():
    found = gpu_findings(parse_output(_text(V100_SICK)).gpus[0])
    assert _ids_actions(found) == [
        ("gpu.ecc-uncorrectable", "reset-gpu"),
        ("gpu.retired-pages-pending", "reboot"),
    ]
    assert all(f.fix for f in found)


def test_a_node_that_lost_a_gpu_or_memory_is_caught():
    report = parse_output(_text(H100X8))
    seven = dataclasses.replace(report, gpus=report.gpus[:7])
    expect = expectation_for("NVIDIA H100 80GB HBM3")
    (missing,) = judge(FaultInputs(seven, expect=expect))
    assert (missing.rule, missing.action) == ("gpu.missing", "reboot")
    assert drain_policy(missing) == "immediate"
    assert "expected 8 (node class hgx-h100-8gpu)" in missing.message
    bigger = NodeExpectation(memory_mib=90000)
    memory = judge(FaultInputs(report, expect=bigger))
    assert {(f.rule, f.action) for f in memory} == {("gpu.memory", "inspect-hardware")}
    assert len(memory) == 8
    # the inventory's override: a 4-GPU board of the same GPU model
    four = expectation_for("NVIDIA H100 80GB HBM3", {"gpus": 4})
    assert four is not None and four.gpus == 4 and four.nvlinks_per_gpu == 18
    assert judge(FaultInputs(dataclasses.replace(report, gpus=report.gpus[:4]), expect=four)) == []
    assert expectation_for("NVIDIA GeForce RTX 3090") is None


def test_nvlink_down_and_missing_links():
    text = _text(H100_NVLINK)
    down = parse_nvlink_status(text.replace("Link 5: 26.562 GB/s", "Link 5: <inactive>"))
    (finding,) = nvlink_findings(down)
    assert (finding.rule, finding.action) == ("gpu.nvlink.down", "reset-gpu")
    assert "links 5 inactive" in finding.message
    short = parse_nvlink_status(text.replace("\t Link 17: 26.562 GB/s\n", ""))
    assert nvlink_findings(short) == []  # no expectation: nothing says 18
    (lost,) = nvlink_findings(short, expectation_for("NVIDIA H100 80GB HBM3"))
    assert "17 active NVLink link(s)" in lost.message and "expected 18 active links" in lost.message


def test_nvlink_error_counters_real_and_counted():
    published = _text(FAULTS / "nvlink-e__ml-engineering__h100.txt")
    real = parse_nvlink_errors(published.replace("         [...]\n", ""))  # upstream's elision
    assert sorted(real[0]["links"]) == [0, 1, 17] and nvlink_error_findings(real) == []
    counted = parse_nvlink_errors(
        published.replace("         [...]\n", "").replace(
            "Link 1: CRC Errors: 0", "Link 1: CRC Errors: 12"
        )
    )
    (finding,) = nvlink_error_findings(counted)
    assert (finding.rule, finding.action) == ("gpu.nvlink.errors", "watch")
    assert finding.severity == "warning"
    assert "link 1 CRC Errors 12" in finding.message


def test_aer_counters():
    corrected = parse_aer_counters(_text(FAULTS / "aer_dev_correctable__kernel-abi-sample.txt"))
    assert corrected.kind == "COR" and corrected.total == 2
    assert corrected.counts["Receiver Error"] == 2
    fatal = parse_aer_counters("Undefined 0\nSurprise Down Error 1\nTOTAL_ERR_FATAL 1\n")
    found = aer_findings({"0000:3b:00.0": {"correctable": corrected, "fatal": fatal}})
    assert [(f.rule, f.action) for f in found] == [
        ("gpu.pcie.aer-fatal", "inspect-hardware"),
        ("gpu.pcie.aer-correctable", "watch"),
    ]
    assert [f.severity for f in found] == ["error", "info"]


@pytest.mark.parametrize(
    "name",
    ["xid-79__pop-os-3363__syslog.txt", "xid-79__open-gpu-kernel-modules-1151__dmesg.txt"],
)
def test_real_xid_79_calls_for_a_reboot_at_once(name):
    events = xid_events(_text(FAULTS / name))
    (finding,) = xid_findings(events)
    assert (finding.rule, finding.severity, finding.action) == ("gpu.xid.79", "error", "reboot")
    assert drain_policy(finding) == "immediate"
    assert finding_line(finding).startswith(
        "[gpu.xid.79, action: reboot] Xid 79 (GPU has fallen off the bus) on 0000:0"
    )


def test_real_xid_63_is_informational():
    (finding,) = xid_findings(xid_events(_text(FAULTS / "xid-63__ml-engineering__debug-md.txt")))
    assert (finding.rule, finding.severity, finding.action) == ("gpu.xid.63", "info", "none")


def test_the_drivers_recovery_action_is_preferred():
    events = xid_events(_text(FAULTS / "xid-154__handmade-from-xid-catalog.txt"))
    codes = [(e.code, e.recovery_code) for e in events]
    assert codes == [(79, None), (154, 2), (74, None), (154, 1)]
    by_bus = {(f.rule, (f.found or "")[:10]): f.action for f in xid_findings(events)}
    assert by_bus == {
        ("gpu.xid.74", "0000:3b:00"): "reset-gpu",
        ("gpu.xid.79", "0000:06:00"): "reboot",
        ("gpu.xid.154", "0000:06:00"): "reboot",
        ("gpu.xid.154", "0000:3b:00"): "reset-gpu",
    }
    # a GSP timeout whose GPU the driver says needs a node reboot: the reboot wins
    lines = (
        "NVRM: Xid (PCI:0000:3b:00): 119, pid=1, Timeout after 6s of waiting for RPC response\n"
        "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to "
        "0x2 (Node Reboot Required)\n"
    )
    found = {f.rule: f for f in xid_findings(xid_events(lines))}
    assert found["gpu.xid.119"].action == "reboot"
    assert drain_policy(found["gpu.xid.119"]) == "immediate"


def test_an_unknown_xid_says_so():
    (finding,) = xid_findings(xid_events("NVRM: Xid (PCI:0000:3b:00): 999, something new\n"))
    assert (finding.rule, finding.severity, finding.action) == ("gpu.xid.999", "warning", "watch")
    assert "Xid not in gpuhost's catalog" in finding.message


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ({"gpus": "eight"}, "gpus: expected a whole number from 0 to 1,000,000,000, found 'eight'"),
        ({"gpus": 8, "nvlinks": 18}, "unknown key 'nvlinks', expected one of gpus, memory_mib"),
        ({"fabric_manager": "yes"}, "fabric_manager: expected true or false, found 'yes'"),
        ([8], "expected a mapping of gpus"),
    ],
)
def test_inventory_gpuhost_expect_is_checked_in_one_line(raw, said):
    from gpuhost.inventory import contract

    problem = contract.key_problem("gpuhost_expect", raw)
    assert problem is not None and said in problem and "\n" not in problem
    assert contract.key_problem("gpuhost_expect", {"gpus": 4, "nvlinks_per_gpu": 18}) is None


def test_the_audit_judges_the_node_class_with_the_inventory_override():
    from gpuhost.audit.host import AuditSettings, audit_host
    from gpuhost.facts.host_facts import DriverFacts, HostFacts

    report = parse_output(_text(H100X8))
    seven = dataclasses.replace(report, gpus=report.gpus[:7])
    facts = HostFacts(driver=DriverFacts(smi=seven, smi_installed=True))
    lost = audit_host("n1", facts, {}, AuditSettings(None, {}))
    assert ("gpu.missing", "reboot") in {(f.rule, f.action) for f in lost.findings}
    board = audit_host("n1", facts, {"gpuhost_expect": {"gpus": 7}}, AuditSettings(None, {}))
    assert "gpu.missing" not in {f.rule for f in board.findings}


def test_an_nvswitch_node_class_without_fabric_manager():
    from gpuhost.audit.host import AuditSettings, audit_host
    from gpuhost.facts.host_facts import DriverFacts, FabricManagerFacts, HostFacts

    up = HostFacts(driver=DriverFacts(smi=parse_output(_text(H100X8)), smi_installed=True))
    assert "gpu.fabric-manager" not in {  # every GPU's fabric registered: it runs elsewhere
        f.rule for f in audit_host("n1", up, {}, AuditSettings(None, {})).findings
    }
    report = parse_output(
        test_first_gpu_variant(
            _text(H100X8),
            "        State                             : Completed",
            "        State                             : In Progress",
        )
    )
    bare = HostFacts(driver=DriverFacts(smi=report, smi_installed=True))
    audited = audit_host("n1", bare, {}, AuditSettings(None, {}))
    found = {(f.rule, f.action) for f in audited.findings}
    assert ("gpu.fabric-manager", "drain") in found
    with_fm = dataclasses.replace(bare, fabric_manager=FabricManagerFacts(installed=True))
    assert "gpu.fabric-manager" not in {
        f.rule for f in audit_host("n1", with_fm, {}, AuditSettings(None, {})).findings
    }
    no_switch = {"gpuhost_expect": {"fabric_manager": False}}
    assert "gpu.fabric-manager" not in {
        f.rule for f in audit_host("n1", bare, no_switch, AuditSettings(None, {})).findings
    }


def test_a_smaller_board_or_vm_of_an_hgx_gpu_is_not_a_board_that_lost_gpus():
    """The GPU's name does not say the board: 1, 2 or 4 H100 SXM GPUs (a 4-GPU board or a cloud
    VM) get no GPU count, NVLink count or fabric manager from the 8-GPU class; 5 to 7 do."""
    report = parse_output(_text(H100X8))
    short = parse_nvlink_status(_text(H100_NVLINK).replace("\t Link 17: 26.562 GB/s\n", ""))
    for count in (1, 2, 4):
        expect = expectation_for(report.gpus[0].name, None, count)
        assert expect is not None and (expect.gpus, expect.nvlinks_per_gpu) == (None, None)
        assert expect.fabric_manager is None and expect.memory_mib == 81559
        assert f"{count} of its 8 GPUs seen" in expect.name
        few = dataclasses.replace(report, gpus=report.gpus[:count])
        assert judge(FaultInputs(few, nvlink=short, expect=expect)) == []
        assert fabric_manager_findings(False, expect, few) == []
    seven = dataclasses.replace(report, gpus=report.gpus[:7])
    (missing,) = judge(FaultInputs(seven, expect=expectation_for(report.gpus[0].name, None, 7)))
    assert missing.rule == "gpu.missing"
    # the inventory still says what a 4-GPU node must have
    four = expectation_for(report.gpus[0].name, {"gpus": 4, "nvlinks_per_gpu": 18}, 3)
    assert four is not None and (four.gpus, four.nvlinks_per_gpu) == (4, 18)


def test_fabric_manager_missing_counts_only_while_the_fabric_is_not_up():
    """An 8-GPU NVSwitch class without the fabric manager package: no finding while nvidia-smi
    shows every GPU's fabric registration Completed/Success (a fabric manager runs elsewhere, e.g.
    in a driver container); an error once a GPU's registration is not done."""
    text = _text(H100X8)
    expect = expectation_for("NVIDIA H100 80GB HBM3", None, 8)
    assert expect is not None and expect.fabric_manager
    assert fabric_manager_findings(False, expect, parse_output(text)) == []
    assert fabric_manager_findings(True, expect, parse_output(text)) == []
    pending = parse_output(
        test_first_gpu_variant(
            text,
            "        State                             : Completed",
            "        State                             : In Progress",
        )
    )
    (finding,) = fabric_manager_findings(False, expect, pending)
    assert finding.rule == "gpu.fabric-manager"
    assert [f.rule for f in fabric_manager_findings(False, expect)] == ["gpu.fabric-manager"]
