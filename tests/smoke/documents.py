"""Hand-made smoke documents (schema 1), shaped exactly like the script's output.

``gpu_document`` describes a healthy two-GPU host where every check passed, with plausible
measured numbers; tests then change one thing (a slow GPU, a wrong result, a missing arch...).
"""

from __future__ import annotations

import copy
from typing import Any

from gpuhost.smoke.script import TORCH_DEVICE_CHECKS, make_check

H100 = "NVIDIA H100 80GB HBM3"

DEVICE_NUMBERS: dict[str, dict[str, float]] = {
    "matmul_correct": {"max_rel_error": 2e-6, "tolerance": 1e-3, "size": 1024},
    "cudnn_conv": {"max_rel_error": 3e-6, "tolerance": 1e-3},
    "autocast_fp16": {"max_rel_error": 4e-4, "tolerance": 1e-2},
    "autocast_bf16": {"max_rel_error": 3e-3, "tolerance": 5e-2},
    "h2d_bandwidth": {"gbps": 50.0, "bytes": 268435456, "iterations": 20},
    "d2h_bandwidth": {"gbps": 48.0, "bytes": 268435456, "iterations": 20},
    "matmul_tflops": {"tflops": 600.0, "size": 8192, "iterations": 200, "seconds": 0.37},
}


def gpu_document(
    count: int = 2,
    model: str = H100,
    capability: str = "9.0",
    wheel_cuda: str = "12.4",
    driver_cuda: str = "12.4",
    arch_list: tuple[str, ...] = ("sm_80", "sm_86", "sm_90"),
) -> dict[str, Any]:
    checks = [
        make_check("import", "PASS", "torch 2.5.1+cu124 imported", value="2.5.1+cu124"),
        make_check("cuda_available", "PASS", "torch.cuda.is_available() is True", value=True),
        make_check(
            "cuda_driver_compat",
            "PASS",
            "compatible",
            value={"wheel_cuda": wheel_cuda, "driver_cuda": driver_cuda},
        ),
        make_check(
            "device_count", "PASS", f"torch sees {count} GPU(s), as nvidia-smi", value=count
        ),
    ]
    for index in range(count):
        for name in TORCH_DEVICE_CHECKS:
            value: Any = None
            if name == "arch_supported":
                value = {"capability": capability, "arch_list": list(arch_list)}
            checks.append(
                make_check(
                    name,
                    "PASS",
                    f"{name} ok",
                    index,
                    value=value,
                    numbers=dict(DEVICE_NUMBERS.get(name, {})),
                )
            )
    checks.append(
        make_check(
            "nccl_allreduce",
            "PASS",
            "all-reduce correct",
            value=count,
            numbers={
                "busbw_gbps": 300.0,
                "algbw_gbps": 300.0,
                "bytes": 134217728,
                "world_size": count,
            },
        )
    )
    return {
        "schema": 1,
        "host": "gpu01",
        "python": {"executable": "/opt/venv/bin/python", "version": "3.11.9"},
        "started": "2026-01-01T00:00:00+00:00",
        "duration_s": 42.0,
        "options": {"frameworks": ["torch", "tensorflow"], "quick": False, "timeout_s": 600.0},
        "nvidia_smi": {
            "available": True,
            "reason": f"nvidia-smi -L lists {count} GPU(s)",
            "driver_version": "550.90.07",
            "cuda_version": driver_cuda,
        },
        "gpus": [
            {
                "index": i,
                "name": model,
                "uuid": f"GPU-{i}",
                "pci_bus_id": None,
                "driver_version": "550.90.07",
                "memory_total_mib": 81559,
                "compute_cap": capability,
                "mig_devices": 0,
            }
            for i in range(count)
        ],
        "frameworks": {
            "torch": {
                "installed": True,
                "reason": "torch imported",
                "version": "2.5.1+cu124",
                "cuda": wheel_cuda,
                "cudnn": "9.1.0",
                "arch_list": list(arch_list),
                "devices": [
                    {
                        "index": i,
                        "name": model,
                        "capability": capability,
                        "total_memory_bytes": 85520809984,
                    }
                    for i in range(count)
                ],
                "checks": checks,
            },
            "tensorflow": {
                "installed": False,
                "reason": "tensorflow is not installed in /opt/venv/bin/python",
                "version": None,
                "cuda": None,
                "cudnn": None,
                "arch_list": [],
                "devices": [],
                "checks": [
                    make_check(
                        "import",
                        "COULD-NOT-RUN",
                        "tensorflow is not installed in /opt/venv/bin/python",
                    )
                ],
            },
        },
    }


def find_check(doc: dict[str, Any], name: str, device: int | None = None) -> dict[str, Any]:
    for check in doc["frameworks"]["torch"]["checks"]:
        if check["name"] == name and check["device"] == device:
            return check  # type: ignore[no-any-return]
    raise KeyError((name, device))


def changed(doc: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(doc)
