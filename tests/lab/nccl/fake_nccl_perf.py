#!/usr/bin/env python3
"""TEST EQUIPMENT (not part of gpuhost): a stand-in for nccl-tests' ``all_reduce_perf`` and
``all_gather_perf`` on lab hosts, which have no GPU.

Installed under the test's name (``all_reduce_perf``, ``all_gather_perf``); it replays the real
capture of that test (``captures/TEST.txt`` beside it, from tests/fixtures/nccl-tests) as rank 0
of the job, with each rank's host in the ``# Rank`` lines and every bandwidth scaled by the
SLOWEST node of the job: a host is slow when its file ``/etc/gpuhost-lab/nccl-slow`` holds a
factor (e.g. ``0.5``; ``$GPUHOST_LAB_NCCL_SLOW_FILE`` names another file).

Like nccl-tests (which bootstraps over TCP), the ranks meet: rank 0 listens on
``$GPUHOST_LAB_NCCL_PORT`` (default 29411), every other rank connects and sends its host and
factor. Rank 0's address: ``$GPUHOST_LAB_NCCL_RANK0``, else the first node of the Slurm step
(``scontrol show hostnames``) and its ``NodeAddr`` (``scontrol show node``). Ranks come from
Slurm (``SLURM_PROCID``/``SLURM_NTASKS``) or Open MPI; without either it is rank 0 of 1.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SLOW_FILE = os.environ.get("GPUHOST_LAB_NCCL_SLOW_FILE", "/etc/gpuhost-lab/nccl-slow")
PORT = int(os.environ.get("GPUHOST_LAB_NCCL_PORT", "29411"))
WAIT_S = 60.0
WIDTHS = (12, 12, 8, 6, 6, 7, 6, 6, 6, 7, 6, 6, 6)


def _env(*names: str, default: str) -> str:
    return next((os.environ[n] for n in names if os.environ.get(n)), default)


def host_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def factor() -> float:
    try:
        return float(Path(SLOW_FILE).read_text().strip() or 1)
    except (OSError, ValueError):
        return 1.0


def rank0_address() -> str:
    given = os.environ.get("GPUHOST_LAB_NCCL_RANK0")
    if given:
        return given
    nodelist = _env("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", default="")
    first = subprocess.run(
        ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True
    ).stdout.split()[0]
    shown = subprocess.run(
        ["scontrol", "-o", "show", "node", first], capture_output=True, text=True, check=True
    ).stdout
    match = re.search(r"NodeAddr=(\S+)", shown)
    return match.group(1) if match else first


def gather(ntasks: int) -> list[tuple[int, str, float]]:
    """Rank 0: (rank, host, factor) of every rank, itself first."""
    found = [(0, host_name(), factor())]
    with socket.create_server(("", PORT), reuse_port=False) as server:
        server.settimeout(WAIT_S)
        while len(found) < ntasks:
            conn, _ = server.accept()
            with conn:
                rank, host, value = conn.makefile().readline().split()
                found.append((int(rank), host, float(value)))
    return sorted(found)


def report(rank: int) -> None:
    """Any other rank: tell rank 0 our host and factor (retrying while it starts)."""
    address, deadline = rank0_address(), time.monotonic() + WAIT_S
    while True:
        try:
            with socket.create_connection((address, PORT), timeout=5) as conn:
                conn.sendall(f"{rank} {host_name()} {factor()}\n".encode())
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def scaled_row(tokens: list[str], by: float) -> str:
    cells = list(tokens)
    for start in (5, 9):  # time algbw busbw of out-of-place, then in-place
        cells[start] = f"{float(cells[start]) / by:.1f}"
        for offset in (1, 2):
            cells[start + offset] = f"{float(cells[start + offset]) * by:.2f}"
    return "  ".join(f"{cell:>{width}s}" for cell, width in zip(cells, WIDTHS, strict=False))


def replay(test: str, ranks: list[tuple[int, str, float]]) -> str:
    by = min(f for _, _, f in ranks)
    capture = (HERE / "captures" / f"{test}.txt").read_text().splitlines()
    device = next((m.group(1) for line in capture if (m := re.search(r"\] (.+)$", line))), "GPU")
    out = []
    for line in capture:
        tokens = line.split()
        if re.match(r"^#\s+Rank\s", line):
            continue
        if line.startswith("# Using devices"):
            out.append(line)
            out += [
                f"#  Rank {rank:2d} Group  0 Pid {1000 + rank:6d} on {host:>10s} device  0 "
                f"[0x00] {device}"
                for rank, host, _ in ranks
            ]
        elif len(tokens) >= 13 and tokens[0].isdigit():
            out.append(scaled_row(tokens, by))
        elif line.startswith("# Avg bus bandwidth"):
            out.append(f"# Avg bus bandwidth    : {float(tokens[-1]) * by:g} ")
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def main() -> int:
    test = Path(sys.argv[0]).name
    rank = int(_env("SLURM_PROCID", "OMPI_COMM_WORLD_RANK", default="0"))
    ntasks = int(_env("SLURM_NTASKS", "SLURM_STEP_NUM_TASKS", "OMPI_COMM_WORLD_SIZE", default="1"))
    if rank != 0:
        report(rank)
        return 0
    sys.stdout.write(replay(test, gather(ntasks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
