"""Facts read from ``nvidia-smi`` on the target, parsed by :mod:`gpuhost.parsers.nvidia_smi`."""

from __future__ import annotations

from pyinfra.api import FactBase
from typing_extensions import override

from gpuhost.parsers.nvidia_smi import STATE_ABSENT, SmiReport, parse_output
from gpuhost.probe.script import SMI_NOT_FOUND, SMI_XML_CODE


class SmiQuery(FactBase[SmiReport]):
    """The full ``nvidia-smi -q -x`` report of every GPU, or the error state nvidia-smi printed.

    .. code:: python

        SmiReport(state="ok", driver_version="535.54.03", gpus=(GpuInfo(...), ...))
        SmiReport(state="driver-not-loaded", gpus=())   # no GPU / module not loaded (rc 9)
        SmiReport(state="absent", gpus=())              # nvidia-smi not installed
    """

    @staticmethod
    @override
    def default() -> SmiReport:
        return SmiReport(state=STATE_ABSENT, source="empty")

    @override
    def command(self) -> str:
        # nvidia-smi exits 9 without a driver; its message is the fact, so rc stays 0
        return SMI_XML_CODE

    @override
    def process(self, output: list[str]) -> SmiReport:
        text = "\n".join(output) + "\n"
        if text.strip() == SMI_NOT_FOUND:
            return self.default()
        return parse_output(text)
