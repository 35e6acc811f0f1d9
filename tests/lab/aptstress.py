"""Stress apt through the lab's proxy: hosts h1..hN run ``apt-get update`` from empty lists at once.

  python3 tests/lab/aptstress.py [--name NAME] [--hosts 8] [--rounds 5] [--restart-proxy]
                                 [--limit 300]

Boots the lab's hosts when needed (and leaves the lab up).  Each round prints its load average,
the slowest host and, per host, seconds and exit code; ``!`` marks a host whose apt reported a
transient failure it then retried.  A host that fails or runs past ``--limit`` seconds (killed
there by ``timeout``) has its apt debug log saved under ``.lab/NAME/aptstress/``, and the exit
code is 1.  ``--restart-proxy`` restarts apt-cacher-ng before each round, as a fresh lab starts one
on an old cache.  This is how the hang in docs/testing.md ("apt in lab hosts") was reproduced.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
from lab.config import default_name  # noqa: E402
from lab.core import LabManager  # noqa: E402

DEBUG = "-o Debug::Acquire::http=1 -o Debug::pkgAcquire::Worker=1 -o Debug::Acquire::Retries=1"
RETRIED = "400%20URI%20Failure"  # apt's log line for a failed item (then retried)


def _one(lab: LabManager, h: dict[str, Any], limit: int) -> tuple[str, float, int, str]:
    cmd = (f"rm -rf /var/lib/apt/lists/*; timeout -k 5 {limit} apt-get update {DEBUG} "
           "> /root/aptstress.log 2>&1; echo exit=$?")
    t0 = time.monotonic()
    proc = lab.ssh(h, cmd, timeout=limit + 60)
    took = time.monotonic() - t0
    words = [w for w in proc.stdout.split() if w.startswith("exit=")]
    rc = int(words[-1][5:]) if words else 255
    log = lab.ssh(h, "grep -v Config-Item /root/aptstress.log", timeout=60).stdout
    return h["name"], took, rc, log


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="aptstress",
                                description="apt-get update on many lab hosts at once")
    p.add_argument("--name", default=None)
    p.add_argument("--hosts", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--limit", type=int, default=300)
    p.add_argument("--restart-proxy", action="store_true")
    args = p.parse_args(argv)
    lab = LabManager(args.name or default_name())
    hosts = lab.up(args.hosts)["hosts"]
    bad = 0
    for r in range(args.rounds):
        if args.restart_proxy:
            lab.restart_proxy()
        load = Path("/proc/loadavg").read_text().split()[0]
        with ThreadPoolExecutor(len(hosts)) as pool:
            results = list(pool.map(lambda h: _one(lab, h, args.limit), hosts))
        cells = []
        for name, took, rc, log in results:
            cells.append(f"{name}:{took:.0f}s" + ("" if rc == 0 else f"(exit {rc})")
                         + ("!" if RETRIED in log else ""))
            if rc != 0:
                bad += 1
                keep = lab.sd / "aptstress" / f"round{r}-{name}.log"
                keep.parent.mkdir(exist_ok=True)
                keep.write_text(log)
                cells[-1] += f" [{keep}]"
        slowest = max(results, key=lambda x: x[1])
        print(f"round {r}: load {load}, slowest {slowest[0]} {slowest[1]:.0f}s: " + " ".join(cells),
              flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
