"""The preflight line names each audit error rule and why the upgrade goes on (HQA: '1 audit
error(s)' and then an upgrade read as an error ignored)."""

from __future__ import annotations

from gpuhost.upgrade.hoststeps import preflight_summary


def test_each_rule_says_why_the_run_goes_on() -> None:
    assert preflight_summary([], set(), forced=False) == "0 audit errors"
    assert preflight_summary(["security.driver"], set(), forced=False) == (
        "1 audit error rule(s), going on: security.driver (which the target fixes)"
    )
    line = preflight_summary(
        ["driver.not-loaded", "gpu.ecc-uncorrectable", "security.driver"],
        {"driver.not-loaded"},
        forced=True,
    )
    assert line == (
        "3 audit error rule(s), going on: driver.not-loaded (accepted), "
        "gpu.ecc-uncorrectable (forced), security.driver (which the target fixes)"
    )
