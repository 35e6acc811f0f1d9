#!/usr/bin/env python3
"""GPU smoke test: copied to a host and run there with the host's own Python.

Standalone on purpose: it needs only the standard library and the framework under test (PyTorch
and/or TensorFlow), never gpuhost, and keeps to Python 3.8 syntax. It prints exactly one JSON
document on stdout (schema below) and exits 0 whatever it finds; ``gpuhost.smoke.judge`` decides.

    python3 script.py [--framework torch|tensorflow|all] [--quick] [--timeout SECONDS]

Every check is recorded as PASS, FAIL or COULD-NOT-RUN with a reason. An exception inside a check
becomes that check's FAIL with the error text. Each framework runs in a child process of this
script, so a crash (segfault, hung driver call) in one framework is reported as a FAIL of that
framework's ``run`` check and the document is still printed.

Document (schema 1)::

    {"schema": 1, "host": str, "python": {"executable": str, "version": str},
     "started": str, "duration_s": float,
     "options": {"frameworks": [str], "quick": bool, "timeout_s": float},
     "nvidia_smi": {"available": bool, "reason": str, "driver_version": str|null,
                    "cuda_version": str|null},
     "gpus": [{"index": int, "name": str, "uuid": str|null, "pci_bus_id": str|null,
               "driver_version": str|null, "memory_total_mib": int|null,
               "compute_cap": str|null, "mig_devices": int}],
     "frameworks": {"torch": FRAMEWORK, "tensorflow": FRAMEWORK}}

    FRAMEWORK = {"installed": bool, "reason": str, "version": str|null, "cuda": str|null,
                 "cudnn": str|null, "arch_list": [str], "devices": [DEVICE],
                 "checks": [CHECK]}
    DEVICE = {"index": int, "name": str, "capability": str, "total_memory_bytes": int}
    CHECK = {"name": str, "outcome": "PASS"|"FAIL"|"COULD-NOT-RUN", "reason": str,
             "device": int|null, "value": any JSON, "numbers": {str: number|null}}
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from typing import Any

SCHEMA = 1
PASS = "PASS"
FAIL = "FAIL"
COULD_NOT_RUN = "COULD-NOT-RUN"
OUTCOMES = (PASS, FAIL, COULD_NOT_RUN)
FRAMEWORKS = ("torch", "tensorflow")

# Per-device check names, in the order they run (also reported, as COULD-NOT-RUN, without a GPU).
TORCH_DEVICE_CHECKS = (
    "arch_supported",
    "tensor_to_device",
    "matmul_correct",
    "cudnn_conv",
    "autocast_fp16",
    "autocast_bf16",
    "h2d_bandwidth",
    "d2h_bandwidth",
    "matmul_tflops",
)
TF_DEVICE_CHECKS = ("matmul_on_gpu",)

# Tolerances: relative error = max |got - reference| / max |reference|, reference in float64.
MATMUL_FP32_TOLERANCE = 1e-3
AUTOCAST_TOLERANCE = {"float16": 1e-2, "bfloat16": 5e-2}
CONV_TOLERANCE = 1e-3

SMI_QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "driver_version",
    "memory.total",
    "compute_cap",
)
SMI_TIMEOUT_S = 30.0
STDERR_TAIL = 2000

GPU_LINE_RE = re.compile(r"^GPU (\d+): (.+?)(?: \(UUID: ([^)]+)\))?\s*$")
MIG_LINE_RE = re.compile(r"^\s+MIG .*Device\s+\d+:")
# Header of plain ``nvidia-smi``; drivers from 610 on say "KMD Version" / "CUDA UMD Version".
DRIVER_RE = re.compile(r"(?:Driver|KMD) Version:\s*([0-9][0-9.]*)")
CUDA_RE = re.compile(r"CUDA (?:UMD )?Version:\s*([0-9][0-9.]*)")
ARCH_RE = re.compile(r"^(sm|compute)_(\d+)([a-z]?)$")


# --------------------------------------------------------------------------- pure helpers


def make_check(
    name: str,
    outcome: str,
    reason: str,
    device: int | None = None,
    value: Any = None,
    numbers: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One check record; non-finite numbers become null (JSON has no NaN)."""
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, not {outcome!r}")
    clean: dict[str, Any] = {}
    for key, number in (numbers or {}).items():
        if (
            isinstance(number, bool)
            or not isinstance(number, (int, float))
            or isinstance(number, float)
            and not math.isfinite(number)
        ):
            clean[key] = None
        else:
            clean[key] = number
    return {
        "name": name,
        "outcome": outcome,
        "reason": reason,
        "device": device,
        "value": value,
        "numbers": clean,
    }


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """'12.4' -> (12, 4); '8.9.7.29' -> (8, 9, 7, 29); None or junk -> None."""
    if not text:
        return None
    match = re.match(r"^\s*(\d+(?:\.\d+)*)", str(text))
    if not match:
        return None
    return tuple(int(part) for part in match.group(1).split("."))


def cudnn_version_text(number: Any) -> str | None:
    """torch.backends.cudnn.version() gives 8902 (8.9.2) or 90100 (9.1.0); None stays None."""
    if number is None:
        return None
    if isinstance(number, str):
        return number
    value = int(number)
    if value >= 10000:  # cuDNN 9+: major*10000 + minor*100 + patch
        return f"{value // 10000}.{value // 100 % 100}.{value % 100}"
    return f"{value // 1000}.{value // 100 % 10}.{value % 100}"


