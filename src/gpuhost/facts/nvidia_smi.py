"""Facts read from ``nvidia-smi`` on the target, parsed by :mod:`gpuhost.parsers.nvidia_smi`."""

from __future__ import annotations

from pyinfra.api import FactBase
from typing_extensions import override

from gpuhost.parsers.nvidia_smi import STATE_ABSENT, SmiReport, parse_output


class SmiQuery(FactBase[SmiReport]):
    """The full ``nvidia-smi -q -x`` report of every GPU, or the error state nvidia-smi printed.

    .. code:: python

        SmiReport(state="ok", driver_version="535.54.03", gpus=(GpuInfo(...), ...))
        SmiReport(state="driver-not-loaded", gpus=())   # no GPU / module not loaded (rc 9)
        SmiReport(state="absent", gpus=())              # nvidia-smi not installed
    """

    @override
    def requires_command(self) -> str:
        return "nvidia-smi"

    @staticmethod
    @override
    def default() -> SmiReport:
        return SmiReport(state=STATE_ABSENT, source="empty")

    @override
    def command(self) -> str:
        # nvidia-smi exits 9 without a driver; its message is the fact, so keep rc 0.
        return "LC_ALL=C nvidia-smi -q -x 2>&1 || true"

    @override
    def process(self, output: list[str]) -> SmiReport:
        return parse_output("\n".join(output) + "\n")
