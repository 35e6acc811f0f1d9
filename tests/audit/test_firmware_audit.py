"""Firmware in the audit: facts (BIOS, HCA, VBIOS, GSP), the rules firmware.vbios-mixed,
firmware.baseline and firmware.unread, the stack fields and the summary's firmware drift.

GPU data are real captures (tests/fixtures/captures, sources in INDEX.json): an A100 SXM4 (VBIOS
92.00.36.00.02, GSP 535.54.03), two RTX A5000 (94.02.6D.00.0D, GSP 590.44.01) and an 8x V100
SXM2 whose GPUs run two VBIOS versions (88.00.13.00.02 and 88.00.4F.00.09). The sysfs lines are
those of tests/parsers/test_firmware_sysfs.py (sources there).
"""

from __future__ import annotations

from typing import Any

import pytest
from probe_text import capture, host_with
from schema_check import assert_valid

from gpuhost.audit.host import AuditSettings, audit_host
from gpuhost.audit.report.table import fleet_text
from gpuhost.audit.summary import stack_of, summarize
from gpuhost.errors import ConfigError
from gpuhost.facts.build import host_facts_from_text
from gpuhost.gpus.node_classes import parse_classes

A100 = "nvidia-smi-xml/telegraf__a100-sxm4-v12.xml"
A5000 = "nvidia-smi-xml/telegraf-pr17482__dual_a5000-v13.xml"
V100_TEXT = "nvidia-smi-q-text/thamada-gls__V100_x8__550.127.05.txt"
FILES = (
    "/sys/class/dmi/id/bios_version:TP412UA.308\n"
    "/sys/class/dmi/id/bios_date:07/25/2019\n"
    "/sys/class/infiniband/mlx5_3/fw_ver:28.37.1700\n"
)
SETTINGS = AuditSettings(matrix=None, profiles={})


def _audit(name: str, smi: str, data: dict[str, Any] | None = None, **sections: Any) -> Any:
    text = host_with(nvidia_smi=capture(smi), **sections)
    return audit_host(name, host_facts_from_text(text), data or {}, SETTINGS)


def _ids(report: Any) -> list[str]:
    return [f.rule for f in report.findings if f.rule.startswith("firmware.")]


def test_facts_hold_bios_hca_vbios_and_gsp() -> None:
    facts = host_facts_from_text(host_with(nvidia_smi=capture(A5000), firmware=FILES)).firmware
    assert facts.read and facts.bios_version == "TP412UA.308" and facts.bios_date == "07/25/2019"
    assert facts.hca == {"mlx5_3": "28.37.1700"}
    assert [(g.bus_id, g.vbios, g.gsp) for g in facts.gpus] == [
        ("00000000:81:00.0", "94.02.6D.00.0D", "590.44.01"),
        ("00000000:C1:00.0", "94.02.6D.00.0D", "590.44.01"),
    ]
    stack = stack_of(host_facts_from_text(host_with(firmware=FILES)).to_dict())
    assert (stack["bios"], stack["hca_firmware"], stack["vbios"]) == (
        "TP412UA.308",
        "28.37.1700",
        "-",
    )


def test_firmware_not_read_says_so() -> None:
    facts = host_facts_from_text(host_with(nvidia_smi=capture(A100), firmware=("", "", 143)))
    assert not facts.firmware.read
    stack = stack_of(facts.to_dict())
    assert (stack["bios"], stack["hca_firmware"]) == ("not read", "not read")
    assert stack["vbios"] == "92.00.36.00.02" and stack["gsp_firmware"] == "535.54.03"


def test_mixed_vbios_on_one_host_is_a_warning_naming_the_gpus() -> None:
    report = _audit("v100", V100_TEXT)
    [finding] = [f for f in report.findings if f.rule == "firmware.vbios-mixed"]
    assert finding.severity == "warning"
    assert "88.00.13.00.02 on 00000000:00:05.0" in str(finding.found)
    assert "88.00.4F.00.09 on 00000000:00:04.0" in str(finding.found)
    assert _ids(_audit("a5000", A5000)) == []


def test_no_baseline_no_verdict() -> None:
    report = _audit("a100", A100, firmware=FILES)
    skipped = {r.rule: r.skipped for r in report.results}
    assert "no firmware baseline pinned" in str(skipped["firmware.baseline"])


def test_a_baseline_that_differs_names_found_and_expected() -> None:
    data = {"gpuhost_node": {"firmware": {"vbios": "92.00.45.00.01", "bios": ["TP412UA.308"]}}}
    report = _audit("a100", A100, data, firmware=FILES)
    [finding] = [f for f in report.findings if f.rule.startswith("firmware.")]
    assert finding.rule == "firmware.baseline" and finding.severity == "warning"
    assert finding.found == "92.00.36.00.02 on 00000000:01:00.0"
    assert finding.expected == "92.00.45.00.01 (inventory)"
    matching = {"gpuhost_node": {"firmware": {"vbios": "92.00.36.00.02", "hca": "28.37.1700"}}}
    assert _ids(_audit("a100", A100, matching, firmware=FILES)) == []


