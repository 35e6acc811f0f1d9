"""The audit's fabric.* rules on probe outputs carrying the fabric sections, the counters kept
between runs in the state folder, and the gpuhost_fabric inventory key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.audit.host import AuditSettings, audit_host
from gpuhost.audit_run import judge_host
from gpuhost.fabric.counters import CounterStore
from gpuhost.facts.build import host_facts_from_text
from gpuhost.inventory.contract import host_problems
from tests.audit.probe_text import CLEAN_DEBIAN, probe_output

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fabric"
SYSFS = (FIXTURES / "sysfs-h100-8x-cx7.txt").read_text()
LSPCI_ON = (FIXTURES / "lspci-gpu-nic-switch-acs-on.txt").read_text()
FABRIC = {
    "gpuhost_fabric": {"ports": 8, "rate_gbps": 400, "link_layer": "InfiniBand", "peermem": True}
}
PEERMEM = "nvidia_peermem 16384 0 - Live 0x0000000000000000 (OE)\n"


def facts(**sections: object):  # type: ignore[no-untyped-def]
    return host_facts_from_text(probe_output({**CLEAN_DEBIAN, **sections}))


def fabric_ids(report) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(f.rule for f in report.findings if f.rule.startswith("fabric."))


def skipped(report) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {r.rule: r.skipped for r in report.results if r.rule.startswith("fabric.")}


def test_a_host_without_rdma_and_without_expectation_is_skipped_with_the_reason() -> None:
    report = audit_host("h1", facts(), {}, AuditSettings())
    reasons = skipped(report)
    assert set(reasons) == {
        "fabric.ports",
        "fabric.counters",
        "fabric.gpudirect",
        "fabric.pcie",
        "fabric.affinity",
    }
    assert all("no RDMA port" in (why or "") for why in reasons.values())


def test_the_captured_fabric_is_clean_and_each_fault_gives_its_finding() -> None:
    clean = facts(**{"rdma-ports": SYSFS, "peermem": PEERMEM})
    assert fabric_ids(audit_host("h1", clean, FABRIC, AuditSettings())) == []
    down = SYSFS.replace("mlx5_3/ports/1/state:4: ACTIVE", "mlx5_3/ports/1/state:1: DOWN")
    slow = SYSFS.replace(
        "mlx5_4/ports/1/rate:400 Gb/sec (4X NDR)", "mlx5_4/ports/1/rate:200 Gb/sec (4X HDR)"
    )
    faults = facts(**{"rdma-ports": down, "peermem": ""})
    report = audit_host("h1", faults, FABRIC, AuditSettings())
    assert fabric_ids(report) == ["fabric.peermem", "fabric.port-down"]
    slow_report = audit_host(
        "h1", facts(**{"rdma-ports": slow, "peermem": PEERMEM}), FABRIC, AuditSettings()
    )
    assert fabric_ids(slow_report) == ["fabric.port-rate"]
    acs = facts(
        **{
            "rdma-ports": SYSFS,
            "peermem": PEERMEM,
            "lspci": LSPCI_ON,
            "iommu": "cmdline=BOOT_IMAGE=/vmlinuz ro intel_iommu=on\nunit=dmar0\n",
        }
    )
    assert fabric_ids(audit_host("h1", acs, FABRIC, AuditSettings())) == [
        "fabric.acs",
        "fabric.iommu",
    ]
    assert report.to_dict()["facts"]["fabric"]["ports"][0]["rate_gbps"] == 400.0


def test_counters_growing_between_two_audits(tmp_path: Path) -> None:
    store = CounterStore(tmp_path / "state")
    first = judge_host(
        "h1",
        facts(**{"rdma-ports": SYSFS, "peermem": PEERMEM}),
        FABRIC,
        AuditSettings(),
        lambda: store,
    )
    assert "first run" in (skipped(first)["fabric.counters"] or "")
    same = judge_host(
        "h1",
        facts(**{"rdma-ports": SYSFS, "peermem": PEERMEM}),
        FABRIC,
        AuditSettings(),
        lambda: store,
    )
    assert fabric_ids(same) == [] and skipped(same)["fabric.counters"] is None
    grown = SYSFS.replace("counters/link_downed:255", "counters/link_downed:260")
    report = judge_host(
        "h1",
        facts(**{"rdma-ports": grown, "peermem": PEERMEM}),
        FABRIC,
        AuditSettings(),
        lambda: store,
    )
    assert fabric_ids(report) == ["fabric.counters-growing"]
    assert "link_downed 255 -> 260 (+5)" in report.findings[0].message
    assert (store.path("h1").stat().st_mode & 0o777) == 0o600


def test_a_host_without_counters_never_opens_the_state_folder() -> None:
    def refuse() -> CounterStore:
        raise AssertionError("the state folder was opened")

    report = judge_host("h1", facts(), {}, AuditSettings(), refuse)
    assert report.verdict in ("ok", "warning")


def test_a_damaged_counters_file_is_no_baseline(tmp_path: Path) -> None:
    store = CounterStore(tmp_path)
    store.folder.mkdir(mode=0o700)
    store.path("h1").write_text("{not json")
    assert store.load("h1") is None
    store.path("h1").write_text('{"counters": {"mlx5_0/1": {"link_downed": "x"}}}')
    assert store.load("h1") is None
    store.path("h1").unlink()
    store.path("h1").symlink_to(tmp_path / "elsewhere.json")
    assert store.load("h1") is None


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"ports": "8"}, "gpuhost_fabric['ports']: found '8' (str)"),
        ({"link_layer": "IB"}, "gpuhost_fabric['link_layer']: found 'IB' (str)"),
        ([8], "gpuhost_fabric: found [8]"),
        ({"speed": 400}, "gpuhost_fabric['speed']"),
    ],
)
def test_a_bad_gpuhost_fabric_is_one_line(value: object, words: str) -> None:
    (problem,) = host_problems({"gpuhost_fabric": value})
    assert problem.startswith(words) and "\n" not in problem


def test_the_json_report_and_the_textfile_carry_the_ports() -> None:
    from gpuhost.audit.report import json_report, prom
    from tests.schema_check import validator

    down = SYSFS.replace("mlx5_3/ports/1/state:4: ACTIVE", "mlx5_3/ports/1/state:1: DOWN")
    report = audit_host(
        "h1",
        facts(**{"rdma-ports": down, "peermem": PEERMEM, "lspci": LSPCI_ON}),
        FABRIC,
        AuditSettings(),
    )
    document = json_report.build_report([report], {"inventory": None})
    validator("audit-report").validate(document)
    text = prom.render([report], document["summary"])
    assert 'gpuhost_fabric_port_up{host="h1",link_layer="InfiniBand",port="mlx5_3/1"} 0.0' in text
    assert (
        'gpuhost_fabric_port_rate_gbps{host="h1",link_layer="Ethernet",port="mlx5_bond_0/1"} 400.0'
        in text
    )


def test_lspci_without_root_and_unreadable_sections_say_so() -> None:
    denied = "0000:02:08.0 PCI bridge: PLX\n\tCapabilities: <access denied>\n"
    report = audit_host(
        "h1",
        facts(**{"rdma-ports": SYSFS, "peermem": PEERMEM, "lspci": denied}),
        FABRIC,
        AuditSettings(),
    )
    assert "not run as root" in (skipped(report)["fabric.pcie"] or "")
    broken = facts(**{"rdma-ports": "/sys/class/infiniband/x\n", "peermem": PEERMEM})
    assert any(p.startswith("rdma-ports: ") for p in broken.problems)
    assert fabric_ids(audit_host("h1", broken, FABRIC, AuditSettings())) == ["fabric.ports-missing"]


def test_a_planted_oversized_counters_file_is_not_read(tmp_path: Path) -> None:
    """The counters file is bounded like every state file (safeio.read_regular's limit): a
    planted file over the bound is no baseline, and is refused before it is read whole."""
    from gpuhost.errors import ConfigError
    from gpuhost.fabric.counters import MAX_BYTES
    from gpuhost.safeio import read_regular

    store = CounterStore(tmp_path / "state")
    store.save("h1", {"mlx5_0/1": {"link_downed": 1}})
    assert store.load("h1") == {"mlx5_0/1": {"link_downed": 1}}
    path = store.path("h1")
    path.write_bytes(b'{"counters": {}}' + b" " * MAX_BYTES)
    assert store.load("h1") is None
    with pytest.raises(ConfigError, match=f"more than {MAX_BYTES}"):
        read_regular(path, "fabric counters", follow=False, owned=True, limit=MAX_BYTES)
