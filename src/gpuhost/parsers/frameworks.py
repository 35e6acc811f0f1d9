"""Parse framework outputs: ``python -m torch.utils.collect_env``, our torch probe JSON line, and
short torch version pastes (``torch.__version__`` / ``torch.backends.cudnn.version()``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from gpuhost.errors import ParseError
from gpuhost.parsers._common import clean, first_line, is_blank, require_text
from gpuhost.parsers.cuda import cudnn_version_from_int
from gpuhost.parsers.smi_model import _ToDict

COLLECT_ENV_EXPECTED = "python -m torch.utils.collect_env output ('PyTorch version: ...')"
COLLECT_KEY_RE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9 ._/()-]*?):[ \t]*(?P<value>.*)$")
GPU_LINE_RE = re.compile(r"^\s*GPU\s+(?P<index>\d+):\s*(?P<name>.+?)\s*$")
LIB_VERSION_RE = re.compile(r"libcudnn\.so\.(\d+(?:\.\d+)*)|cudnn64_(\d+)\.dll", re.I)
TORCH_VERSION_RE = re.compile(r"^\s*(\d+\.\d+(?:\.\d+)?(?:[a-z]+\d*)?(?:\+[0-9A-Za-z.]+)?)\s*$")
CU_SUFFIX_RE = re.compile(r"\+cu(\d+)(\d)\b")
SMI_HEADER_RE = re.compile(
    r"NVIDIA-SMI\s+\S+\s+Driver Version:\s*(?P<driver>\S+)(?:\s+CUDA Version:\s*(?P<cuda>\S+))?"
)
NVCC_RE = re.compile(r"release\s+(\d+\.\d+),\s*V(\d+(?:\.\d+)+)")
PROBE_EXPECTED = 'the torch probe JSON line ({"torch": ..., "cuda": ..., ...} or {"error": ...})'


def _cudnn_candidates(value: str, following: list[str]) -> list[str]:
    """Versions named by the cuDNN library files collect_env lists, in order, without repeats."""
    found: list[str] = []
    for text in [value, *following]:
        match = LIB_VERSION_RE.search(text)
        if match and (match.group(1) or match.group(2)) not in found:
            found.append(match.group(1) or match.group(2))
    return found


def parse_collect_env(text: str) -> dict[str, Any]:
    """Read collect_env's report. Keys: torch_version, torch_cuda (CUDA used to build),
    cuda_runtime, cuda_available (bool|None), cudnn (the one version named by the listed cuDNN
    libraries, e.g. "8.7.0"; None if none or several), cudnn_candidates, gpus (list of names),
    driver_version, os, python_version."""
    text = require_text(text, COLLECT_ENV_EXPECTED)
    if "PyTorch version:" not in text:
        raise ParseError(f"expected {COLLECT_ENV_EXPECTED}, found: {first_line(text)!r}")
    lines = text.split("\n")
    values: dict[str, str] = {}
    following: dict[str, list[str]] = {}
    current: str | None = None
    for line in lines:
        match = COLLECT_KEY_RE.match(line)
        if match and not GPU_LINE_RE.match(line) and not line.startswith(("/", "[")):
            current = match.group("key").strip()
            values.setdefault(current, match.group("value").strip())
            following.setdefault(current, [])
        elif current is not None and line.strip():
            following[current].append(line.strip())
        elif not line.strip():
            current = None
    gpu_text = [values.get("GPU models and configuration", "")]
    gpu_text += following.get("GPU models and configuration", [])
    gpus = [m.group("name") for t in gpu_text if (m := GPU_LINE_RE.match(t))]
    available = clean(values.get("Is CUDA available"))
    cudnn = _cudnn_candidates(values.get("cuDNN version", ""), following.get("cuDNN version", []))
    return {
        "torch_version": clean(values.get("PyTorch version")),
        "torch_cuda": clean(values.get("CUDA used to build PyTorch")),
        "cuda_runtime": clean(values.get("CUDA runtime version")),
        "cuda_available": None if available is None else available.lower() in ("yes", "true"),
        "cudnn": cudnn[0] if len(cudnn) == 1 else None,
        "cudnn_candidates": cudnn,
        "gpus": gpus,
        "driver_version": clean(values.get("Nvidia driver version")),
        "os": clean(values.get("OS")),
        "python_version": clean(values.get("Python version")),
    }


@dataclass(frozen=True)
class TorchInfo(_ToDict):
    """What our probe reports about torch in one Python environment.

    Probe line (one JSON object on one line):
    ``{"torch": "2.3.1+cu121", "cuda": "12.1", "cudnn": 8902, "arch_list": ["sm_80", ...]}``
    or ``{"error": "ModuleNotFoundError: No module named 'torch'"}``.
    ``cudnn`` is decoded ("8.9.2"); ``cudnn_number`` keeps torch's integer.
    """

    version: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    cudnn_number: int | None = None
    arch_list: list[str] = field(default_factory=list)
    error: str | None = None


def parse_torch_probe(text: str) -> TorchInfo | None:
    """Parse the probe's JSON line (the last line that is a JSON object). Empty → None."""
    text = require_text(text, PROBE_EXPECTED)
    if is_blank(text):
        return None
    candidates = [ln.strip() for ln in text.split("\n") if ln.strip().startswith("{")]
    if not candidates:
        raise ParseError(f"expected {PROBE_EXPECTED}, found: {first_line(text)!r}")
    try:
        data = json.loads(candidates[-1])
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"expected {PROBE_EXPECTED}, found invalid JSON: {exc}") from exc
    if not isinstance(data, dict) or not ({"torch", "error"} & data.keys()):
        raise ParseError(f"expected {PROBE_EXPECTED}, found: {candidates[-1][:80]!r}")
    if data.get("error") is not None:
        return TorchInfo(error=str(data["error"]))
    cudnn_raw = data.get("cudnn")
    if cudnn_raw is not None and (not isinstance(cudnn_raw, int) or isinstance(cudnn_raw, bool)):
        raise ParseError(f"expected {PROBE_EXPECTED}: 'cudnn' must be an integer or null")
    arch_list = data.get("arch_list") or []
    if not isinstance(arch_list, list) or not all(isinstance(a, str) for a in arch_list):
        raise ParseError(f"expected {PROBE_EXPECTED}: 'arch_list' must be a list of strings")
    for key in ("torch", "cuda"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise ParseError(f"expected {PROBE_EXPECTED}: {key!r} must be a string or null")
    return TorchInfo(
        version=data.get("torch"),
        cuda=data.get("cuda"),
        cudnn=cudnn_version_from_int(cudnn_raw) if cudnn_raw is not None else None,
        cudnn_number=cudnn_raw,
        arch_list=list(arch_list),
    )


def parse_torch_version_text(text: str) -> dict[str, Any]:
    """Short pastes: a ``torch.__version__`` line, ``torch.backends.cudnn.version()`` output,
    an ``nvidia-smi`` header line and an ``nvcc -V`` release line, in any combination.
    Keys: torch_version, torch_cuda (from a "+cuXYZ" suffix), cudnn, driver_version,
    cuda_version (what the driver supports), nvcc_version."""
    text = require_text(text, "torch version output")
    lines = [ln.strip() for ln in text.split("\n")]
    result: dict[str, Any] = {
        "torch_version": None,
        "torch_cuda": None,
        "cudnn": None,
        "driver_version": None,
        "cuda_version": None,
        "nvcc_version": None,
    }
    for number, line in enumerate(lines):
        previous = lines[number - 1] if number else ""
        if "cudnn.version()" in previous and line.isdigit() and len(line) <= 9:
            result["cudnn"] = cudnn_version_from_int(int(line))
        elif "__version__" in previous and TORCH_VERSION_RE.match(line):
            result["torch_version"] = line
        smi = SMI_HEADER_RE.search(line)
        if smi:
            result["driver_version"], result["cuda_version"] = smi.group("driver", "cuda")
        nvcc = NVCC_RE.search(line)
        if nvcc:
            result["nvcc_version"] = nvcc.group(2)
    if result["torch_version"] is None:
        match = re.search(r"\btorch==(\S+)", text)
        result["torch_version"] = match.group(1) if match else None
    if result["torch_version"]:
        cu = CU_SUFFIX_RE.search(result["torch_version"])
        result["torch_cuda"] = f"{cu.group(1)}.{cu.group(2)}" if cu else None
    if not any(result.values()):
        raise ParseError(
            "expected torch version output (torch.__version__, cudnn.version(), nvidia-smi or "
            f"nvcc lines), found: {first_line(text)!r}"
        )
    return result
