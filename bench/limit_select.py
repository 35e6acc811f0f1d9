#!/usr/bin/env python3
"""What ``--limit`` costs in a large inventory: ``gpuhost audit INV --limit A,B,C`` over a
generated inventory of N hosts (no lab needed: every host is 127.0.0.1 port 1, refused at
once, so the time is gpuhost's own before and around the connection attempts).

    .venv/bin/python bench/limit_select.py --hosts 20000 --runs 3

Besides the command (wall clock around the whole process), the two steps it used to spend
its time in are timed in this process: ``inventory.loader.select`` (load, select, check) and
pyinfra's ``State.init`` over the selection's inventory (what ``fleet.gather`` does first);
``--whole`` also times ``State.init`` over the whole inventory, as gpuhost did before the
selection was narrowed to its hosts (minutes at 20,000 hosts). Results:
bench/results/limit-select.json, read by docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import GPUHOST, WORK, machine, run_bench, save, timed  # noqa: E402

LIMIT = "gpu00001,gpu00002,gpu00003"


def write_inventory(count: int) -> Path:
    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / f"limit-{count}.py"
    hosts = [
        (f"gpu{i:05d}", {"ssh_hostname": "127.0.0.1", "ssh_port": 1}) for i in range(count)
    ]
    path.write_text(f"gpu_nodes = {hosts!r}\n")
    return path


def in_process(path: Path, whole: bool) -> dict[str, float]:
    from pyinfra.api import Config, State

    from gpuhost.inventory.loader import load_inventory, select

    start = time.perf_counter()
    selection = select(str(path), limit=LIMIT)
    selected = time.perf_counter()
    selection.state.init(selection.inventory, Config())
    out = {"select_s": selected - start, "state_init_s": time.perf_counter() - selected}
    if whole:
        state = State()
        inventory = load_inventory(str(path), state)
        began = time.perf_counter()
        state.init(inventory, Config())
        out["state_init_whole_s"] = time.perf_counter() - began
    return {k: round(v, 3) for k, v in out.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--whole", action="store_true", help="also State.init over every host")
    args = parser.parse_args()
    path = write_inventory(args.hosts)
    argv = [str(GPUHOST), "audit", str(path), "--limit", LIMIT, "--connect-timeout", "2", "-q"]
    commands = [timed(argv) for _ in range(args.runs)]
    steps = in_process(path, args.whole)
    result = {
        "machine": machine(),
        "hosts": args.hosts,
        "limit": LIMIT,
        "audit_runs_s": [s.seconds for s in commands],
        "audit_median_s": statistics.median(s.seconds for s in commands),
        "load1_at_starts": [s.load1_start for s in commands],
        **steps,
    }
    print(f"  audit --limit (3 of {args.hosts}): median {result['audit_median_s']:.2f} s "
          f"{result['audit_runs_s']}; select {steps['select_s']} s, State.init "
          f"{steps['state_init_s']} s" + (f", whole {steps['state_init_whole_s']} s"
                                          if args.whole else ""))
    print(f"  results: {save('limit-select', result)}")
    return 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
