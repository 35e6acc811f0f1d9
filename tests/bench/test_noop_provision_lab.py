"""A provision re-run on a converged host makes no package-manager call (not timed).

Counted on the host itself, not from gpuhost's view of it: logging wrappers for apt-get, apt,
apt-mark, dpkg and aptitude are put first on root's PATH (/usr/local/sbin) and record every
invocation, including the dpkg calls apt makes. The first run must show up in that log (so the
counting demonstrably works); the re-run must leave it empty except read-only queries.
The one-SSH-command-per-host audit test and the shard + merge test live in
tests/integration/test_audit_lab.py (not duplicated here).
"""

from __future__ import annotations

import shlex

import pytest
from integration.provision_support import repo_data, run_provision, ssh_data

pytestmark = [pytest.mark.lab, pytest.mark.slow]

PACKAGE_TOOLS = ("apt-get", "apt", "apt-mark", "dpkg", "aptitude")
LOG = "/var/log/gpuhost-bench-package-calls.log"
#: invocations that only read package state
READ_ONLY = (("apt-mark", "showhold"), ("dpkg", "--print-architecture"),
             ("dpkg", "--compare-versions"), ("dpkg", "-l"), ("dpkg", "--list"),
             ("dpkg", "--audit"), ("dpkg", "-C"), ("dpkg", "-s"), ("dpkg", "--status"))


def _install_wrappers(host) -> None:
    lines = []
    for tool in PACKAGE_TOOLS:
        wrapper = (f'#!/bin/sh\nprintf "%s\\n" "{tool} $*" >> {LOG}\n'
                   f'exec /usr/bin/{tool} "$@"\n')
        lines.append(f"printf '%s' {shlex.quote(wrapper)} > /usr/local/sbin/{tool}")
        lines.append(f"chmod 755 /usr/local/sbin/{tool}")
    result = host.run(" && ".join(lines) + f" && : > {LOG}")
    assert result.returncode == 0, result.stderr


def _calls(host) -> list[str]:
    result = host.run(f"cat {LOG}; : > {LOG}")
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line.strip()]


def _writes(calls: list[str]) -> list[str]:
    def read_only(call: str) -> bool:
        words = call.split()
        return any(words[:1] == [tool] and flag in words[1:] for tool, flag in READ_ONLY)

    return [call for call in calls if not read_only(call)]


def test_noop_provision_makes_no_package_manager_call(lab, fresh_host) -> None:
    lab_ = lab(lab.count or 1)
    _install_wrappers(fresh_host)
    which = fresh_host.run("command -v apt-get dpkg").stdout.split()
    assert which == ["/usr/local/sbin/apt-get", "/usr/local/sbin/dpkg"], which
    data = dict(ssh_data(lab_, fresh_host), **repo_data(lab_),
                gpuhost_profile="lab-nvidia-repo-550")

    first = run_provision([(fresh_host.name, data)])[fresh_host.name]
    assert any(first.values())
    converge_calls = _calls(fresh_host)
    assert any(c.startswith("apt-get") and " install " in f" {c} " for c in converge_calls), (
        converge_calls)
    assert any(c.startswith("dpkg") for c in converge_calls), converge_calls

    second = run_provision([(fresh_host.name, data)])[fresh_host.name]
    assert not any(second.values()), {name: c for name, c in second.items() if c}
    rerun_calls = _calls(fresh_host)
    assert _writes(rerun_calls) == [], rerun_calls
