"""Run the combined probe on this machine, without SSH (``gpuhost audit`` with no inventory)."""

from __future__ import annotations

from collections.abc import Sequence

from gpuhost import toolrun
from gpuhost.errors import HostError
from gpuhost.facts.build import build_host_facts
from gpuhost.facts.host_facts import HostFacts
from gpuhost.probe.script import build_probe
from gpuhost.probe.sections import split_sections

LOCAL_TIMEOUT_S = 600


def run_probe_locally(
    pythons: Sequence[str] | None = None, timeout: float = LOCAL_TIMEOUT_S
) -> str:
    """The probe's raw stdout on this machine (one ``sh`` process)."""
    script = build_probe(pythons)
    try:
        proc = toolrun.run(["sh", "-c", script], timeout)
    except OSError as exc:
        raise HostError("localhost", f"the probe did not start: {exc}") from exc
    if proc.timed_out:
        raise HostError("localhost", f"the probe did not finish in {timeout:g} s")
    if proc.returncode != 0:
        detail = proc.text(proc.stderr).strip()[:300]
        raise HostError("localhost", f"the probe failed (exit {proc.returncode}): {detail}")
    return proc.text()


def gather_local(pythons: Sequence[str] | None = None) -> HostFacts:
    """HostFacts of this machine."""
    return build_host_facts(split_sections(run_probe_locally(pythons)))
