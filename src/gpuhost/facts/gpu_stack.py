"""The ``GpuStack`` fact: the combined probe (one command) plus a pure ``process``.

.. code:: python

    facts = host.get_fact(GpuStack)                      # system python3 for frameworks
    facts = host.get_fact(GpuStack, pythons=["/opt/venv/bin/python"])
    facts.driver.smi.state        # "ok", "absent", "driver-not-loaded", ...
    facts.driver.loaded_module    # KernelModule(version="535.309.01", flavor="proprietary") | None
    facts.packages.held           # ["libnvidia-ml1", "nvidia-driver", ...]
"""

from __future__ import annotations

from collections.abc import Sequence

from pyinfra.api import FactBase
from typing_extensions import override

from gpuhost.facts.build import build_host_facts
from gpuhost.facts.host_facts import HostFacts
from gpuhost.probe.script import build_probe
from gpuhost.probe.sections import join_lines, split_sections


class GpuStack(FactBase[HostFacts]):
    """Everything about the host's GPU stack in one command (see docs/audit-report.md).

    ``pythons``: interpreters whose torch/TensorFlow builds are read (default ``["python3"]``;
    ``[]`` skips frameworks). Output that is not the probe's raises ParseError.
    """

    @override
    def command(self, pythons: Sequence[str] | None = None) -> str:
        return build_probe(pythons)

    @override
    def process(self, output: list[str]) -> HostFacts:
        return build_host_facts(split_sections(join_lines(output)))
