"""Audit one host: facts + expected profile → rule results → a HostReport."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gpuhost.audit.expected import expected_state
from gpuhost.audit.matrix_check import matrix_results
from gpuhost.audit.rules import AuditContext, run_rules
from gpuhost.fabric.expected import expectation
from gpuhost.facts.host_facts import HostFacts
from gpuhost.faults.node_class import NodeExpectation, expectation_for
from gpuhost.findings import (
    ERROR,
    Finding,
    RuleResult,
    rule_doc,
    severity_rank,
    split_security,
)
from gpuhost.findings import (
    verdict as verdict_of,
)
from gpuhost.gpus.catalog import labelled
from gpuhost.gpus.node_classes import firmware_baseline, node_override
from gpuhost.parsers.profile_marker import MARKER_PATH

PROFILE_KEY = "gpuhost_profile"


@dataclass(frozen=True)
class AuditSettings:
    """What every host is judged against. ``profiles`` maps profile names to profile objects."""

    matrix: Any = None
    profiles: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HostReport:
    """One host's judgement: two answers, never mixed. ``verdict`` (with ``findings``) says
    whether the host's stack is right and healthy; ``security_verdict`` (with
    ``security_findings``, the ``security.*`` rules) whether NVIDIA security bulletins affect
    what it runs."""

    name: str
    reachable: bool
    facts: HostFacts | None
    results: tuple[RuleResult, ...] = ()

    @property
    def all_findings(self) -> list[Finding]:
        """Both answers' findings, worst first (what a caller asking both questions judges)."""
        found = [f for result in self.results for f in result.findings]
        return sorted(found, key=lambda f: (severity_rank(f.severity), f.rule))

    @property
    def findings(self) -> list[Finding]:
        """The compatibility and health findings, worst first."""
        return split_security(self.all_findings)[0]

    @property
    def security_findings(self) -> list[Finding]:
        """The security exposure's findings (``security.*``), worst first."""
        return split_security(self.all_findings)[1]

    @property
    def verdict(self) -> str:
        return verdict_of(self.findings, self.reachable)

    @property
    def security_verdict(self) -> str:
        return verdict_of(self.security_findings, self.reachable)

    def to_dict(self) -> dict[str, Any]:
        """The host's entry in a schema-1 JSON report (docs/audit-report.md)."""
        return {
            "name": self.name,
            "reachable": self.reachable,
            "facts": self.facts.to_dict() if self.facts is not None else None,
            "findings": [f.to_dict() for f in self.findings],
            "verdict": self.verdict,
            "security": {
                "verdict": self.security_verdict,
                "findings": [f.to_dict() for f in self.security_findings],
            },
        }


def _context(
    facts: HostFacts,
    host_data: Mapping[str, Any],
    settings: AuditSettings,
    results: tuple[RuleResult, ...],
    fabric_previous: dict[str, dict[str, int]] | None = None,
) -> AuditContext:
    gpus = facts.driver.smi.gpus if facts.driver.smi.ok else []
    gpu_names = [labelled(gpu.name or "", gpu.pci_device_id) for gpu in gpus]
    return replace(
        _profile_context(facts, host_data, settings, results),
        fabric_expected=expectation(gpu_names, host_data),
        fabric_previous=fabric_previous,
    )


def _profile_context(
    facts: HostFacts,
    host_data: Mapping[str, Any],
    settings: AuditSettings,
    results: tuple[RuleResult, ...],
) -> AuditContext:
    named = host_data.get(PROFILE_KEY)
    source = "inventory" if named else "marker" if facts.profile_marker else None
    name = str(named) if named else facts.profile_marker
    if name is None:
        return AuditContext(facts, matrix_results=results)
    profile = settings.profiles.get(name)
    if profile is None:
        where = f"inventory data {PROFILE_KEY}" if source == "inventory" else MARKER_PATH
        known = ", ".join(sorted(settings.profiles)) or "none"
        error = f"profile {name!r} (from {where}) is not defined; known profiles: {known}"
        return AuditContext(facts, None, name, source, error, results)
    expected = expected_state(profile, host_data, facts.provision_marker)
    return AuditContext(facts, expected, name, source, None, results)


def audit_host(
    name: str,
    facts: HostFacts,
    host_data: Mapping[str, Any],
    settings: AuditSettings,
    fabric_previous: dict[str, dict[str, int]] | None = None,
) -> HostReport:
    """Judge one host's facts (``fabric_previous``: its RDMA error counters of the last run)."""
    if settings.matrix is not None:
        from_matrix = matrix_results(facts, settings.matrix)
    else:
        from_matrix = (RuleResult("matrix", skipped="compatibility matrix not loaded"),)
    ctx = replace(
        _context(facts, host_data, settings, from_matrix, fabric_previous),
        node=node_expectation(facts, host_data),
        firmware=firmware_baseline(_first_gpu(facts), host_data),
    )
    return HostReport(name, True, facts, tuple(run_rules(ctx)))


def node_expectation(facts: HostFacts, host_data: Mapping[str, Any]) -> NodeExpectation | None:
    """What the node should have: its first GPU's node class with the inventory's
    override (``gpuhost_node``, older ``gpuhost_expect``) over it (checked by the inventory
    contract)."""
    gpus = facts.driver.smi.gpus if facts.driver.smi.ok else []
    return expectation_for(_first_gpu(facts), node_override(host_data), len(gpus))


def _first_gpu(facts: HostFacts) -> str | None:
    """The first GPU nvidia-smi reported, with its PCI ID (what the node classes match on)."""
    gpus = facts.driver.smi.gpus if facts.driver.smi.ok else []
    return labelled(gpus[0].name, gpus[0].pci_device_id) if gpus and gpus[0].name else None


def _host_error(
    name: str, rule: str, message: str, *, reachable: bool, found: str, expected: str, fix: str
) -> HostReport:
    """A host with no facts to judge: one error finding under ``rule``."""
    finding = Finding(
        rule,
        ERROR,
        message,
        source=rule_doc(rule),
        found=found,
        expected=expected,
        fix=fix,
    )
    return HostReport(name, reachable, None, (RuleResult(rule, (finding,)),))


def unreachable_host(name: str, error: str) -> HostReport:
    """A host gpuhost could not reach or log in to."""
    fix = "check that it is up and that SSH works with the inventory's user and key (ssh HOST true)"
    return _host_error(
        name,
        "host.unreachable",
        f"could not audit the host: {error}",
        reachable=False,
        found=error,
        expected="an SSH login with the inventory's user and key",
        fix=fix,
    )


def failed_host(name: str, error: str) -> HostReport:
    """A host that answered but whose probe failed or printed something unreadable."""
    fix = (
        "run the probe by hand (gpuhost audit on the host) and check that sh, and sudo where "
        "configured, work"
    )
    return _host_error(
        name,
        "host.probe-failed",
        f"the host answered but the gpuhost probe failed: {error}",
        reachable=True,
        found=error,
        expected="the gpuhost probe's sections",
        fix=fix,
    )
