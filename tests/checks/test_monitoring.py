"""The node health-check wrapper, the metrics timer units and the example alert rules."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpuhost.deploys.cluster import install_metrics_timer
from gpuhost.errors import ConfigError
from gpuhost.operations.node_services import (
    render_healthcheck,
    render_metrics_service,
    render_metrics_timer,
)

REPO = Path(__file__).parents[2]
RULES = REPO / "docs" / "examples" / "gpuhost-alerts.yml"


def test_healthcheck_wrapper_runs_the_health_tier():
    text = render_healthcheck("/opt/gpuhost venv/bin/gpuhost")
    assert text.startswith("#!/bin/sh\n")
    assert text.endswith(
        "exec '/opt/gpuhost venv/bin/gpuhost' check @local --tier health --drain \"$@\"\n"
    )
    assert render_healthcheck("gpuhost", drain=False).endswith('--tier health "$@"\n')
    assert render_healthcheck("gpuhost", after=2, k8s=True).endswith(
        'check @local --tier health --drain --k8s --after 2 "$@"\n'
    )


def test_metrics_units():
    service = render_metrics_service("gpuhost", "/var/lib/prometheus/node-exporter/")
    assert (
        "ExecStart=gpuhost audit --prom /var/lib/prometheus/node-exporter/gpuhost.prom\n" in service
    )
    assert "SuccessExitStatus=1\n" in service and "Type=oneshot\n" in service
    timer = render_metrics_timer(5)
    assert "OnUnitActiveSec=5min\n" in timer and "WantedBy=timers.target\n" in timer


def test_metrics_timer_interval_is_checked():
    with pytest.raises(ConfigError, match="minutes: expected a positive integer, found 0"):
        install_metrics_timer.__wrapped__(minutes=0)  # type: ignore[attr-defined]


def test_alert_rules_cover_the_documented_cases():
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    names = {rule["alert"] for rule in rules}
    assert names >= {
        "GpuhostDrift",
        "GpuhostRebootNeeded",
        "GpuhostSecurityAdvisory",
        "GpuhostGpuMemoryErrors",
        "GpuhostGpuFaultNeedsHands",
        "GpuhostAuditStale",
    }
    (fault,) = [rule for rule in rules if rule["alert"] == "GpuhostGpuFaultNeedsHands"]
    assert "gpuhost_audit_fault_action" in fault["expr"]
    assert "examples/gpuhost-alerts.yml" in (REPO / "docs" / "monitoring.md").read_text()


@pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool is not installed here (Debian package prometheus); the Slurm/Prometheus lab "
    "test runs promtool check rules on a lab host",
)
def test_alert_rules_pass_promtool():
    proc = subprocess.run(
        ["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("after", [0, True, "2"])
def test_health_check_deploy_refuses_a_bad_after(after):
    from gpuhost.deploys.cluster import install_health_check

    with pytest.raises(ConfigError, match="install_health_check: after: expected a positive"):
        install_health_check.__wrapped__(after=after)  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="after counts runs for drain or k8s"):
        install_health_check.__wrapped__(drain=False, after=2)  # type: ignore[attr-defined]
