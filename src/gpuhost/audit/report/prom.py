"""Prometheus node_exporter textfile (``--prom FILE``), written with prometheus_client.

``write(path, ...)`` writes a temporary file beside ``path`` and renames it over ``path``
(``safeio.write_atomic``), so node_exporter never reads half a file. Metric
names and labels (documented in docs/audit-report.md; docs/monitoring.md's alert rules use them):

- ``gpuhost_audit_host_up{host}`` 1 probed, 0 not
- ``gpuhost_audit_host_verdict{host,verdict}`` 1 for the host's verdict (compatibility and health)
- ``gpuhost_audit_finding{host,rule,severity}`` findings of that rule on the host
- ``gpuhost_audit_findings{host,severity}`` number of findings per severity (every severity)
- ``gpuhost_audit_fault_action{host,rule,action}`` findings of that rule on the host that call
  for that action (the fault catalog's, docs/monitoring.md; only findings with an action)
- ``gpuhost_audit_host_security_verdict{host,verdict}`` 1 for the host's security exposure
- ``gpuhost_audit_security_finding{host,rule,severity}`` its ``security.*`` findings (never in the
  three metrics above: two answers, never mixed)
- ``gpuhost_audit_stack_info{host,driver,driver_installed,cuda,cudnn,kernel_module,gpus}`` 1
- ``gpuhost_audit_gpus{host}`` GPUs nvidia-smi reports
- ``gpuhost_audit_hosts{verdict}`` hosts per verdict; ``gpuhost_audit_security_hosts{verdict}``
  hosts per security verdict; ``gpuhost_audit_stacks`` distinct stacks
- ``gpuhost_audit_last_run_timestamp_seconds`` when the audit finished (unix time)
- ``gpuhost_audit_last_run_success`` 1 when every host was probed, else 0
- ``gpuhost_audit_data_info{date,origin}`` 1: the data judged with (``gpuhost data status``);
  ``date`` is empty when the data has no date (the JSON report's null)
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from gpuhost.audit.host import HostReport
from gpuhost.audit.summary import stack_of
from gpuhost.datadir import data_info
from gpuhost.findings import SEVERITIES, VERDICTS
from gpuhost.safeio import write_atomic

STACK_LABELS = ("driver", "driver_installed", "cuda", "cudnn", "kernel_module", "gpus")


@dataclass(frozen=True)
class _Gauges:
    """The audit's gauges in one registry (created in the order the textfile lists them)."""

    up: Gauge
    verdict: Gauge
    finding: Gauge
    findings: Gauge
    fault_action: Gauge
    security_verdict: Gauge
    security_finding: Gauge
    stack_info: Gauge
    gpus: Gauge
    per_verdict: Gauge
    per_security: Gauge
    stacks: Gauge
    last_run: Gauge
    success: Gauge


def _gauges(reg: CollectorRegistry) -> _Gauges:
    def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
        return Gauge(name, doc, labelnames=labels, registry=reg)

    return _Gauges(
        up=gauge("gpuhost_audit_host_up", "1 if gpuhost could probe the host, else 0.", ("host",)),
        verdict=gauge(
            "gpuhost_audit_host_verdict", "1 for the host's audit verdict.", ("host", "verdict")
        ),
        finding=gauge(
            "gpuhost_audit_finding",
            "Findings of the audit per host, rule and severity.",
            ("host", "rule", "severity"),
        ),
        findings=gauge(
            "gpuhost_audit_findings",
            "Number of findings per host and severity.",
            ("host", "severity"),
        ),
        fault_action=gauge(
            "gpuhost_audit_fault_action",
            "Findings per host and rule that call for an action (the GPU fault catalog's).",
            ("host", "rule", "action"),
        ),
        security_verdict=gauge(
            "gpuhost_audit_host_security_verdict",
            "1 for the host's security exposure (NVIDIA bulletins; apart from its verdict).",
            ("host", "verdict"),
        ),
        security_finding=gauge(
            "gpuhost_audit_security_finding",
            "Security findings (NVIDIA bulletins) per host, rule and severity.",
            ("host", "rule", "severity"),
        ),
        stack_info=gauge(
            "gpuhost_audit_stack_info",
            "The GPU stack found on the host (always 1).",
            ("host", *STACK_LABELS),
        ),
        gpus=gauge("gpuhost_audit_gpus", "GPUs nvidia-smi reports on the host.", ("host",)),
        per_verdict=gauge("gpuhost_audit_hosts", "Hosts per audit verdict.", ("verdict",)),
        per_security=gauge(
            "gpuhost_audit_security_hosts", "Hosts per security verdict.", ("verdict",)
        ),
        stacks=gauge("gpuhost_audit_stacks", "Distinct GPU stacks among reachable hosts."),
        last_run=gauge(
            "gpuhost_audit_last_run_timestamp_seconds", "When the audit finished (unix time)."
        ),
        success=gauge(
            "gpuhost_audit_last_run_success", "1 when the audit probed every host, else 0."
        ),
    )