def test_a_pinned_field_that_cannot_be_read_is_unread_never_ok() -> None:
    data = {"gpuhost_node": {"firmware": {"bios": "1.0", "hca": "28.39.2048"}}}
    not_read = _audit("a100", A100, data, firmware=("", "", 143))
    assert _ids(not_read) == ["firmware.unread", "firmware.unread"]
    assert "the probe did not read the firmware files" in str(not_read.findings[0].found)
    no_hca = _audit("a100", A100, {"gpuhost_node": {"firmware": {"hca": "1"}}}, firmware="")
    assert _ids(no_hca) == ["firmware.unread"]


def _class_data(firmware: Any) -> dict[str, Any]:
    return {
        "schema": 2,
        "sources": {"s": {"url": "https://example.org/x", "title": "t"}},
        "classes": [
            {"name": "a100-box", "pci_ids": ["10de:20b2"], "sources": ["s"], "firmware": firmware}
        ],
    }


def test_a_node_class_baseline_is_read_and_checked() -> None:
    [cls] = parse_classes(_class_data({"vbios": ["92.00.36.00.02", "92.00.45.00.01"]}))
    assert cls.firmware == {"vbios": ("92.00.36.00.02", "92.00.45.00.01")}
    with pytest.raises(ConfigError, match=r"classes\[0\]\.firmware: unknown key 'ucode'"):
        parse_classes(_class_data({"ucode": "1"}))
    with pytest.raises(ConfigError, match="vbios: expected a version or a list"):
        parse_classes(_class_data({"vbios": [1]}))


def test_the_inventory_contract_checks_the_firmware_key() -> None:
    from gpuhost.gpus.node_classes import override_problem

    assert override_problem({"gpus": 8, "firmware": {"gsp": "535.54.03"}}) is None
    assert "firmware: unknown key 'vbois'" in str(override_problem({"firmware": {"vbois": "1"}}))


def test_drift_between_hosts_of_one_class_is_in_the_summary() -> None:
    other = FILES.replace("TP412UA.308", "TP412UA.309")
    reports = [
        _audit("h1", A100, firmware=FILES),
        _audit("h2", A100, firmware=FILES),
        _audit("h3", A100, firmware=other),
        _audit("h4", A100, firmware=("", "", 143)),  # not read: left out, not a version
    ]
    hosts = [r.to_dict() for r in reports]
    summary = summarize(hosts)
    assert summary["firmware_drift"] == [
        {
            "rule": "firmware.drift",
            "severity": "warning",
            "node_class": "hgx-a100-8gpu",
            "field": "bios",
            "versions": {"TP412UA.308": ["h1", "h2"], "TP412UA.309": ["h3"]},
        }
    ]
    assert summary["verdict"] in ("warning", "error")
    groups = {tuple(g["hosts"]) for g in summary["stacks"]}
    assert ("h1", "h2") in groups and ("h3",) in groups
    assert "firmware.drift in hgx-a100-8gpu: BIOS TP412UA.308 on h1, h2" in fleet_text(summary)
    report = {
        "schema": 1,
        "generated_at": "2026-11-28T21:00:00Z",
        "gpuhost_version": "0",
        "matrix_date": None,
        "hosts": hosts,
        "summary": summary,
    }
    assert_valid(report, "audit-report")


def test_one_firmware_everywhere_is_no_drift() -> None:
    hosts = [_audit(n, A100, firmware=FILES).to_dict() for n in ("h1", "h2")]
    assert summarize(hosts)["firmware_drift"] == []


def test_a_host_without_dmi_tables_shows_its_bios_as_not_read() -> None:
    # this is what a container shows: the probe ran, /sys/class/dmi/id does not exist
    stack = stack_of(host_facts_from_text(host_with(firmware="")).to_dict())
    assert (stack["bios"], stack["hca_firmware"]) == ("not read", "-")


def test_a_bad_firmware_pin_in_the_inventory_is_one_line_exit_2(tmp_path: Any) -> None:
    import subprocess
    import sys

    inventory = tmp_path / "inventory.py"
    inventory.write_text('gpu = [("h1", {"gpuhost_node": {"firmware": {"vbios": 96}}})]\n')
    run = subprocess.run(
        [sys.executable, "-m", "gpuhost", "inventory", "check", str(inventory)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1
    assert "host h1: gpuhost_node" in run.stderr
    assert "firmware: vbios: expected a version or a list of versions, found 96" in run.stderr
