"""The combined probe: one shell script that reads a host's GPU stack, and its section splitter."""

from gpuhost.probe.script import DEFAULT_PYTHONS, PROBE_VERSION, SECTION_NAMES, build_probe
from gpuhost.probe.sections import ProbeOutput, SectionOutput, join_lines, split_sections

__all__ = [
    "DEFAULT_PYTHONS",
    "PROBE_VERSION",
    "SECTION_NAMES",
    "ProbeOutput",
    "SectionOutput",
    "build_probe",
    "join_lines",
    "split_sections",
]