def parse_smi_list(text: str) -> list[dict[str, Any]]:
    """Parse ``nvidia-smi -L``: one dict per physical GPU, MIG instances counted under it."""
    gpus: list[dict[str, Any]] = []
    for line in text.splitlines():
        match = GPU_LINE_RE.match(line.rstrip())
        if match:
            gpus.append(
                {
                    "index": int(match.group(1)),
                    "name": match.group(2).strip(),
                    "uuid": match.group(3),
                    "mig_devices": 0,
                }
            )
        elif MIG_LINE_RE.match(line) and gpus:
            gpus[-1]["mig_devices"] += 1
    return gpus


def parse_smi_query(text: str, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """Parse ``--query-gpu=FIELDS --format=csv,noheader,nounits`` output into dicts."""
    rows: list[dict[str, Any]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != len(fields):
            raise ValueError(
                f"nvidia-smi query line has {len(parts)} fields, expected {len(fields)}: {line!r}"
            )
        row: dict[str, Any] = {}
        for position, field in enumerate(fields):
            raw = parts[position]
            value: Any = None if raw in ("", "[N/A]", "N/A", "[Not Supported]") else raw
            if field == "index" and value is not None:
                value = int(value)
            elif field == "memory.total" and value is not None:
                value = int(float(value))
            row[field] = value
        rows.append(row)
    return rows


def parse_smi_header(text: str) -> tuple[str | None, str | None]:
    """(driver version, driver's CUDA version) from the plain ``nvidia-smi`` table header."""
    driver = DRIVER_RE.search(text)
    cuda = CUDA_RE.search(text)
    return (driver.group(1) if driver else None, cuda.group(1) if cuda else None)


def capability_text(major: int, minor: int) -> str:
    return f"{major}.{minor}"


def arch_supports(arch_list: list[str], capability: str) -> tuple[bool, str]:
    """Can a build with ``arch_list`` (e.g. ['sm_80', 'sm_90', 'compute_90']) run on ``capability``?

    Rules (CUDA compatibility): a cubin for sm_XY runs on X.Z with Z >= Y (same major), except
    arch-specific 'a' targets; PTX (compute_XY) is JIT-compiled for any capability >= X.Y.
    Returns (supported, how).
    """
    cc = version_tuple(capability)
    if cc is None or len(cc) < 2:
        return False, f"compute capability {capability!r} is not of the form MAJOR.MINOR"
    major, minor = cc[0], cc[1]
    wanted = major * 10 + minor
    binary_compatible: list[str] = []
    ptx: list[str] = []
    for entry in arch_list:
        match = ARCH_RE.match(entry.strip())
        if not match:
            continue
        kind, number, suffix = match.group(1), int(match.group(2)), match.group(3)
        arch_major, arch_minor = number // 10, number % 10
        if kind == "sm" and number == wanted:
            return True, f"{entry} is in the arch list"
        if kind == "sm" and not suffix and arch_major == major and arch_minor < minor:
            binary_compatible.append(entry)
        if kind == "compute" and not suffix and number <= wanted:
            ptx.append(entry)
    if binary_compatible:
        return (
            True,
            f"no sm_{wanted}, but {binary_compatible[-1]} binaries run on {capability} "
            "(same major)",
        )
    if ptx:
        return (
            True,
            f"no sm_{wanted}; PTX {ptx[-1]} is JIT-compiled by the driver (slow first start)",
        )
    return (
        False,
        f"sm_{wanted} (compute capability {capability}) is not in the arch list "
        f"[{', '.join(arch_list)}]",
    )


def rel_error(got: Any, reference: Any) -> float:
    """max |got - reference| / max |reference| for two tensors/arrays (float64 math)."""
    diff = float((got - reference).abs().max())
    scale = float(reference.abs().max())
    return diff / scale if scale > 0 else diff


def error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= STDERR_TAIL else text[:STDERR_TAIL] + "..."


# --------------------------------------------------------------------------- nvidia-smi


def _run(command: list[str], timeout: float = SMI_TIMEOUT_S) -> tuple[int, str]:
    proc = subprocess.run(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout,
        text=True, errors="replace",
        env=dict(os.environ, LC_ALL="C"),
    )
    return proc.returncode, proc.stdout


def probe_nvidia_smi() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What the driver sees: ({available, reason, driver_version, cuda_version}, gpus)."""
    info: dict[str, Any] = {
        "available": False,
        "reason": "",
        "driver_version": None,
        "cuda_version": None,
    }
    smi = shutil.which("nvidia-smi")
    if smi is None:
        info["reason"] = (
            "nvidia-smi is not on PATH: the NVIDIA driver utilities are not installed "
            "(or live outside PATH)"
        )
        return info, []
    try:
        code, listing = _run([smi, "-L"])
    except (OSError, subprocess.SubprocessError) as exc:
        info["reason"] = f"nvidia-smi -L could not run: {error_text(exc)}"
        return info, []
    if code != 0:
        first = listing.strip().splitlines()[0] if listing.strip() else "(no output)"
        info["reason"] = f"nvidia-smi -L exited {code}: {first}"
        return info, []
    gpus = parse_smi_list(listing)
    info["available"] = True
    info["reason"] = f"nvidia-smi -L lists {len(gpus)} GPU(s)"
    if not gpus and listing.strip():
        info["reason"] = f"nvidia-smi -L lists no GPU: {listing.strip().splitlines()[0]}"
    try:
        _code, table = _run([smi])
        info["driver_version"], info["cuda_version"] = parse_smi_header(table)
    except (OSError, subprocess.SubprocessError):
        pass
    fields = SMI_QUERY_FIELDS
    for attempt in (fields, fields[:-1]):  # compute_cap needs a driver from 2021 or later
        try:
            code, text = _run(
                [smi, "--query-gpu=" + ",".join(attempt), "--format=csv,noheader,nounits"]
            )
            if code != 0:
                continue
            rows = parse_smi_query(text, attempt)
        except (OSError, subprocess.SubprocessError, ValueError):
            continue
        by_index = {row["index"]: row for row in rows}
        for gpu in gpus:
            row = by_index.get(gpu["index"], {})
            gpu["pci_bus_id"] = row.get("pci.bus_id")
            gpu["driver_version"] = row.get("driver_version")
            gpu["memory_total_mib"] = row.get("memory.total")
            gpu["compute_cap"] = row.get("compute_cap")
            if row.get("uuid") and not gpu.get("uuid"):
                gpu["uuid"] = row["uuid"]
        break
    for gpu in gpus:
        for key in ("pci_bus_id", "driver_version", "memory_total_mib", "compute_cap"):
            gpu.setdefault(key, None)
        if info["driver_version"] is None and gpu["driver_version"]:
            info["driver_version"] = gpu["driver_version"]
    return info, gpus


# --------------------------------------------------------------------------- check runner


class Recorder:
    """Runs checks, turns exceptions into FAILs and hands each record to ``emit``."""

    def __init__(self, emit: Callable[[dict[str, Any]], None], deadline: float) -> None:
        self.emit = emit
        self.deadline = deadline

    def meta(self, **fields: Any) -> None:
        self.emit({"meta": fields})

    def record(self, check: dict[str, Any]) -> dict[str, Any]:
        self.emit({"check": check})
        return check

    def skip(self, name: str, reason: str, device: int | None = None) -> dict[str, Any]:
        return self.record(make_check(name, COULD_NOT_RUN, reason, device))

    def run(
        self, name: str, func: Callable[[], dict[str, Any]], device: int | None = None
    ) -> dict[str, Any]:
        """``func`` returns a check dict; an exception becomes FAIL with the error text."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return self.skip(name, "the time budget (--timeout) was used up before it", device)
        self.emit({"started": {"name": name, "device": device}})
        try:
            check = func()
        except Exception as exc:  # any error inside one check is that check's FAIL
            check = make_check(name, FAIL, error_text(exc), device)
        return self.record(check)


def import_framework(rec: Recorder, module: str) -> Any:
    """The imported module, or None after recording why: not installed (COULD-NOT-RUN) or a
    broken install (FAIL with the import error)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            reason = f"{module} is not installed in {sys.executable}"
            rec.meta(installed=False, reason=reason)
            rec.skip("import", reason)
            return None
        failure: Exception = exc
    except Exception as exc:  # a broken install: missing CUDA libraries, ABI errors...
        failure = exc
    rec.meta(installed=True, reason=f"import {module} failed")
    rec.record(make_check("import", FAIL, f"import {module} failed: {error_text(failure)}"))
    return None


# --------------------------------------------------------------------------- PyTorch


def torch_checks(
    rec: Recorder, smi: dict[str, Any], gpus: list[dict[str, Any]], quick: bool
) -> None:
    torch = import_framework(rec, "torch")
    if torch is None:
        return

    cudnn_number = None
    try:
        cudnn_number = torch.backends.cudnn.version()
    except Exception:
        cudnn_number = None
    try:
        arch_list = list(torch.cuda.get_arch_list())
    except Exception:
        arch_list = []
    wheel_cuda = torch.version.cuda
    rec.meta(
        installed=True,
        reason=f"torch {torch.__version__} imported from {os.path.dirname(torch.__file__)}",
        version=str(torch.__version__),
        cuda=wheel_cuda,
        cudnn=cudnn_version_text(cudnn_number),
        arch_list=arch_list,
    )
    rec.record(
        make_check(
            "import", PASS, f"torch {torch.__version__} imported", value=str(torch.__version__)
        )
    )

    available = False
    why_not = ""
    try:
        available = bool(torch.cuda.is_available())
    except Exception as exc:
        why_not = error_text(exc)
    smi_count = len(gpus) if smi["available"] else None
    if not available:
        if wheel_cuda is None:
            why_not = f"torch {torch.__version__} is a CPU-only build (torch.version.cuda is None)"
        elif not why_not:
            why_not = "torch.cuda.is_available() is False"
            try:
                torch.cuda.init()
            except Exception as exc:
                why_not += f" ({error_text(exc)})"
        driver_side = (
            f"the driver sees {smi_count} GPU(s)"
            if smi_count
            else f"no GPU visible: {smi['reason']}"
        )
        reason = f"{why_not}; {driver_side}"
        outcome = FAIL if smi_count else COULD_NOT_RUN
        rec.record(make_check("cuda_available", outcome, reason, value=False))
    else:
        rec.record(
            make_check("cuda_available", PASS, "torch.cuda.is_available() is True", value=True)
        )

    rec.run("cuda_driver_compat", lambda: _torch_cuda_driver(wheel_cuda, smi))

    no_cuda = f"CUDA is not usable from torch: {why_not}"
    if not available:
        rec.skip("device_count", no_cuda)
        for name in TORCH_DEVICE_CHECKS:
            rec.skip(name, no_cuda)
        rec.skip("nccl_allreduce", no_cuda)
        return

    count = int(torch.cuda.device_count())
    devices: list[dict[str, Any]] = []
    for index in range(count):
        props = torch.cuda.get_device_properties(index)
        devices.append(
            {
                "index": index,
                "name": str(props.name),
                "capability": capability_text(props.major, props.minor),
                "total_memory_bytes": int(props.total_memory),
            }
        )
    rec.meta(devices=devices)
    rec.run("device_count", lambda: _torch_device_count(count, smi, gpus))

    torch.backends.cuda.matmul.allow_tf32 = False  # correctness checks compare true fp32
    torch.backends.cudnn.allow_tf32 = False
    for dev in devices:
        index = dev["index"]
        steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            ("arch_supported", partial(_torch_arch, index, dev["capability"], arch_list)),
            ("tensor_to_device", partial(_torch_to_device, torch, index)),
            ("matmul_correct", partial(_torch_matmul, torch, index, quick)),
            ("cudnn_conv", partial(_torch_conv, torch, index)),
            ("autocast_fp16", partial(_torch_autocast, torch, index, "float16")),
            ("autocast_bf16", partial(_torch_autocast, torch, index, "bfloat16")),
            ("h2d_bandwidth", partial(_torch_copy_bandwidth, torch, index, "h2d", quick)),
            ("d2h_bandwidth", partial(_torch_copy_bandwidth, torch, index, "d2h", quick)),
            ("matmul_tflops", partial(_torch_tflops, torch, index, quick)),
        ]
        for name, func in steps:
            with torch.cuda.device(index):
                rec.run(name, func, index)
        torch.cuda.empty_cache()
    rec.run("nccl_allreduce", lambda: _torch_nccl(torch, count, quick, rec.deadline))


def _torch_cuda_driver(wheel_cuda: str | None, smi: dict[str, Any]) -> dict[str, Any]:
    name = "cuda_driver_compat"
    driver_cuda = smi.get("cuda_version")
    value = {"wheel_cuda": wheel_cuda, "driver_cuda": driver_cuda}
    if wheel_cuda is None:
        return make_check(
            name, COULD_NOT_RUN, "CPU-only torch build has no CUDA version", value=value
        )
    if driver_cuda is None:
        why = smi["reason"] if not smi["available"] else "nvidia-smi header shows no CUDA Version"
        return make_check(name, COULD_NOT_RUN, f"driver's CUDA version unknown: {why}", value=value)
    wheel_t, driver_t = version_tuple(wheel_cuda), version_tuple(driver_cuda)
    if wheel_t is None or driver_t is None:
        return make_check(
            name, FAIL, f"unparseable CUDA versions {wheel_cuda!r} / {driver_cuda!r}", value=value
        )
    if wheel_t[:2] > driver_t[:2]:
        return make_check(
            name,
            FAIL,
            f"the wheel's CUDA {wheel_cuda} is newer than the driver's CUDA {driver_cuda} "
            "(nvidia-smi): upgrade the "
            f"driver or install a wheel built for CUDA <= {driver_cuda}",
            value=value,
        )
    return make_check(
        name,
        PASS,
        f"the wheel's CUDA {wheel_cuda} <= the driver's CUDA {driver_cuda}",
        value=value,
    )


def _torch_device_count(
    count: int, smi: dict[str, Any], gpus: list[dict[str, Any]]
) -> dict[str, Any]:
    name = "device_count"
    if not smi["available"]:
        return make_check(
            name,
            COULD_NOT_RUN,
            f"torch sees {count} GPU(s); cannot compare: {smi['reason']}",
            value=count,
        )
    expected = len(gpus)
    note = ""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [entry for entry in visible.split(",") if entry.strip()]
        expected = min(expected, len(entries))
        note = f" (CUDA_VISIBLE_DEVICES={visible!r} limits it to {expected})"
    if any(gpu.get("mig_devices") for gpu in gpus):
        note += " (MIG enabled: CUDA shows MIG instances, not whole GPUs)"
    numbers = {"torch": count, "nvidia_smi": len(gpus), "expected": expected}
    if count == expected:
        return make_check(
            name,
            PASS,
            f"torch sees {count} GPU(s), as nvidia-smi{note}",
            value=count,
            numbers=numbers,
        )
    return make_check(
        name,
        FAIL,
        f"torch sees {count} GPU(s) but nvidia-smi lists {len(gpus)}{note}",
        value=count,
        numbers=numbers,
    )


def _torch_arch(index: int, capability: str, arch_list: list[str]) -> dict[str, Any]:
    ok, how = arch_supports(arch_list, capability)
    return make_check(
        "arch_supported",
        PASS if ok else FAIL,
        how,
        index,
        value={"capability": capability, "arch_list": arch_list},
    )


def _torch_to_device(torch: Any, index: int) -> dict[str, Any]:
    host = torch.arange(4096, dtype=torch.float32)
    on_gpu = host.to(f"cuda:{index}")
    back = on_gpu.cpu()
    where = str(on_gpu.device)
    if on_gpu.device.type != "cuda" or on_gpu.device.index != index:
        return make_check(
            "tensor_to_device",
            FAIL,
            f"tensor landed on {where}, not cuda:{index}",
            index,
            value=where,
        )
    if not bool(torch.equal(back, host)):
        return make_check(
            "tensor_to_device", FAIL, "round trip changed the data", index, value=where
        )
    return make_check(
        "tensor_to_device", PASS, f"tensor on {where} and back unchanged", index, value=where
    )


def _torch_matmul(torch: Any, index: int, quick: bool) -> dict[str, Any]:
    size = 256 if quick else 1024
    gen = torch.Generator().manual_seed(1234 + index)
    a = torch.randn(size, size, generator=gen, dtype=torch.float32)
    b = torch.randn(size, size, generator=gen, dtype=torch.float32)
    device = f"cuda:{index}"
    got = (a.to(device) @ b.to(device)).cpu().double()
    reference = a.double() @ b.double()
    err = rel_error(got, reference)
    numbers = {"max_rel_error": err, "tolerance": MATMUL_FP32_TOLERANCE, "size": size}
    if not bool(torch.isfinite(got).all()) or not err <= MATMUL_FP32_TOLERANCE:
        return make_check(
            "matmul_correct",
            FAIL,
            f"fp32 {size}x{size} matmul on {device} differs from the CPU result: "
            f"relative error {err:.3g} > tolerance {MATMUL_FP32_TOLERANCE:.1g}",
            index,
            numbers=numbers,
        )
    return make_check(
        "matmul_correct",
        PASS,
        f"fp32 {size}x{size} matmul matches the CPU within {err:.3g}",
        index,
        numbers=numbers,
    )


def _torch_conv(torch: Any, index: int) -> dict[str, Any]:
    name = "cudnn_conv"
    if not torch.backends.cudnn.is_available():
        return make_check(name, FAIL, "torch.backends.cudnn.is_available() is False", index)
    if not torch.backends.cudnn.enabled:
        return make_check(name, FAIL, "torch.backends.cudnn.enabled is False", index)
    functional: Any = importlib.import_module("torch.nn.functional")
    gen = torch.Generator().manual_seed(99 + index)
    x = torch.randn(8, 16, 32, 32, generator=gen)
    w = torch.randn(32, 16, 3, 3, generator=gen)
    device = f"cuda:{index}"
    got = functional.conv2d(x.to(device), w.to(device), padding=1).cpu().double()
    reference = functional.conv2d(x.double(), w.double(), padding=1)
    err = rel_error(got, reference)
    numbers = {"max_rel_error": err, "tolerance": CONV_TOLERANCE}
    version = cudnn_version_text(torch.backends.cudnn.version())
    if not err <= CONV_TOLERANCE:
        return make_check(
            name,
            FAIL,
            f"cuDNN {version} conv2d differs from the CPU: relative error {err:.3g}",
            index,
            value=version,
            numbers=numbers,
        )
    return make_check(
        name,
        PASS,
        f"cuDNN {version} conv2d matches the CPU within {err:.3g}",
        index,
        value=version,
        numbers=numbers,
    )


def _torch_autocast(torch: Any, index: int, dtype_name: str) -> dict[str, Any]:
    name = "autocast_fp16" if dtype_name == "float16" else "autocast_bf16"
    dtype = getattr(torch, dtype_name)
    major, minor = torch.cuda.get_device_capability(index)
    if dtype_name == "bfloat16" and major < 8:  # no native bf16 before Ampere
        return make_check(
            name,
            COULD_NOT_RUN,
            f"bfloat16 is not supported on compute capability {major}.{minor} (needs 8.0 or newer)",
            index,
        )
    gen = torch.Generator().manual_seed(7 + index)
    a = torch.randn(256, 256, generator=gen)
    b = torch.randn(256, 256, generator=gen)
    device = f"cuda:{index}"
    with torch.autocast(device_type="cuda", dtype=dtype):
        out = a.to(device) @ b.to(device)
    if out.dtype != dtype:
        return make_check(name, FAIL, f"autocast produced {out.dtype}, expected {dtype}", index)
    err = rel_error(out.float().cpu().double(), a.double() @ b.double())
    tolerance = AUTOCAST_TOLERANCE[dtype_name]
    numbers = {"max_rel_error": err, "tolerance": tolerance}
    if not err <= tolerance:
        return make_check(
            name,
            FAIL,
            f"{dtype_name} autocast matmul relative error {err:.3g} > {tolerance:.1g}",
            index,
            numbers=numbers,
        )
    return make_check(
        name, PASS, f"{dtype_name} autocast matmul within {err:.3g} of fp64", index, numbers=numbers
    )


def _torch_copy_bandwidth(torch: Any, index: int, direction: str, quick: bool) -> dict[str, Any]:
    name = f"{direction}_bandwidth"
    nbytes = (64 if quick else 256) * 1024 * 1024
    iterations = 5 if quick else 20
    elements = nbytes // 4
    host = torch.empty(elements, dtype=torch.float32, pin_memory=True)
    dev = torch.empty(elements, dtype=torch.float32, device=f"cuda:{index}")
    src, dst = (host, dev) if direction == "h2d" else (dev, host)
    dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize(index)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        dst.copy_(src, non_blocking=True)
    end.record()
    end.synchronize()
    seconds = start.elapsed_time(end) / 1000.0
    gbps = nbytes * iterations / seconds / 1e9
    numbers = {"gbps": gbps, "bytes": nbytes, "iterations": iterations}
    label = "host to device" if direction == "h2d" else "device to host"
    return make_check(
        name, PASS, f"{label} copy (pinned) {gbps:.1f} GB/s (measured)", index, numbers=numbers
    )


def _torch_tflops(torch: Any, index: int, quick: bool) -> dict[str, Any]:
    size = 4096 if quick else 8192
    target_s = 0.25 if quick else 1.0
    device = f"cuda:{index}"
    a = torch.randn(size, size, device=device, dtype=torch.float16)
    b = torch.randn(size, size, device=device, dtype=torch.float16)
    out = torch.empty(size, size, device=device, dtype=torch.float16)
    for _ in range(2):
        torch.matmul(a, b, out=out)
    torch.cuda.synchronize(index)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    torch.matmul(a, b, out=out)
    end.record()
    end.synchronize()
    one = max(start.elapsed_time(end) / 1000.0, 1e-6)
    iterations = int(min(200, max(3, target_s / one)))
    start.record()
    for _ in range(iterations):
        torch.matmul(a, b, out=out)
    end.record()
    end.synchronize()
    seconds = start.elapsed_time(end) / 1000.0
    tflops = 2.0 * size**3 * iterations / seconds / 1e12
    numbers = {"tflops": tflops, "size": size, "iterations": iterations, "seconds": seconds}
    if not bool(torch.isfinite(out).all()):
        return make_check(
            "matmul_tflops",
            FAIL,
            "fp16 matmul produced non-finite values",
            index,
            value="float16",
            numbers=numbers,
        )
    return make_check(
        "matmul_tflops",
        PASS,
        f"fp16 {size}x{size} matmul {tflops:.1f} TFLOP/s (measured)",
        index,
        value="float16",
        numbers=numbers,
    )


def _torch_nccl(torch: Any, count: int, quick: bool, deadline: float) -> dict[str, Any]:
    name = "nccl_allreduce"
    if count < 2:
        return make_check(
            name, COULD_NOT_RUN, f"{count} GPU visible; an all-reduce needs 2 or more"
        )
    distributed: Any = importlib.import_module("torch.distributed")
    if not distributed.is_available() or not distributed.is_nccl_available():
        return make_check(name, FAIL, "torch.distributed with NCCL is not available in this build")
    script = os.path.abspath(__file__)
    if not os.path.isfile(script):
        return make_check(
            name, COULD_NOT_RUN, "the smoke script is not a file, cannot start workers"
        )
    budget = min(120.0, deadline - time.monotonic())
    if budget < 10:
        return make_check(name, COULD_NOT_RUN, "less than 10 s of the time budget left")
    nbytes = (16 if quick else 128) * 1024 * 1024
    return allreduce_across_processes(count, nbytes, budget, "nccl")


def allreduce_across_processes(
    count: int, nbytes: int, budget: float, backend: str
) -> dict[str, Any]:
    """Start one worker process per rank (this script, --worker allreduce), all-reduce, judge.

    ``backend`` is "nccl" on GPUs; "gloo" runs the same orchestration on CPUs (tests).
    """
    name = "nccl_allreduce"
    script = os.path.abspath(__file__)
    workdir = tempfile.mkdtemp(prefix="gpuhost-nccl-")
    store = os.path.join(workdir, "store")
    env = dict(os.environ, TORCH_NCCL_ASYNC_ERROR_HANDLING="1")
    procs = []
    try:
        for rank in range(count):
            command = [
                sys.executable,
                script,
                "--worker",
                "allreduce",
                "--rank",
                str(rank),
                "--world",
                str(count),
                "--store",
                store,
                "--bytes",
                str(nbytes),
                "--timeout",
                str(int(budget)),
                "--backend",
                backend,
            ]
            # stderr to a file: a chatty rank must not block on a full pipe while we wait
            with open(os.path.join(workdir, f"rank{rank}.err"), "w") as err_file:
                procs.append(
                    subprocess.Popen(
                        command,
                        stdout=subprocess.PIPE,
                        stderr=err_file,
                        universal_newlines=True,
                        env=env,
                        start_new_session=True,
                    )
                )
        results = []
        end = time.monotonic() + budget
        for rank, proc in enumerate(procs):
            try:
                out, _ = proc.communicate(timeout=max(1.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                for other in procs:
                    _kill_group(other)
                return make_check(
                    name,
                    FAIL,
                    f"{backend} all-reduce across {count} ranks did not finish within "
                    f"{budget:.0f} s (rank {rank} hung)",
                )
            lines = [line for line in out.splitlines() if line.startswith("{")]
            if proc.returncode != 0 or not lines:
                with open(os.path.join(workdir, f"rank{rank}.err")) as err_file:
                    err = err_file.read().strip()[-STDERR_TAIL:]
                return make_check(
                    name,
                    FAIL,
                    f"{backend} worker rank {rank} exited {proc.returncode}: "
                    f"{err or '(no stderr)'}",
                )
            results.append(json.loads(lines[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                _kill_group(proc)
        shutil.rmtree(workdir, ignore_errors=True)
    wrong = [r for r in results if not r.get("correct")]
    busbw = min(r["busbw_gbps"] for r in results)
    numbers = {
        "busbw_gbps": busbw,
        "algbw_gbps": min(r["algbw_gbps"] for r in results),
        "bytes": nbytes,
        "world_size": count,
    }
    if wrong:
        return make_check(
            name,
            FAIL,
            f"all-reduce gave {wrong[0].get('value')} on rank {wrong[0]['rank']}, "
            f"expected {wrong[0].get('expected')}",
            numbers=numbers,
        )
    return make_check(
        name,
        PASS,
        f"{backend} all-reduce across {count} ranks correct, bus bandwidth {busbw:.1f} GB/s "
        "(measured)",
        value=count,
        numbers=numbers,
    )


def allreduce_worker(
    rank: int, world: int, store: str, nbytes: int, timeout_s: float, backend: str = "nccl"
) -> dict[str, Any]:
    """One rank of the all-reduce (its own process; one per GPU with NCCL, CPU with gloo)."""
    torch: Any = importlib.import_module("torch")
    distributed: Any = importlib.import_module("torch.distributed")
    on_gpu = backend == "nccl"

    def sync() -> None:
        if on_gpu:
            torch.cuda.synchronize(rank)

    if on_gpu:
        torch.cuda.set_device(rank)
    distributed.init_process_group(
        backend,
        init_method="file://" + store,
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    try:
        device = f"cuda:{rank}" if on_gpu else "cpu"
        x = torch.full((1024,), float(rank + 1), device=device)
        distributed.all_reduce(x)
        sync()
        expected = world * (world + 1) / 2.0
        correct = bool((x == expected).all())
        buf = torch.zeros(nbytes // 4, dtype=torch.float32, device=device)
        for _ in range(2):
            distributed.all_reduce(buf)
        sync()
        distributed.barrier()
        iterations = 10
        start = time.perf_counter()
        for _ in range(iterations):
            distributed.all_reduce(buf)
        sync()
        seconds = time.perf_counter() - start
        algbw = nbytes * iterations / seconds / 1e9
        return {
            "rank": rank,
            "correct": correct,
            "value": float(x[0]),
            "expected": expected,
            "algbw_gbps": algbw,
            "busbw_gbps": algbw * 2.0 * (world - 1) / world,
        }
    finally:
        distributed.destroy_process_group()


# --------------------------------------------------------------------------- TensorFlow


def tensorflow_checks(
    rec: Recorder, smi: dict[str, Any], gpus: list[dict[str, Any]], quick: bool
) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    tf = import_framework(rec, "tensorflow")
    if tf is None:
        return
    try:
        info = dict(tf.sysconfig.get_build_info())
    except Exception:
        info = {}
    cuda_build = bool(info.get("is_cuda_build", False))
    rec.meta(
        installed=True,
        reason=f"tensorflow {tf.__version__} imported",
        version=str(tf.__version__),
        cuda=info.get("cuda_version"),
        cudnn=info.get("cudnn_version"),
        arch_list=[str(a) for a in info.get("cuda_compute_capabilities", []) or []],
    )
    rec.record(
        make_check(
            "import", PASS, f"tensorflow {tf.__version__} imported", value=str(tf.__version__)
        )
    )
    smi_count = len(gpus) if smi["available"] else None
    listed = tf.config.list_physical_devices("GPU")
    for gpu in listed:
        with contextlib.suppress(Exception):
            tf.config.experimental.set_memory_growth(gpu, True)
    if not listed:
        why = (
            f"tensorflow {tf.__version__} is not a CUDA build"
            if not cuda_build
            else ("tf.config.list_physical_devices('GPU') is empty")
        )
        driver_side = (
            f"the driver sees {smi_count} GPU(s)"
            if smi_count
            else f"no GPU visible: {smi['reason']}"
        )
        outcome = FAIL if smi_count else COULD_NOT_RUN
        rec.record(make_check("gpus_listed", outcome, f"{why}; {driver_side}", value=0))
        for name in TF_DEVICE_CHECKS:
            rec.skip(name, f"no GPU usable from tensorflow: {why}")
        return
    numbers = {"tensorflow": len(listed)}
    if smi_count is None:
        rec.record(
            make_check(
                "gpus_listed",
                COULD_NOT_RUN,
                f"tensorflow lists {len(listed)} GPU(s); cannot compare: {smi['reason']}",
                value=len(listed),
            )
        )
    elif len(listed) == smi_count:
        rec.record(
            make_check(
                "gpus_listed",
                PASS,
                f"tensorflow lists {len(listed)} GPU(s), as nvidia-smi",
                value=len(listed),
                numbers=numbers,
            )
        )
    else:
        rec.record(
            make_check(
                "gpus_listed",
                FAIL,
                f"tensorflow lists {len(listed)} GPU(s) but nvidia-smi {smi_count}",
                value=len(listed),
                numbers=numbers,
            )
        )
    with contextlib.suppress(Exception):
        tf.config.experimental.enable_tensor_float_32_execution(False)
    for index in range(len(listed)):
        rec.run("matmul_on_gpu", partial(_tf_matmul, tf, index, quick), index)


def _tf_matmul(tf: Any, index: int, quick: bool) -> dict[str, Any]:
    size = 256 if quick else 1024
    with tf.device("/CPU:0"):
        a = tf.random.stateless_normal((size, size), seed=(1, index))
        b = tf.random.stateless_normal((size, size), seed=(2, index))
    with tf.device(f"/GPU:{index}"):
        c = tf.matmul(a, b)
    placed = str(c.device)
    reference = tf.matmul(tf.cast(a, tf.float64), tf.cast(b, tf.float64))
    diff = float(tf.reduce_max(tf.abs(tf.cast(c, tf.float64) - reference)))
    scale = float(tf.reduce_max(tf.abs(reference)))
    err = diff / scale if scale > 0 else diff
    numbers = {"max_rel_error": err, "tolerance": MATMUL_FP32_TOLERANCE, "size": size}
    if f"GPU:{index}" not in placed.upper():
        return make_check(
            "matmul_on_gpu",
            FAIL,
            f"matmul ran on {placed}, not GPU:{index}",
            index,
            value=placed,
            numbers=numbers,
        )
    if not err <= MATMUL_FP32_TOLERANCE:
        return make_check(
            "matmul_on_gpu",
            FAIL,
            f"matmul on {placed}: relative error {err:.3g} > {MATMUL_FP32_TOLERANCE:.1g}",
            index,
            value=placed,
            numbers=numbers,
        )
    return make_check(
        "matmul_on_gpu",
        PASS,
        f"matmul placed on {placed}, within {err:.3g} of fp64",
        index,
        value=placed,
        numbers=numbers,
    )


FRAMEWORK_CHECKS = {"torch": torch_checks, "tensorflow": tensorflow_checks}


# --------------------------------------------------------------------------- orchestration


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)


def framework_from_records(name: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Assemble a FRAMEWORK object from a child's JSON lines (meta/started/check/done)."""
    doc: dict[str, Any] = {
        "installed": False,
        "reason": "",
        "version": None,
        "cuda": None,
        "cudnn": None,
        "arch_list": [],
        "devices": [],
        "checks": [],
    }
    for record in records:
        if "meta" in record:
            doc.update(record["meta"])
        elif "check" in record:
            doc["checks"].append(record["check"])
    return doc


def run_framework_child(
    name: str, smi: dict[str, Any], gpus: list[dict[str, Any]], quick: bool, budget: float
) -> dict[str, Any]:
    """Run one framework's checks in a child process of this script; survive its crash or hang."""
    script = os.path.abspath(__file__)
    if not os.path.isfile(script):  # run from stdin: no isolation possible
        records: list[dict[str, Any]] = []
        FRAMEWORK_CHECKS[name](
            Recorder(records.append, time.monotonic() + budget), smi, gpus, quick
        )
        return framework_from_records(name, records)
    command = [
        sys.executable,
        script,
        "--worker",
        "framework",
        "--framework",
        name,
        "--timeout",
        f"{max(1.0, budget - 5.0):.1f}",
    ]
    if quick:
        command.append("--quick")
    started = time.monotonic()
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, err = proc.communicate(json.dumps({"smi": smi, "gpus": gpus}), timeout=budget)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        out, err = proc.communicate()
    records = []
    for line in out.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    doc = framework_from_records(name, records)
    started_names = [r["started"] for r in records if "started" in r]
    finished = any("done" in r for r in records)
    last = started_names[-1] if started_names else None
    where = ""
    if last is not None:
        where = "; last check started: {}{}".format(
            last["name"], "" if last.get("device") is None else " on GPU {}".format(last["device"])
        )
    tail = err.strip()[-STDERR_TAIL:]
    if timed_out:
        doc["checks"].append(
            make_check(
                "run",
                FAIL,
                f"the {name} checks did not finish within {budget:.0f} s and were killed{where}",
                value={"stderr_tail": tail},
            )
        )
        doc["installed"] = doc["installed"] or bool(records)
    elif not finished:
        doc["checks"].append(
            make_check(
                "run",
                FAIL,
                f"the {name} checks died with exit code {proc.returncode}{where}; "
                f"stderr: {tail or '(empty)'}",
                value={"stderr_tail": tail},
            )
        )
        doc["installed"] = doc["installed"] or bool(records)
    doc["run_seconds"] = round(time.monotonic() - started, 3)
    return doc


def _json_line_writer(stream: Any) -> Callable[[dict[str, Any]], None]:
    def emit(record: dict[str, Any]) -> None:
        stream.write(json.dumps(record, allow_nan=False, default=str) + "\n")
        stream.flush()

    return emit


def _claim_stdout() -> Any:
    """Keep the real stdout for our JSON and send everything else written to fd 1 to stderr."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(saved, "w")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="GPU smoke test; prints one JSON document.")
    parser.add_argument("--framework", choices=("torch", "tensorflow", "all"), default="all")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer iterations")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds for the whole run (default 600)"
    )
    parser.add_argument("--worker", choices=("framework", "allreduce"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--backend", choices=("nccl", "gloo"), default="nccl", help=argparse.SUPPRESS
    )
    parser.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--world", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--store", default="", help=argparse.SUPPRESS)
    parser.add_argument("--bytes", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = _claim_stdout()
    if args.worker == "allreduce":
        result = allreduce_worker(
            args.rank, args.world, args.store, args.bytes, args.timeout, args.backend
        )
        out.write(json.dumps(result) + "\n")
        out.flush()
        return 0
    if args.worker == "framework":
        emit = _json_line_writer(out)
        context = json.loads(sys.stdin.read())
        rec = Recorder(emit, time.monotonic() + args.timeout)
        try:
            FRAMEWORK_CHECKS[args.framework](rec, context["smi"], context["gpus"], args.quick)
        except Exception as exc:  # outside any single check: report it, still finish cleanly
            rec.record(
                make_check("run", FAIL, f"{args.framework} checks stopped: {error_text(exc)}")
            )
        emit({"done": True})
        return 0

    started = time.monotonic()
    deadline = started + args.timeout
    names = list(FRAMEWORKS) if args.framework == "all" else [args.framework]
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "host": socket.gethostname(),
        "python": {"executable": sys.executable, "version": platform.python_version()},
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "duration_s": 0.0,
        "options": {"frameworks": names, "quick": args.quick, "timeout_s": args.timeout},
        "nvidia_smi": {},
        "gpus": [],
        "frameworks": {},
    }
    try:
        doc["nvidia_smi"], doc["gpus"] = probe_nvidia_smi()
    except Exception as exc:
        doc["nvidia_smi"] = {
            "available": False,
            "reason": f"probing nvidia-smi failed: {error_text(exc)}",
            "driver_version": None,
            "cuda_version": None,
        }
    for position, name in enumerate(names):
        left = deadline - time.monotonic()
        share = left / (len(names) - position)
        try:
            doc["frameworks"][name] = run_framework_child(
                name, doc["nvidia_smi"], doc["gpus"], args.quick, max(share, 1.0)
            )
        except Exception as exc:
            fw = framework_from_records(name, [])
            fw["checks"].append(
                make_check("run", FAIL, f"could not run the {name} checks: {error_text(exc)}")
            )
            doc["frameworks"][name] = fw
    doc["duration_s"] = round(time.monotonic() - started, 3)
    out.write(json.dumps(doc, indent=1, allow_nan=False, default=str) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
