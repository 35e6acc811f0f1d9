"""Prometheus node_exporter textfile format (``--prom FILE``; put it in the collector's
textfile directory). Metrics:

- ``gpuhost_audit_host_up{host}`` 1 reachable, 0 not
- ``gpuhost_audit_host_verdict{host,verdict}`` 1 for the host's verdict
- ``gpuhost_audit_finding{host,rule,severity}`` 1 per finding (same rule twice: counted)
- ``gpuhost_audit_findings{host,severity}`` number of findings per severity
- ``gpuhost_audit_stack_info{host,driver,driver_installed,cuda,cudnn,kernel_module,gpus}`` 1
- ``gpuhost_audit_gpus{host}`` GPUs nvidia-smi reports
- ``gpuhost_audit_hosts{verdict}`` hosts per verdict; ``gpuhost_audit_stacks`` distinct stacks
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from gpuhost.audit.findings import SEVERITIES, VERDICTS
from gpuhost.audit.host import HostReport
from gpuhost.audit.summary import stack_of


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: str) -> str:
    inner = ",".join(f'{key}="{_escape(str(value))}"' for key, value in labels.items())
    return "{" + inner + "}"


class _Families:
    def __init__(self) -> None:
        self.order: list[str] = []
        self.meta: dict[str, tuple[str, str]] = {}
        self.samples: dict[str, list[str]] = {}

    def add(self, name: str, kind: str, help_text: str) -> None:
        self.order.append(name)
        self.meta[name] = (kind, help_text)
        self.samples[name] = []

    def sample(self, name: str, value: float, **labels: str) -> None:
        shown = int(value) if float(value).is_integer() else value
        self.samples[name].append(f"{name}{_labels(**labels) if labels else ''} {shown}")

    def render(self) -> str:
        lines = []
        for name in self.order:
            kind, help_text = self.meta[name]
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(self.samples[name])
        return "\n".join(lines) + "\n"


def render(hosts: Iterable[HostReport], summary: Mapping[str, Any]) -> str:
    families = _Families()
    families.add("gpuhost_audit_host_up", "gauge", "1 if gpuhost could probe the host, else 0.")
    families.add("gpuhost_audit_host_verdict", "gauge", "1 for the host's audit verdict.")
    families.add(
        "gpuhost_audit_finding", "gauge", "Findings of the audit per host, rule, severity."
    )
    families.add("gpuhost_audit_findings", "gauge", "Number of findings per host and severity.")
    families.add("gpuhost_audit_stack_info", "gauge", "The GPU stack found on the host (always 1).")
    families.add("gpuhost_audit_gpus", "gauge", "GPUs nvidia-smi reports on the host.")
    families.add("gpuhost_audit_hosts", "gauge", "Hosts per audit verdict.")
    families.add("gpuhost_audit_stacks", "gauge", "Distinct GPU stacks among reachable hosts.")
    for host in sorted(hosts, key=lambda h: h.name):
        families.sample("gpuhost_audit_host_up", 1 if host.reachable else 0, host=host.name)
        families.sample("gpuhost_audit_host_verdict", 1, host=host.name, verdict=host.verdict)
        counts = Counter((f.rule, f.severity) for f in host.findings)
        for (rule, severity), count in sorted(counts.items()):
            families.sample(
                "gpuhost_audit_finding", count, host=host.name, rule=rule, severity=severity
            )
        per_severity = Counter(f.severity for f in host.findings)
        for severity in SEVERITIES:
            families.sample(
                "gpuhost_audit_findings",
                per_severity.get(severity, 0),
                host=host.name,
                severity=severity,
            )
        if host.facts is not None:
            stack = stack_of(host.facts.to_dict())
            families.sample(
                "gpuhost_audit_stack_info",
                1,
                host=host.name,
                driver=stack["driver_loaded"],
                driver_installed=stack["driver_installed"],
                cuda=stack["cuda_default"],
                cudnn=stack["cudnn"],
                kernel_module=stack["kernel_module"],
                gpus=stack["gpus"],
            )
            families.sample("gpuhost_audit_gpus", len(host.facts.driver.smi.gpus), host=host.name)
    verdicts = summary.get("verdicts") or {}
    for verdict in VERDICTS:
        families.sample("gpuhost_audit_hosts", int(verdicts.get(verdict, 0)), verdict=verdict)
    families.sample("gpuhost_audit_stacks", len(summary.get("stacks") or []))
    return families.render()