def _data_info(reg: CollectorRegistry) -> None:
    data = data_info()
    Gauge(
        "gpuhost_audit_data_info",
        "1 for the data the audit judged with: its date and origin (gpuhost data status).",
        labelnames=("date", "origin"),
        registry=reg,
    ).labels(date=data["date"] or "", origin=str(data["origin"])).set(1)


def _host_metrics(g: _Gauges, host: HostReport) -> bool:
    """One host's series; whether it was probed."""
    g.up.labels(host=host.name).set(1 if host.reachable else 0)
    g.verdict.labels(host=host.name, verdict=host.verdict).set(1)
    g.security_verdict.labels(host=host.name, verdict=host.security_verdict).set(1)
    for metric, found in ((g.finding, host.findings), (g.security_finding, host.security_findings)):
        counts = Counter((f.rule, f.severity) for f in found)
        for (rule, severity), count in sorted(counts.items()):
            metric.labels(host=host.name, rule=rule, severity=severity).set(count)
    actions = Counter((f.rule, f.action) for f in host.findings if f.action)
    for (rule, action), count in sorted(actions.items()):
        g.fault_action.labels(host=host.name, rule=rule, action=action).set(count)
    per_severity = Counter(f.severity for f in host.findings)
    for severity in SEVERITIES:
        g.findings.labels(host=host.name, severity=severity).set(per_severity.get(severity, 0))
    if host.facts is None:
        return False
    stack = stack_of(host.facts.to_dict())
    g.stack_info.labels(
        host=host.name,
        driver=stack["driver_loaded"],
        driver_installed=stack["driver_installed"],
        cuda=stack["cuda_default"],
        cudnn=stack["cudnn"],
        kernel_module=stack["kernel_module"],
        gpus=stack["gpus"],
    ).set(1)
    g.gpus.labels(host=host.name).set(len(host.facts.driver.smi.gpus))
    return True


def _fabric_metrics(reg: CollectorRegistry, hosts: list[HostReport]) -> None:
    """Per RDMA port: up (ACTIVE/LinkUp) and its rate; only hosts that have ports."""
    labels = ("host", "port", "link_layer")
    up = Gauge(
        "gpuhost_fabric_port_up",
        "1 when the RDMA port is ACTIVE and LinkUp.",
        labelnames=labels,
        registry=reg,
    )
    rate = Gauge(
        "gpuhost_fabric_port_rate_gbps",
        "The RDMA port's rate in Gb/s (0: unknown).",
        labelnames=labels,
        registry=reg,
    )
    for host in hosts:
        for port in host.facts.fabric.ports if host.facts is not None else []:
            key = {"host": host.name, "port": port.name, "link_layer": port.link_layer or ""}
            up.labels(**key).set(1 if port.active else 0)
            rate.labels(**key).set(port.rate_gbps or 0)


def registry(
    hosts: Iterable[HostReport], summary: Mapping[str, Any], now: float | None = None
) -> CollectorRegistry:
    """Every metric of one audit in a fresh registry."""
    reg = CollectorRegistry(auto_describe=True)
    g = _gauges(reg)
    _data_info(reg)
    ordered = sorted(hosts, key=lambda h: h.name)
    probed = [_host_metrics(g, host) for host in ordered]
    _fabric_metrics(reg, ordered)
    verdicts = summary.get("verdicts") or {}
    exposed = (summary.get("security") or {}).get("verdicts") or {}
    for name in VERDICTS:
        g.per_verdict.labels(verdict=name).set(int(verdicts.get(name, 0)))
        g.per_security.labels(verdict=name).set(int(exposed.get(name, 0)))
    g.stacks.set(len(summary.get("stacks") or []))
    g.last_run.set(time.time() if now is None else now)
    g.success.set(1 if all(probed) else 0)
    return reg


def render(hosts: Iterable[HostReport], summary: Mapping[str, Any]) -> str:
    """The textfile's content."""
    return generate_latest(registry(hosts, summary)).decode("utf-8")


def target_problem(path: str) -> str | None:
    """Why ``path`` cannot take the textfile: the rename would replace whatever is there, so
    anything but a regular file (a device such as /dev/null, a FIFO, a folder) is refused."""
    if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
        return (
            "exists and is not a regular file (a symbolic link, device, FIFO or folder would be "
            "replaced); "
            "expected the path of a .prom file in node_exporter's textfile directory"
        )
    return None


def write(path: str, hosts: Iterable[HostReport], summary: Mapping[str, Any]) -> None:
    """Write the textfile atomically (temporary file beside ``path``, then rename); OSError,
    also for a target that is not a regular file (:func:`target_problem`)."""
    problem = target_problem(path)
    if problem:
        raise OSError(problem)
    write_atomic(Path(path), render(hosts, summary).encode("utf-8"))
