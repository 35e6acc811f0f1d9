"""What the checks share: facts read once per host, and the two ways a check gives up.

``need_spec`` and ``need_gpus`` fail the calling check with the host's real state (no profile,
nvidia-smi missing, driver not loaded, no GPU): these are findings about the host, never errors
of the suite and never skips.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from gpuhost import pkgmgr
from gpuhost.checks_support import expected as expected_mod
from gpuhost.checks_support import gpu as gpu_mod
from gpuhost.checks_support import packages as packages_mod
from gpuhost.checks_support.expected import Expected
from gpuhost.deploys.spec import PackagePlan
from gpuhost.desired import DesiredState
from gpuhost.errors import ParseError
from gpuhost.facts.probe_parsers import parse_os_release
from gpuhost.parsers import (
    parse_dpkg_query,
    parse_output,
    parse_proc_version,
)
from gpuhost.parsers.driver import KernelModule
from gpuhost.parsers.nvidia_smi import SmiReport
from gpuhost.parsers.packages import Package
from gpuhost.pkgmgr import PackageManager


class HostFacts:
    """Command outputs of one host, each read at most once per run (checks never change it)."""

    def __init__(self, host: Any, name: str) -> None:
        self.host = host
        self.name = name

    def run(self, command: str) -> str:
        """stdout of ``command`` (checks decide what a non-zero exit means)."""
        return str(self.host.run(command).stdout)

    def has(self, command: str) -> bool:
        return bool(self.host.exists(command))

    @functools.cached_property
    def smi_output(self) -> str:
        return self.run(gpu_mod.SMI_COMMAND)

    @functools.cached_property
    def smi(self) -> SmiReport | None:
        if self.smi_output.strip() == gpu_mod.NOT_FOUND:
            return None
        try:
            return parse_output(self.smi_output)
        except ParseError:
            return None

    @functools.cached_property
    def module(self) -> KernelModule | None:
        try:
            return parse_proc_version(self.run(gpu_mod.MODULE_COMMAND))
        except ParseError:
            return None

    @functools.cached_property
    def gpu_problem(self) -> str | None:
        return gpu_mod.unavailable_reason(self.smi_output, self.smi, self.module)

    @functools.cached_property
    def os_release(self) -> str:
        return self.run(expected_mod.OS_RELEASE_COMMAND)

    @functools.cached_property
    def marker(self) -> expected_mod.Marker:
        return expected_mod.parse_marker(self.run(expected_mod.MARKER_COMMAND))

    @functools.cached_property
    def manager(self) -> PackageManager | None:
        """The host's package manager, by its /etc/os-release (None: an OS of no known one)."""
        return pkgmgr.for_family(parse_os_release(self.os_release).family)

    @functools.cached_property
    def holds(self) -> set[str]:
        manager = self.manager or pkgmgr.APT
        try:
            return packages_mod.parse_holds(
                self.run(manager.holds_command() + " 2>/dev/null"), manager
            )
        except ParseError as exc:  # the lock file was not read: locks unknown, never "none"
            pytest.fail(f"{self.name}: {manager.lock_word} packages unknown: {exc}", pytrace=False)

    def packages(self, names: list[str]) -> list[Package]:
        if not names:
            return []
        manager = self.manager or pkgmgr.APT
        return parse_dpkg_query(self.run(packages_mod.dpkg_command(names, manager)))


announced: dict[str, str] = {}
"""Host -> why it has no expected state, already said once before the checks ran (plugin.py)."""


def need_spec(expected: Expected) -> tuple[DesiredState, PackagePlan]:
    """The host's resolved profile, or FAIL the check saying why there is none: in full, or
    in short when the run said it in full before the checks."""
    __tracebackhide__ = True
    if expected.spec is None or expected.plan is None:
        if expected.host in announced:
            what = "no profile" if expected.profile is None else f"profile {expected.profile!r}"
            pytest.fail(
                f"{expected.host}: {what}: no expected state (why: the line before the checks)",
                pytrace=False,
            )
        pytest.fail(expected.problem or f"{expected.host}: no expected state", pytrace=False)
    return expected.spec, expected.plan


def need_gpus(facts: HostFacts) -> SmiReport:
    """nvidia-smi's report with at least one GPU, or FAIL the check with the host's state."""
    __tracebackhide__ = True
    if facts.gpu_problem is not None or facts.smi is None:
        pytest.fail(f"{facts.name}: {facts.gpu_problem}", pytrace=False)
    return facts.smi


def fail_with(problems: list[str], what: str, raw: str = "") -> None:
    """FAIL listing every problem (and a tail of the raw output when given)."""
    __tracebackhide__ = True
    if problems:
        tail = f"\n--- raw output (tail) ---\n{raw.strip()[-1500:]}" if raw.strip() else ""
        pytest.fail(f"{what}:\n  " + "\n  ".join(problems) + tail, pytrace=False)
