#!/usr/bin/env python3
"""Controller memory at N hosts: gpuhost audit vs Ansible, peak RSS and tree PSS.

    .venv/bin/python bench/memory.py --lab bench --hosts 128 --runs 3

The commands are bench/audit.py's (gpuhost audit, Ansible raw with the probe, the Ansible
modules playbook).

peak RSS: /usr/bin/time's maximum resident set of the largest single process (gpuhost is one
process: gevent + paramiko, no forks; for Ansible this is only the biggest of its forks).
tree PSS: the summed proportional set size of the command and all its descendants, sampled every
0.1 s (shared pages counted once) - the honest total for a forking tool (Ansible's forks = N, and
the ssh clients of both Ansible and the floor). Results: bench/results/memory.json.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from audit import check_reports, command_for, write_probe  # noqa: E402
from benchlib import (  # noqa: E402
    REPO,
    WORK,
    BenchError,
    TreeSampler,
    load_lab,
    machine,
    quote,
    run_bench,
    save,
)


def measure(argv: list[str], env: dict[str, str] | None) -> dict[str, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(["/usr/bin/time", "-f", "BENCH_MAXRSS_KB=%M", *argv], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO)
    sampler = TreeSampler(proc.pid)
    sampler.start()
    _, err = proc.communicate(timeout=1800)
    seconds = time.perf_counter() - start
    sampler.stop.set()
    sampler.join()
    text = err.decode(errors="replace")
    rss = [int(line.split("=", 1)[1]) for line in text.splitlines()
           if line.startswith("BENCH_MAXRSS_KB=")]
    if proc.returncode not in (0, 1) or not rss:
        raise BenchError(f"{quote(argv)} failed (rc {proc.returncode}): {text[-500:]}")
    return {"seconds": round(seconds, 3), "peak_rss_mb": round(rss[-1] / 1024, 1),
            "tree_pss_mb": round(sampler.peak_kb / 1024, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lab", default=None)
    parser.add_argument("--hosts", type=int, default=128)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default="memory")
    parser.add_argument("--tools", default="gpuhost,ansible-raw,ansible-modules",
                        help="tools of bench/audit.py, comma separated")
    args = parser.parse_args(argv)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    lab = load_lab(args.lab, args.hosts)
    probe = write_probe()
    commands = {tool: command_for(tool, lab, args.hosts, probe) for tool in tools}
    payload: dict = {"bench": "memory", "hosts": args.hosts, "machine": machine(),
                     "series": []}
    runs: dict[str, list[dict[str, float]]] = {tool: [] for tool in commands}
    for _ in range(args.runs):
        for tool, (argv_, env) in commands.items():
            shutil.rmtree(WORK / "ansible-tree", ignore_errors=True)
            runs[tool].append(measure(argv_, env))
            check_reports(tool, args.hosts)
    for tool, items in runs.items():
        row = {
            "tool": tool,
            "hosts": args.hosts,
            "command": quote(commands[tool][0]),
            "median_peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in items),
            "median_tree_pss_mb": statistics.median(r["tree_pss_mb"] for r in items),
            "runs": items,
        }
        payload["series"].append(row)
        print(f"  {tool:12} {args.hosts} hosts: peak RSS {row['median_peak_rss_mb']} MB, "
              f"tree PSS {row['median_tree_pss_mb']} MB (medians of {len(items)})")
    print(f"results: {save(args.out, payload)}")
    return 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
