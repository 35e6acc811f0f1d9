"""The audit reads Xid lines, NVLink state/counters and GPU AER counters with its one probe and
judges them with the fault catalog (rules gpu.xid, gpu.nvlink, gpu.pcie-aer): real captures in
probe sections; the faulty NVLink status is a hand-made variant of a real one."""

from __future__ import annotations

from pathlib import Path

from gpuhost.audit.host import AuditSettings, audit_host
from gpuhost.facts.build import host_facts_from_text
from tests.audit.probe_text import capture, host_with

FAULTS = Path(__file__).resolve().parents[1] / "fixtures" / "faults"
H100_NVLINK = "nvidia-smi-misc/utku__linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__nvlink-s.txt"


def _audit(**sections: object):
    text = host_with(
        nvidia_smi=capture("nvidia-smi-xml/telegraf__a100-sxm4-v12.xml"), **sections
    )
    return audit_host("h", host_facts_from_text(text), {}, AuditSettings(None, {}))


def _by_rule(report) -> dict[str, tuple[str, str | None]]:
    return {f.rule: (f.severity, f.action) for f in report.findings}


def test_xid_nvlink_and_aer_in_the_audit_with_their_actions():
    aer = (
        "##GPUHOST aer 0000:01:00.0 correctable\n"
        + (FAULTS / "aer_dev_correctable__kernel-abi-sample.txt").read_text(encoding="utf-8")
        + "##GPUHOST aer 0000:01:00.0 fatal\nSurprise Down Error 1\nTOTAL_ERR_FATAL 1\n"
    )
    report = _audit(
        xid_log=(FAULTS / "xid-79__pop-os-3363__syslog.txt").read_text(encoding="utf-8"),
        nvlink_status=capture(H100_NVLINK).replace("Link 3: 26.562 GB/s", "Link 3: <inactive>"),
        gpu_aer=aer,
    )
    found = _by_rule(report)
    assert found["gpu.xid.79"] == ("error", "reboot")
    assert found["gpu.nvlink.down"] == ("error", "reset-gpu")
    assert found["gpu.pcie.aer-fatal"] == ("error", "inspect-hardware")
    assert found["gpu.pcie.aer-correctable"] == ("info", "watch")
    facts = host_facts_from_text(host_with(xid_log="", nvlink_status=capture(H100_NVLINK)))
    assert facts.gpu_faults.xid == [] and facts.gpu_faults.nvlink is not None
    assert facts.to_dict()["gpu_faults"]["nvlink"][0]["name"] == "NVIDIA H100 80GB HBM3"


def test_sections_not_read_judge_nothing():
    report = _audit()  # the clean host's probe has none of the sections
    skipped = {r.rule: r.skipped for r in report.results if r.skipped}
    assert "kernel log was not read" in skipped["gpu.xid"]
    assert "nvlink was not read" in skipped["gpu.nvlink"]
    assert "gpu.pcie-aer" in skipped
    mig = capture("nvidia-smi-misc/utku__linux-x86_64__nvidia-h100-mig__590.48.01__nvlink-s.txt")
    assert "gpu.nvlink.down" not in _by_rule(_audit(nvlink_status=mig))  # MIG: not queryable
