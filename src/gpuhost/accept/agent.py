#!/usr/bin/env python3
"""gpuhost's acceptance agent: copied to a host by ``gpuhost accept`` and run there with the
host's ``python3`` (stdlib only, Python >= 3.8; it never imports gpuhost).

It runs the host's stages and prints ONE JSON document on stdout with every tool's raw output;
gpuhost judges it on the controller (``gpuhost.accept.judge``). Progress goes to stderr as
``progress STAGE DONE/TOTAL`` lines. A tool that is not installed is recorded with exit status
127 (its stage is COULD-NOT-RUN); this script never decides a pass.

Stages: ``inventory`` (nvidia-smi -q -x, serials and firmware), ``dcgm`` (dcgmi diag -r L -j),
``soak`` (a GEMM loop on every GPU through PyTorch in one child process per GPU, each result
compared with the GPU's first one, bit for bit; nvidia-smi sampled every ``--interval`` s
throughout; nvidia-smi -q -x, the kernel log's Xid lines and the PCIe AER counters before and
after), ``nvbandwidth`` (its text output), ``nccl`` (all_reduce_perf on this host's GPUs).

SIGTERM/SIGINT stop the running stage (the GEMM children first) and the document is still
printed, with ``"interrupted": true``. Its pid is in ``PID_FILE`` while it runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Dict  # noqa: UP035

# typing.Dict: the agent runs on the host's python3, 3.8 at the oldest
Opts = Dict[str, Any]  # noqa: UP006
Result = Dict[str, Any]  # noqa: UP006
SCHEMA = 1
PID_FILE = "/run/gpuhost-accept.pid"
SAMPLE_FIELDS = (
    "index,pci.bus_id,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.max.sm,"
    "utilization.gpu,clocks_event_reasons.hw_slowdown,clocks_event_reasons.hw_thermal_slowdown,"
    "clocks_event_reasons.hw_power_brake_slowdown,clocks_event_reasons.sw_thermal_slowdown,"
    "ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total"
)
FIRMWARE_FILES = {
    "bios": "/sys/class/dmi/id/bios_version",
    "bios_date": "/sys/class/dmi/id/bios_date",
    "board_serial": "/sys/class/dmi/id/board_serial",
    "product_serial": "/sys/class/dmi/id/product_serial",
    "product_name": "/sys/class/dmi/id/product_name",
}
XID_LOG = "journalctl -k -b --no-pager -o short-monotonic 2>/dev/null | grep -F 'NVRM: Xid' || true"
AER = (
    "for d in /sys/bus/pci/drivers/nvidia/0000:*; do for k in correctable fatal nonfatal; do "
    'f=$d/aer_dev_$k; [ -r "$f" ] && echo "##GPUHOST aer ${d##*/} $k" && cat "$f"; '
    "done; done; true"
)
NVLINK_ERRORS = "nvidia-smi nvlink -e"
GEMM_N = 8192
STOP = {"now": False}
CHILDREN: list[subprocess.Popen[bytes]] = []


def progress(stage: str, done: float, total: float) -> None:
    sys.stderr.write(f"progress {stage} {int(done)}/{int(total)}\n")
    sys.stderr.flush()


def run(argv: list[str] | str, timeout: float, shell: bool = False) -> Result:
    """{"argv", "rc", "out", "err"}; rc 127: not installed, 124: timed out."""
    shown = argv if shell else " ".join(argv)
    try:
        proc = subprocess.Popen(
            argv,
            shell=shell,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=dict(os.environ, LC_ALL="C"),
            start_new_session=True,
        )
    except OSError as exc:
        return {"argv": shown, "rc": 127, "out": "", "err": str(exc)}
    CHILDREN.append(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        _kill(proc)
        out, err = proc.communicate()
        rc = 124
    finally:
        CHILDREN.remove(proc)
    if STOP["now"] and rc != 0:
        rc = 130
    return {
        "argv": shown,
        "rc": rc,
        "out": out.decode("utf-8", "replace")[-200000:],
        "err": err.decode("utf-8", "replace")[-4000:],
    }


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGTERM)


def _stop(signum: int, frame: Any) -> None:
    STOP["now"] = True
    for proc in list(CHILDREN):
        _kill(proc)


def read_file(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def hca_firmware() -> list[dict[str, str | None]]:
    base = "/sys/class/infiniband"
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    return [
        {
            "device": n,
            "fw_ver": read_file(os.path.join(base, n, "fw_ver")),
            "board_id": read_file(os.path.join(base, n, "board_id")),
        }
        for n in names
    ]


def stage_inventory(opts: Opts) -> Result:
    return {
        "smi_xml": run(["nvidia-smi", "-q", "-x"], 60),
        "nvlink_status": run(["nvidia-smi", "nvlink", "-s"], 60),
        "firmware": {k: read_file(v) for k, v in FIRMWARE_FILES.items()},
        "hca": hca_firmware(),
    }


def stage_dcgm(opts: Opts) -> Result:
    level = str(opts["dcgm_level"])
    return {
        "level": int(level),
        "result": run(["dcgmi", "diag", "-r", level, "-j"], opts["dcgm_timeout"]),
    }


def snapshot() -> Result:
    return {
        "smi_xml": run(["nvidia-smi", "-q", "-x"], 60),
        "xid_log": run(XID_LOG, 30, shell=True),
        "aer": run(AER, 30, shell=True),
        "nvlink_errors": run(NVLINK_ERRORS.split(), 60),
    }


def gpu_count() -> tuple[int, Result]:
    got = run(["nvidia-smi", "-L"], 30)
    if got["rc"] != 0:
        return 0, got
    return sum(1 for line in got["out"].splitlines() if line.startswith("GPU ")), got


def start_workers(opts: Opts, count: int) -> tuple[list[subprocess.Popen[bytes]], str | None]:
    workers: list[subprocess.Popen[bytes]] = []
    for index in range(count):
        argv = [
            opts["python"],
            os.path.abspath(__file__),
            "--worker",
            str(index),
            "--duration",
            str(opts["duration"]),
            "--interval",
            str(opts["interval"]),
        ]
        try:
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            return workers, f"cannot start {opts['python']}: {exc}"
        CHILDREN.append(proc)
        workers.append(proc)
    return workers, None


def sample_fields() -> str:
    """The query: drivers before 535 know the clock event fields by their old name."""
    got = run(["nvidia-smi", "--query-gpu=" + SAMPLE_FIELDS, "--format=csv,noheader,nounits"], 20)
    if got["rc"] != 0 and "clocks_event_reasons" in got["out"] + got["err"]:
        return SAMPLE_FIELDS.replace("clocks_event_reasons.", "clocks_throttle_reasons.")
    return SAMPLE_FIELDS


def sample_once(start: float, fields: str) -> Result:
    got = run(["nvidia-smi", "--query-gpu=" + fields, "--format=csv,noheader,nounits"], 20)
    return {"t": round(time.time() - start, 3), "rc": got["rc"], "csv": got["out"]}


def stage_soak(opts: Opts) -> Result:
    count, listed = gpu_count()
    fields = sample_fields() if count else SAMPLE_FIELDS
    out: Result = {
        "fields": fields,
        "python": opts["python"],
        "gpus": count,
        "duration": opts["duration"],
        "before": snapshot(),
        "samples": [],
        "workers": [],
    }
    if count == 0:
        said = (listed["out"] + listed["err"]).strip()[:300] or f"exit {listed['rc']}"
        out["error"] = f"no GPU listed by nvidia-smi -L: {said}"
        return out
    start = time.time()
    workers, problem = start_workers(opts, count)
    if problem:
        out["error"] = problem
    deadline = start + opts["duration"]
    while not STOP["now"] and time.time() < deadline and any(w.poll() is None for w in workers):
        out["samples"].append(sample_once(start, fields))
        progress("soak", min(time.time() - start, opts["duration"]), opts["duration"])
        time.sleep(max(0.0, min(opts["interval"], deadline - time.time())))
    out["samples"].append(sample_once(start, fields))
    for proc in workers:
        if STOP["now"]:
            _kill(proc)
        try:
            text = proc.communicate(timeout=opts["interval"] * 3 + 60)[0]
        except subprocess.TimeoutExpired:
            _kill(proc)
            text = proc.communicate()[0]
        CHILDREN.remove(proc)
        out["workers"].append(
            {"rc": proc.returncode, "lines": text.decode("utf-8", "replace").splitlines()[-2000:]}
        )
    out["elapsed"] = round(time.time() - start, 3)
    out["after"] = snapshot()
    return out


def stage_nvbandwidth(opts: Opts) -> Result:
    return {"result": run(["nvbandwidth"], opts["tool_timeout"])}


def stage_nccl(opts: Opts) -> Result:
    count, _listed = gpu_count()
    folder = opts["nccl_tests"]
    binary = os.path.join(folder, "all_reduce_perf") if folder else "all_reduce_perf"
    argv = [binary, "-b", "8M", "-e", "1G", "-f", "2", "-g", str(max(count, 1)), "-c", "1"]
    return {"gpus": count, "result": run(argv, opts["tool_timeout"])}


STAGES = {
    "inventory": stage_inventory,
    "dcgm": stage_dcgm,
    "soak": stage_soak,
    "nvbandwidth": stage_nvbandwidth,
    "nccl": stage_nccl,
}


def gemm_worker(index: int, duration: float, interval: float) -> int:
    """One GPU's GEMM loop: JSON lines {"gpu", "t", "tflops", "iterations", "mismatches"}."""

    def emit(**fields: Any) -> None:
        fields["gpu"] = index
        sys.stdout.write(json.dumps(fields) + "\n")
        sys.stdout.flush()

    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure means no framework
        emit(error=f"PyTorch cannot be imported: {str(exc)[:300]}", kind="no-framework")
        return 3
    try:
        if not torch.cuda.is_available() or torch.cuda.device_count() <= index:
            emit(error=f"CUDA GPU {index} not available to PyTorch", kind="no-gpu")
            return 3
        torch.cuda.set_device(index)
        torch.manual_seed(1234)
        device = f"cuda:{index}"
        a = torch.randn(GEMM_N, GEMM_N, device=device, dtype=torch.float16)
        b = torch.randn(GEMM_N, GEMM_N, device=device, dtype=torch.float16)
        reference = torch.matmul(a, b)
        torch.cuda.synchronize()
        checksum = float(reference.float().sum().item())
        emit(started=True, checksum=checksum, name=torch.cuda.get_device_name(index))
        return _gemm_loop(torch, a, b, reference, duration, interval, emit)
    except Exception as exc:  # noqa: BLE001 - a CUDA error is this GPU's failure
        emit(error=f"{type(exc).__name__}: {str(exc)[:300]}", kind="cuda-error")
        return 1


