"""The one verdict: a host's (audit), a version set's (matrix check) and a security exposure's
come from the same function, the fleet's is the worst of its hosts'."""

from __future__ import annotations

import pytest

from gpuhost.findings import Finding, verdict, worst_verdict


def _of(*severities: str) -> list[Finding]:
    return [Finding(f"r{i}", severity, "said") for i, severity in enumerate(severities)]


@pytest.mark.parametrize(
    ("severities", "expected"),
    [
        ((), "ok"),
        (("info",), "ok"),
        (("info", "warning"), "warning"),
        (("warning", "error", "info"), "error"),
    ],
)
def test_the_verdict_is_the_worst_warning_or_error(severities: tuple[str, ...], expected: str):
    assert verdict(_of(*severities)) == expected


def test_an_unreachable_host_is_unreachable_whatever_its_findings_say() -> None:
    assert verdict(_of("info"), reachable=False) == "unreachable"


def test_the_matrix_and_the_audit_use_the_one_verdict() -> None:
    import gpuhost.audit.host as audit_host
    import gpuhost.matrix as matrix
    from gpuhost.matrix.advisories import Exposure

    assert matrix.verdict is verdict
    assert audit_host.verdict_of is verdict
    assert Exposure(checked=("driver 1",), findings=tuple(_of("warning"))).verdict == "warning"


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ([], "ok"),
        (["ok", "warning"], "warning"),
        (["warning", "error", "ok"], "error"),
        (["error", "unreachable"], "unreachable"),
    ],
)
def test_the_fleet_verdict_is_the_worst_host_verdict(verdicts: list[str], expected: str) -> None:
    assert worst_verdict(verdicts) == expected


def test_a_finding_carries_one_of_the_actions() -> None:
    from gpuhost.findings import ACTIONS, Finding

    finding = Finding("gpu.xid.79", "error", "Xid 79", action="reboot")
    assert finding.to_dict()["action"] == "reboot"
    assert Finding("ssh.root-login", "warning", "x").to_dict()["action"] is None
    assert ACTIONS == ("none", "watch", "reset-gpu", "reboot", "drain", "inspect-hardware")
    with pytest.raises(ValueError, match="action 'panic', expected one of none, watch"):
        Finding("gpu.x", "error", "x", action="panic")
