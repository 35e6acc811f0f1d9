"""Recognise a captured output by its content and read it with the right parser.

``detect_kind(text)`` names the kind (see KINDS); ``parse_any(text)`` returns a JSON-ready dict
with "kind" and, where they apply, the keys driver_version, cuda_version, nvml_version, gpus
(each with "name"), kernel_module_version, kernel_module_flavor, torch_version, torch_cuda,
state, plus kind-specific details. This is what ``gpuhost parse FILE`` shows.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

from gpuhost.errors import ParseError
from gpuhost.parsers import container, cuda, driver, frameworks, packages, smi_misc, topo
from gpuhost.parsers._common import first_line, is_blank, require_text
from gpuhost.parsers.nvidia_smi import (
    classify_error,
    parse_query_csv,
    parse_query_text,
    parse_table,
    parse_xml,
)
from gpuhost.parsers.smi_model import SmiReport
from gpuhost.parsers.smi_table import looks_like_table
from gpuhost.parsers.smi_text import looks_like_query_text
from gpuhost.parsers.xid import XID_RE, xid_events

KINDS = (
    "nvidia-smi-xml",
    "nvidia-smi-query-text",
    "nvidia-smi-table",
    "nvidia-smi-error",
    "nvidia-smi-csv",
    "nvidia-smi-version",
    "nvidia-smi-list",
    "nvidia-smi-nvlink",
    "nvidia-smi-topo",
    "nvidia-smi-dmon",
    "nvidia-smi-help-query",
    "nvidia-smi-usage-error",
    "proc-driver-version",
    "kernel-log",
    "nvcc-version",
    "cudnn-header",
    "dpkg",
    "rpm-qa",
    "torch-collect-env",
    "torch-probe",
    "torch-version",
    "nvidia-ctk-version",
    "nvidia-container-cli-version",
    "nvidia-container-cli-info",
)

XML_RE = re.compile(r"^\s*(<\?xml[^>]*\?>\s*)?(<!DOCTYPE[^>]*>\s*)?<nvidia_smi_log\b")
PROC_RE = re.compile(r"^NVRM version:\s*NVIDIA UNIX", re.M)
NVCC_RE = re.compile(r"Cuda compilation tools, release", re.I)
TORCH_PASTE_RE = re.compile(r"torch\.__version__|cudnn\.version\(\)")
PROBE_RE = re.compile(r'^\s*\{.*"(torch|error)"\s*:', re.M)
CUDNN_RE = re.compile(r"^\s*#\s*define\s+CUDNN_MAJOR\s+\d+", re.M)
SMI_VERSION_RE = re.compile(r"^NVIDIA-SMI version\s*:", re.M)
GPU_LIST_LINE_RE = re.compile(r"^GPU \d+: .+\(UUID: [^)]+\)\s*$")
MIG_LIST_LINE_RE = re.compile(r"^\s+MIG \S+\s+Device\s+\d+:")
CTK_RE = re.compile(r"NVIDIA Container Toolkit CLI version", re.I)
CLI_V_RE = re.compile(r"^cli-version:\s*\S+", re.M)
CLI_INFO_RE = re.compile(r"^NVRM version:\s+\S+.*\n(?:.*\n)*?CUDA version:", re.M)
DPKG_TABLE_RE = re.compile(r"^Desired=Unknown/Install/Remove/Purge/Hold", re.M)
DPKG_QUERY_LINE_RE = re.compile(r"^[a-z0-9][a-z0-9+.\-:]*\t[^\t]*\t[a-zA-Z ]{1,3}$")
RPM_LINE_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_+.\-]*\t\S+$")
TOPO_RE = re.compile(r"^\s+(?:\x1b\[[0-9;]*m)?GPU0(?:\s|$)", re.M)
DMON_RE = re.compile(r"^#\s*(?:Date\s+Time\s+)?gpu\s", re.M)
HELP_QUERY_RE = re.compile(r"List of valid properties to query for the switch")
CSV_HEADER_RE = re.compile(
    r"^[A-Za-z_][\w.]*(?: \[[^\]]+\])?(?:, [A-Za-z_][\w.]*(?: \[[^\]]+\])?)+$"
)
KERNEL_LOG_RE = re.compile(r"NVRM: ")
USAGE_ERROR_RE = re.compile(r"^ERROR: .*nvidia-smi -h", re.M)


def _lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


def detect_kind(text: str) -> str:
    """The kind of a captured output (one of KINDS). Empty, binary or unrecognised text raises
    ParseError saying what was found."""
    text = require_text(text, "a captured tool output")
    if is_blank(text):
        raise ParseError("expected a captured tool output, found an empty text")
    lines = _lines(text)
    stripped = text.lstrip()
    if XML_RE.match(stripped):
        return "nvidia-smi-xml"
    if KERNEL_LOG_RE.search(text) and XID_RE.search(text):
        # before the error outputs: a kernel log with an Xid 79 says "fallen off the bus" too
        return "kernel-log"
    if classify_error(text) is not None:
        return "nvidia-smi-error"
    if PROC_RE.search(text):
        return "proc-driver-version"
    if "PyTorch version:" in text:
        return "torch-collect-env"
    if TORCH_PASTE_RE.search(text):
        return "torch-version"
    if PROBE_RE.search(text):
        return "torch-probe"
    if looks_like_query_text(text):
        return "nvidia-smi-query-text"
    if looks_like_table(text):
        return "nvidia-smi-table"
    if NVCC_RE.search(text):
        return "nvcc-version"
    if CUDNN_RE.search(text):
        return "cudnn-header"
    if SMI_VERSION_RE.search(text):
        return "nvidia-smi-version"
    if GPU_LIST_LINE_RE.match(lines[0]):
        rest = lines[1:]
        if all(MIG_LIST_LINE_RE.match(line) for line in rest):
            return "nvidia-smi-list"
        return "nvidia-smi-nvlink"
    if CTK_RE.search(text):
        return "nvidia-ctk-version"
    if CLI_V_RE.search(text):
        return "nvidia-container-cli-version"
    if CLI_INFO_RE.search(text):
        return "nvidia-container-cli-info"
    if DPKG_TABLE_RE.search(text) or all(DPKG_QUERY_LINE_RE.match(line) for line in lines):
        return "dpkg"
    if TOPO_RE.search(text):
        return "nvidia-smi-topo"
    if DMON_RE.search(text):
        return "nvidia-smi-dmon"
    if HELP_QUERY_RE.search(text):
        return "nvidia-smi-help-query"
    if CSV_HEADER_RE.match(lines[0].strip()):
        return "nvidia-smi-csv"
    if KERNEL_LOG_RE.search(text):
        return "kernel-log"
    if USAGE_ERROR_RE.search(text):
        return "nvidia-smi-usage-error"
    if all(RPM_LINE_RE.match(line.strip()) for line in lines):
        return "rpm-qa"
    raise ParseError(
        "unrecognised output: not an nvidia-smi, driver, CUDA, package, container toolkit or "
        f"torch capture gpuhost knows; found: {first_line(text)!r} "
        "('gpuhost parse --help' lists the outputs it reads)"
    )


def _smi(report: SmiReport) -> dict[str, Any]:
    data = report.to_dict()
    data.pop("source", None)
    return data


def _csv(text: str) -> dict[str, Any]:
    rows = parse_query_csv(text)
    gpus: dict[str, dict[str, Any]] = {}
    for row in rows:
        name = row.get("name") or row.get("gpu_name")
        key = row.get("uuid") or row.get("gpu_uuid") or row.get("pci.bus_id") or str(name)
        if name is not None:
            gpus.setdefault(key, {"name": name, "uuid": row.get("uuid") or row.get("gpu_uuid")})
    drivers = {row["driver_version"] for row in rows if row.get("driver_version")}
    return {
        "driver_version": drivers.pop() if len(drivers) == 1 else None,
        "gpus": list(gpus.values()),
        "rows": rows,
    }


def _proc(text: str) -> dict[str, Any]:
    module = driver.parse_proc_version(text)
    assert module is not None  # detect_kind saw an NVRM line
    return {
        "kernel_module_version": module.version,
        "kernel_module_flavor": module.flavor,
        "kernel_module_arch": module.arch,
        "raw": module.raw,
    }


def _nvcc(text: str) -> dict[str, Any]:
    parsed = cuda.parse_nvcc(text)
    assert parsed is not None
    return {"cuda_version": parsed[0], "cuda_release": parsed[1]}


def _collect_env(text: str) -> dict[str, Any]:
    env = frameworks.parse_collect_env(text)
    env["gpus"] = [{"name": name} for name in env["gpus"]]
    return env


def _probe(text: str) -> dict[str, Any]:
    info = frameworks.parse_torch_probe(text)
    assert info is not None
    return {
        "torch_version": info.version,
        "torch_cuda": info.cuda,
        "cudnn": info.cudnn,
        "arch_list": info.arch_list,
        "error": info.error,
    }


def _cli_info(text: str) -> dict[str, Any]:
    info = container.parse_container_cli_info(text)
    assert info is not None
    return {
        "driver_version": info.driver_version,
        "cuda_version": info.cuda_version,
        "gpus": [{"name": d.model, **d.to_dict()} for d in info.devices],
    }


def _topo(text: str) -> dict[str, Any]:
    topology = topo.parse_topo(text)
    assert topology is not None
    return {"topology": topology.to_dict(), "nvlink": topology.nvlink}


def _toolkit_version(text: str) -> dict[str, Any]:
    """``nvidia-ctk --version`` or ``nvidia-container-cli -V`` (one parser reads both)."""
    return {"container_toolkit_version": container.parse_nvidia_ctk_version(text)}


def _gpu_names(gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"name": g["name"], **{k: v for k, v in g.items() if k != "name"}} for g in gpus]


READERS: dict[str, Callable[[str], dict[str, Any]]] = {
    "nvidia-smi-xml": lambda t: _smi(parse_xml(t)),
    "nvidia-smi-query-text": lambda t: _smi(parse_query_text(t)),
    "nvidia-smi-table": lambda t: _smi(parse_table(t)),
    "nvidia-smi-error": lambda t: _smi(parse_xml(t)),
    "nvidia-smi-csv": _csv,
    "nvidia-smi-version": lambda t: dict(smi_misc.parse_smi_version(t) or {}),
    "nvidia-smi-list": lambda t: {"gpus": _gpu_names(smi_misc.parse_gpu_list(t))},
    "nvidia-smi-nvlink": lambda t: {"gpus": _gpu_names(smi_misc.parse_nvlink_status(t))},
    "nvidia-smi-topo": _topo,
    "nvidia-smi-dmon": lambda t: {},
    "nvidia-smi-help-query": lambda t: {},
    "nvidia-smi-usage-error": lambda t: {"message": first_line(t, limit=200)},
    "proc-driver-version": _proc,
    "kernel-log": lambda t: {
        "nvrm_messages": driver.parse_nvrm_log(t),
        "xid_events": [dataclasses.asdict(e) for e in xid_events(t)],
    },
    "nvcc-version": _nvcc,
    "cudnn-header": lambda t: {"cudnn_version": cuda.parse_cudnn_header(t)},
    "dpkg": lambda t: {"packages": [p.to_dict() for p in packages.parse_dpkg_query(t)]},
    "rpm-qa": lambda t: {"packages": [p.to_dict() for p in packages.parse_rpm_qa(t)]},
    "torch-collect-env": _collect_env,
    "torch-probe": _probe,
    "torch-version": frameworks.parse_torch_version_text,
    "nvidia-ctk-version": _toolkit_version,
    "nvidia-container-cli-version": _toolkit_version,
    "nvidia-container-cli-info": _cli_info,
}


def parse_any(text: str) -> dict[str, Any]:
    """Detect the kind and parse; the result is JSON-serialisable and starts with "kind"."""
    kind = detect_kind(text)
    text = require_text(text, kind)
    result: dict[str, Any] = {"kind": kind}
    result.update(READERS[kind](text))
    json.dumps(result)  # guarantee: JSON-ready (raises TypeError in development if not)
    return result


SUMMARY_KEYS = (
    "state",
    "driver_version",
    "cuda_version",
    "nvml_version",
    "kernel_module_version",
    "kernel_module_flavor",
    "torch_version",
    "torch_cuda",
    "cudnn",
    "cudnn_version",
    "container_toolkit_version",
    "message",
)


def summary_lines(result: dict[str, Any]) -> list[str]:
    """What ``gpuhost parse`` prints of a ``parse_any`` result (without ``--json``)."""
    lines = [f"kind: {result['kind']}"]
    for key in SUMMARY_KEYS:
        if result.get(key) is not None:
            lines.append(f"{key}: {result[key]}")
    for i, gpu in enumerate(result.get("gpus") or []):
        # a -q -d CLOCK report has no product name: the bus id alone names the GPU
        details = [str(gpu["name"])] if gpu.get("name") else []
        if gpu.get("pci_bus_id"):
            details.append(str(gpu["pci_bus_id"]))
        if gpu.get("uuid"):
            details.append(str(gpu["uuid"]))
        lines.append(f"gpu {gpu.get('index', i)}: " + (", ".join(details) or "(no name)"))
    if "packages" in result:
        lines.append(f"packages: {len(result['packages'])}")
        for package in result["packages"]:
            lines.append(f"  {package['status']:3} {package['name']} {package['version'] or '-'}")
    if "rows" in result:
        lines.append(f"rows: {len(result['rows'])}")
    if "nvlink" in result:
        lines.append(f"nvlink: {'yes' if result['nvlink'] else 'no'}")
    return lines