def _gemm_loop(
    torch: Any, a: Any, b: Any, reference: Any, duration: float, interval: float, emit: Any
) -> int:
    start = time.time()
    flops_per = 2.0 * GEMM_N**3
    total = mismatches = 0
    window_start, window_count = start, 0
    while not STOP["now"] and time.time() - start < duration:
        result = torch.matmul(a, b)
        torch.cuda.synchronize()
        total += 1
        window_count += 1
        if not torch.equal(result, reference):
            mismatches += 1
        now = time.time()
        if now - window_start >= interval:
            emit(
                t=round(now - start, 3),
                iterations=total,
                mismatches=mismatches,
                tflops=round(window_count * flops_per / (now - window_start) / 1e12, 2),
            )
            window_start, window_count = now, 0
    emit(
        done=True,
        t=round(time.time() - start, 3),
        iterations=total,
        mismatches=mismatches,
        interrupted=STOP["now"],
    )
    return 0


def parse_args(argv: list[str]) -> Opts:
    opts: Opts = {
        "stages": list(STAGES),
        "duration": 60.0,
        "interval": 2.0,
        "dcgm_level": 3,
        "python": "python3",
        "nccl_tests": "",
        "dcgm_timeout": 7200.0,
        "tool_timeout": 900.0,
        "worker": None,
    }
    pos = 0
    while pos < len(argv):
        key = argv[pos].lstrip("-").replace("-", "_")
        value = argv[pos + 1] if pos + 1 < len(argv) else ""
        if key == "stages":
            opts["stages"] = [s for s in value.split(",") if s]
        elif key in ("duration", "interval", "dcgm_timeout", "tool_timeout"):
            opts[key] = float(value)
        elif key in ("dcgm_level", "worker"):
            opts[key] = int(value)
        elif key in ("python", "nccl_tests"):
            opts[key] = value
        else:
            raise SystemExit(f"gpuhost accept agent: unknown option {argv[pos]!r}")
        pos += 2
    return opts


def main(argv: list[str]) -> int:
    opts = parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    if opts["worker"] is not None:
        return gemm_worker(opts["worker"], opts["duration"], opts["interval"])
    with contextlib.suppress(OSError), open(PID_FILE, "w") as handle:
        handle.write(f"{os.getpid()}\n")
    doc: Result = {
        "schema": SCHEMA,
        "host": socket.gethostname(),
        "started": time.time(),
        "stages": {},
        "interrupted": False,
    }
    for name in opts["stages"]:
        if STOP["now"]:
            break
        progress(name, 0, 1)
        doc["stages"][name] = STAGES[name](opts)
    doc["interrupted"] = STOP["now"]
    doc["finished"] = time.time()
    with contextlib.suppress(OSError):
        os.unlink(PID_FILE)
    sys.stdout.write(json.dumps(doc) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
