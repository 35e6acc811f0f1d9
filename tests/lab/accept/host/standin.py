#!/usr/bin/python3
"""TEST EQUIPMENT (not part of gpuhost): stand-ins for the benchmark tools of `gpuhost accept` on
GPU-shaped lab hosts, which have no GPU and no NIC. One program, installed under each tool's
name; each prints the real capture of its tool (captures/ beside it, sources in
tests/lab/accept/captures/SOURCES.json), in that tool's own format:

  dcgmi diag -r N -j          NVIDIA DCGM's JSON of a real 8-GPU run (DCGM 3.1.0)
  nvbandwidth                 a real nvbandwidth v0.6 text output (a GH200)
  all_reduce_perf ...         a real single-node 8-GPU all_reduce_perf run, this host's name in
                              its rank lines
  ib_write_bw [opts] [HOST]   perftest: without HOST the server (listens on TCP 18515 like
                              perftest, waits for one client), with HOST the client; each prints
                              its side of a real ib_write_bw run

Faults (for a test to show each stage failing on its own): /etc/gpuhost-lab/accept-faults.json,
e.g. {"dcgm": "fail", "nvbandwidth": 0.1, "nccl": 0.5, "ib": 0.5, "sdc_gpu": 5}: DCGM's
"Page Retirement/Row Remap" result FAIL; every bandwidth of nvbandwidth, all_reduce_perf or
ib_write_bw scaled by the factor; GPU 5's GEMM results wrong now and then (the PyTorch stand-in).
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CAPTURES = HERE / "captures"
PERFTEST_PORT = 18515
WAIT_S = 60.0


FAULTS = Path(os.environ.get("GPUEMU_ROOT", "") + "/etc/gpuhost-lab/accept-faults.json")
NUMBER_RE = re.compile(r"\d+\.\d+")


def capture(name: str) -> str:
    return (CAPTURES / name).read_text()


def fault(name: str) -> object:
    try:
        return json.loads(FAULTS.read_text()).get(name)
    except (OSError, ValueError):
        return None


def scaled(text: str, factor: object, lines: re.Pattern[str]) -> str:
    """Every decimal number on the lines ``lines`` matches, times ``factor``."""
    if not isinstance(factor, (int, float)):
        return text
    return "\n".join(
        NUMBER_RE.sub(lambda m: f"{float(m.group()) * factor:.2f}", line)
        if lines.search(line)
        else line
        for line in text.split("\n")
    )


def dcgmi(args: list[str]) -> int:
    if not args or args[0] != "diag" or "-j" not in args:
        print("Usage: dcgmi diag -r LEVEL -j (lab stand-in)", file=sys.stderr)
        return 2
    sys.stdout.write("Successfully ran diagnostic for group.\n")
    doc = json.loads(capture("dcgm__diag-json__8gpu__3.1.0.json"))
    if fault("dcgm") == "fail":
        for test in doc["DCGM GPU Diagnostic"]["test_categories"][0]["tests"]:
            if test and test["name"] == "Page Retirement/Row Remap":
                test["results"][0]["status"] = "FAIL"
    sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    return 0


def nvbandwidth(args: list[str]) -> int:
    rows = re.compile(r"^(\s*\d+\s+\d+\.\d+|SUM )")
    text = capture("superbench__nvbandwidth_results.log")
    sys.stdout.write(scaled(text, fault("nvbandwidth"), rows))
    return 0


def all_reduce_perf(args: list[str]) -> int:
    host = socket.gethostname().split(".")[0]
    text = capture("superbench__nccl_allreduce.log").replace(" on localhost ", f" on {host} ")
    sys.stdout.write(scaled(text, fault("nccl"), re.compile(r"^\s+\d+\s+\d+\s+float")))
    return 0


def _sides() -> tuple[str, str]:
    """(client part, server part) of the ib_write_bw capture: the server's starts at the
    'Waiting for client' banner."""
    text = capture("superbench__ib_loopback_8M_size.log")
    cut = text.index("************************************")
    return text[:cut], text[cut:]


VALUED = ("-D", "-d", "-s", "-x", "-q", "-p", "-n", "-i", "-m", "-F")


def _server_name(args: list[str]) -> str | None:
    """perftest's one positional argument: the server to connect to (None: be the server)."""
    target, pos = None, 0
    while pos < len(args):
        if args[pos] in VALUED[:-1]:
            pos += 2
            continue
        if not args[pos].startswith("-"):
            target = args[pos]
        pos += 1
    return target


def ib_write_bw(args: list[str]) -> int:
    target = _server_name(args)
    client, server = (scaled(side, fault("ib"), re.compile(r"^ \d+\s+\d+\s")) for side in _sides())
    if target is None:
        with socket.create_server(("", PERFTEST_PORT)) as listener:
            listener.settimeout(WAIT_S)
            conn, _ = listener.accept()
            with conn:
                conn.makefile().readline()
                conn.sendall(b"ok\n")
        sys.stdout.write(server)
        return 0
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            with socket.create_connection((target, PERFTEST_PORT), timeout=5) as conn:
                conn.sendall(b"hello\n")
                conn.makefile().readline()
            break
        except OSError as exc:
            if time.monotonic() > deadline:
                print(f" Couldn't connect to {target}:{PERFTEST_PORT} ({exc})", file=sys.stderr)
                return 1
            time.sleep(0.5)
    sys.stdout.write(client)
    return 0


TOOLS = {
    "dcgmi": dcgmi,
    "nvbandwidth": nvbandwidth,
    "all_reduce_perf": all_reduce_perf,
    "ib_write_bw": ib_write_bw,
}


def main() -> int:
    name = os.path.basename(sys.argv[0])
    if name not in TOOLS:
        print(
            f"standin: unknown tool {name!r}; expected one of {', '.join(TOOLS)}", file=sys.stderr
        )
        return 2
    return TOOLS[name](sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
