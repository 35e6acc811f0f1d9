"""TEST EQUIPMENT (not part of gpuhost): a stand-in for the few PyTorch calls of the GEMM soak of
`gpuhost accept` (src/gpuhost/accept/agent.py, gemm_worker), for GPU-shaped lab hosts, which have
no GPU. Only on the path of /usr/local/bin/gpuhost-lab-python3 (never the host's python3).

The GPUs are the lab GPU emulator's (`nvidia-smi -L`). A matmul of two n x n matrices takes the
time 2 n^3 flops take at the model's `gemm_fp16_tflops` (/etc/gpuhost-lab-gpu/model.json), half
that rate while the emulator shows an HW slowdown on the GPU; while it runs, it keeps the GPU's
load file fresh (/run/gpuhost-lab-gpu/load/INDEX: when the load began), so that the emulator's
telemetry follows its captured series under load. Results are symbolic: equal inputs give equal
results, as on a healthy GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any

ROOT = os.environ.get("GPUEMU_ROOT", "")  # as the emulator's: offline tests use a folder
MODEL = f"{ROOT}/etc/gpuhost-lab-gpu/model.json"
STATE = f"{ROOT}/run/gpuhost-lab-gpu/state.json"
LOAD_DIR = f"{ROOT}/run/gpuhost-lab-gpu/load"
FAULTS = f"{ROOT}/etc/gpuhost-lab/accept-faults.json"  # {"sdc_gpu": N}: tests/lab/accept
float16, bfloat16, float32 = "float16", "bfloat16", "float32"
_now: dict[str, Any] = {"device": 0, "seed": 0, "drawn": 0, "events_read": 0.0, "slowed": False}


class Tensor:
    def __init__(self, value: int, n: int, device: str) -> None:
        self.value, self.n, self.device = value, n, device

    def __matmul__(self, other: Tensor) -> Tensor:
        return matmul(self, other)

    def float(self) -> Tensor:
        return self

    def sum(self) -> Tensor:
        return self

    def item(self) -> float:
        return float(self.value % 1000003)


def manual_seed(seed: int) -> None:
    _now["seed"], _now["drawn"] = seed, 0


def randn(*shape: int, device: str = "cpu", dtype: Any = None) -> Tensor:
    _now["drawn"] += 1
    return Tensor(_now["seed"] * 7919 + _now["drawn"], shape[0], device)


def _slowed(index: int) -> bool:
    """The emulator's HW slowdown on this GPU (read once a second)."""
    if time.time() - _now["events_read"] > 1.0:
        _now["events_read"] = time.time()
        try:
            with open(STATE) as f:
                gpus = json.load(f)["gpus"]
            _now["slowed"] = "hw_slowdown" in (gpus[index].get("clock_events") or [])
        except (OSError, ValueError, KeyError, IndexError):
            _now["slowed"] = False
    return bool(_now["slowed"])


def _busy(index: int) -> None:
    path = f"{LOAD_DIR}/{index}"
    if not os.path.exists(path):
        os.makedirs(LOAD_DIR, exist_ok=True)
        with open(path, "w") as f:
            f.write(f"{time.time()}\n")
    else:
        os.utime(path)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    index = _now["device"]
    if "rate" not in _now:
        with open(MODEL) as f:
            _now["rate"] = float(json.load(f).get("gemm_fp16_tflops") or 0)
    rate = float(_now["rate"])
    if rate <= 0:
        raise RuntimeError("CUDA error: the lab's GPU model gives no gemm_fp16_tflops")
    if _slowed(index):
        rate /= 2
    _busy(index)
    time.sleep(2.0 * a.n**3 / (rate * 1e12))
    _now["calls"] = _now.get("calls", 0) + 1
    wrong = _now["calls"] % 97 == 0 and _sdc_gpu() == index  # now and then, not every time
    return Tensor(a.value * 31 + b.value + (1 if wrong else 0), a.n, a.device)


def _sdc_gpu() -> int | None:
    if "sdc" not in _now:
        try:
            with open(FAULTS) as f:
                _now["sdc"] = json.load(f).get("sdc_gpu")
        except (OSError, ValueError):
            _now["sdc"] = None
    return _now["sdc"] if isinstance(_now["sdc"], int) else None


def equal(x: Tensor, y: Tensor) -> bool:
    return x.value == y.value


def _gpus() -> list[str]:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    except OSError:
        return []
    return (
        [line for line in out.stdout.splitlines() if line.startswith("GPU ")]
        if out.returncode == 0
        else []
    )


class cuda:  # noqa: N801 - torch.cuda
    @staticmethod
    def is_available() -> bool:
        return bool(_gpus())

    @staticmethod
    def device_count() -> int:
        return len(_gpus())

    @staticmethod
    def set_device(index: int) -> None:
        _now["device"] = index

    @staticmethod
    def synchronize() -> None:
        return None

    @staticmethod
    def get_device_name(index: int) -> str:
        line = _gpus()[index]
        return line.split(": ", 1)[1].split(" (UUID")[0]
