"""Pure parsers: captured tool output (text) in, typed data out.

No I/O happens here. Malformed, truncated or binary input raises gpuhost.errors.ParseError; an
empty output where "tool missing" is a legal state gives a default (None, [] or state "absent").
"""

from __future__ import annotations

from gpuhost.parsers.container import parse_container_cli_info, parse_nvidia_ctk_version
from gpuhost.parsers.cuda import nvcc_release, parse_cudnn_header, parse_nvcc_version
from gpuhost.parsers.detect import detect_kind, parse_any
from gpuhost.parsers.driver import KernelModule, parse_proc_version
from gpuhost.parsers.frameworks import TorchInfo, parse_collect_env, parse_torch_probe
from gpuhost.parsers.nvidia_smi import (
    GpuInfo,
    SmiReport,
    classify_error,
    parse_output,
    parse_query_csv,
    parse_query_text,
    parse_table,
    parse_xml,
)
from gpuhost.parsers.packages import (
    Package,
    parse_apt_mark_showhold,
    parse_dpkg_query,
    parse_rpm_qa,
)
from gpuhost.parsers.topo import Topology, parse_topo

__all__ = [
    "GpuInfo",
    "KernelModule",
    "Package",
    "SmiReport",
    "Topology",
    "TorchInfo",
    "classify_error",
    "detect_kind",
    "nvcc_release",
    "parse_any",
    "parse_apt_mark_showhold",
    "parse_collect_env",
    "parse_container_cli_info",
    "parse_cudnn_header",
    "parse_dpkg_query",
    "parse_nvcc_version",
    "parse_nvidia_ctk_version",
    "parse_output",
    "parse_proc_version",
    "parse_query_csv",
    "parse_query_text",
    "parse_rpm_qa",
    "parse_table",
    "parse_topo",
    "parse_torch_probe",
    "parse_xml",
]
