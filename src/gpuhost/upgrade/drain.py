"""Taking a node out of its scheduler before an upgrade, and back in after.

- ``none``: nothing (single hosts, or a scheduler you drain yourself).
- ``slurm``: ``scontrol update nodename=X state=drain reason=...`` run on the node itself (every
  Slurm node has scontrol and slurm.conf), then wait until the node has no jobs; undrain is
  ``state=resume``. A node an admin had drained before (reason not ours) is not resumed.
- ``kubernetes``: ``kubectl drain`` (which cordons) from the controller; undrain is
  ``kubectl uncordon``. A node that was already cordoned is not uncordoned.

Node names come from host data ``slurm_node`` / ``k8s_node``, else ``hostname -s`` / the inventory
name. ``drain`` returns data recorded in the journal; ``undrain`` gets it back.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from gpuhost import toolrun
from gpuhost.errors import ConfigError, HostError
from gpuhost.upgrade.remote import Remote

REASON_PREFIX = "gpuhost"
DRAIN_MODES = ("none", "slurm", "kubernetes")
_SCONTROL_FIELD_RE = re.compile(r" (?=[A-Za-z][A-Za-z0-9_:/.]*=)")


class Drainer(Protocol):
    name: str

    def drain(self, remote: Remote, host_data: Mapping[str, Any], reason: str) -> dict[str, Any]:
        """Drain the node and wait until it runs nothing; return what undrain needs."""

    def undrain(
        self, remote: Remote, host_data: Mapping[str, Any], data: Mapping[str, Any]
    ) -> None:
        """Put the node back in service (unless it was out of service before us)."""


class NoDrain:
    name = "none"

    def drain(self, remote: Remote, host_data: Mapping[str, Any], reason: str) -> dict[str, Any]:
        return {"drain": "none"}

    def undrain(
        self, remote: Remote, host_data: Mapping[str, Any], data: Mapping[str, Any]
    ) -> None:
        return None


def parse_scontrol_node(line: str) -> dict[str, str]:
    """``scontrol -o show node X`` (one line of Key=Value, values may hold spaces) -> dict."""
    fields: dict[str, str] = {}
    for chunk in _SCONTROL_FIELD_RE.split(line.strip()):
        key, sep, value = chunk.partition("=")
        if sep:
            fields[key] = value
    if "NodeName" not in fields or "State" not in fields:
        raise HostError("slurm", f"unexpected scontrol output: {line[:160]!r}")
    return fields


def slurm_state_flags(state: str) -> set[str]:
    """``MIXED+DRAIN`` -> {"MIXED", "DRAIN"}; a trailing ``*`` (not responding) is a flag too."""
    flags = set()
    if state.endswith("*"):
        flags.add("NOT_RESPONDING")
        state = state[:-1]
    flags.update(part for part in state.upper().split("+") if part)
    return flags


def slurm_is_idle(flags: set[str]) -> bool:
    """No job runs or completes on the node any more."""
    return not flags & {"ALLOCATED", "MIXED", "COMPLETING"}


class SlurmDrain:
    name = "slurm"

    def __init__(
        self,
        timeout_s: float = 3600,
        poll_s: float = 5,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.sleep = sleep
        self.clock = clock

    def node_name(self, remote: Remote, host_data: Mapping[str, Any]) -> str:
        name = host_data.get("slurm_node")
        if name:
            return str(name)
        result = remote.run("hostname -s")
        if not result.ok or not result.stdout.strip():
            raise HostError(remote.host, f"slurm: cannot read the node name: {result.tail()}")
        return result.stdout.strip()

    def show(self, remote: Remote, node: str) -> dict[str, str]:
        result = remote.run(f"LC_ALL=C scontrol -o show node {shlex.quote(node)}")
        if not result.ok:
            raise HostError(remote.host, f"slurm: scontrol show node {node}: {result.tail()}")
        line = next((x for x in result.stdout.splitlines() if x.startswith("NodeName=")), "")
        return parse_scontrol_node(line or result.stdout)

    def jobs(self, remote: Remote, node: str) -> list[str]:
        result = remote.run(f"squeue -h -w {shlex.quote(node)} -o %i")
        if not result.ok:
            raise HostError(remote.host, f"slurm: squeue -w {node}: {result.tail()}")
        return [j.strip() for j in result.stdout.splitlines() if j.strip()]

    def drain(self, remote: Remote, host_data: Mapping[str, Any], reason: str) -> dict[str, Any]:
        node = self.node_name(remote, host_data)
        before = self.show(remote, node)
        flags = slurm_state_flags(before["State"])
        ours = before.get("Reason", "").startswith(REASON_PREFIX)
        drained_before = bool(flags & {"DRAIN", "DRAINED", "DRAINING"}) and not ours
        if not drained_before:
            text = reason if reason.startswith(REASON_PREFIX) else f"{REASON_PREFIX}: {reason}"
            cmd = (
                f"scontrol update nodename={shlex.quote(node)} state=drain "
                f"reason={shlex.quote(text.replace('=', ' '))}"
            )
            result = remote.run(cmd)
            if not result.ok:
                raise HostError(remote.host, f"slurm: drain {node} failed: {result.tail()}")
        deadline = self.clock() + self.timeout_s
        while True:
            flags = slurm_state_flags(self.show(remote, node)["State"])
            jobs = self.jobs(remote, node)
            if slurm_is_idle(flags) and not jobs:
                break
            if self.clock() >= deadline:
                raise HostError(
                    remote.host,
                    f"slurm: node {node} still runs job(s) {', '.join(jobs) or '?'} after "
                    f"{self.timeout_s:g}s (state {'+'.join(sorted(flags))})",
                )
            self.sleep(self.poll_s)
        return {"drain": "slurm", "slurm_node": node, "drained_before": drained_before}

    def undrain(
        self, remote: Remote, host_data: Mapping[str, Any], data: Mapping[str, Any]
    ) -> None:
        node = str(data.get("slurm_node") or self.node_name(remote, host_data))
        if data.get("drained_before"):
            return  # an admin drained it before us; leave it as we found it
        result = remote.run(f"scontrol update nodename={shlex.quote(node)} state=resume")
        if not result.ok:
            raise HostError(remote.host, f"slurm: resume {node} failed: {result.tail()}")


Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]


def _run_local(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return toolrun.completed(argv, timeout=7200)  # the group killed at the deadline
    except FileNotFoundError:
        raise ConfigError(f"{argv[0]}: not found on the controller (needed for --drain)") from None


class KubernetesDrain:
    name = "kubernetes"

    def __init__(self, kubectl: str = "kubectl", timeout_s: float = 3600, run: Runner = _run_local):
        self.kubectl = kubectl
        self.timeout_s = timeout_s
        self.run = run

    def node_name(self, remote: Remote, host_data: Mapping[str, Any]) -> str:
        return str(host_data.get("k8s_node") or remote.host)

    def _kubectl(self, host: str, *args: str) -> str:
        try:
            proc = self.run([self.kubectl, *args])
        except subprocess.TimeoutExpired as exc:
            raise HostError(host, f"kubectl {args[0]}: no answer in {exc.timeout:g} s") from None
        if proc.returncode != 0:
            last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or [""]
            raise HostError(host, f"kubectl {' '.join(args)} exited {proc.returncode}: {last[0]}")
        return proc.stdout

    def drain(self, remote: Remote, host_data: Mapping[str, Any], reason: str) -> dict[str, Any]:
        node = self.node_name(remote, host_data)
        cordoned = self._kubectl(
            remote.host, "get", "node", node, "-o", "jsonpath={.spec.unschedulable}"
        ).strip()
        self._kubectl(
            remote.host,
            "drain",
            node,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            f"--timeout={int(self.timeout_s)}s",
        )
        return {"drain": "kubernetes", "k8s_node": node, "drained_before": cordoned == "true"}

    def undrain(
        self, remote: Remote, host_data: Mapping[str, Any], data: Mapping[str, Any]
    ) -> None:
        if data.get("drained_before"):
            return
        node = str(data.get("k8s_node") or self.node_name(remote, host_data))
        self._kubectl(remote.host, "uncordon", node)


def make_drainer(mode: str, timeout_s: float = 3600) -> Drainer:
    if mode == "none":
        return NoDrain()
    if mode == "slurm":
        return SlurmDrain(timeout_s=timeout_s)
    if mode == "kubernetes":
        return KubernetesDrain(timeout_s=timeout_s)
    raise ConfigError(f"--drain {mode!r}: expected one of {', '.join(DRAIN_MODES)}")
