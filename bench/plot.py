#!/usr/bin/env python3
"""docs/benchmarks-audit.png (time vs host count per tool) and Markdown tables from bench/results.

    bench/.venv-ansible/bin/python bench/plot.py      (matplotlib lives in the bench venv only)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
PNG = BENCH.parent / "docs" / "benchmarks-audit.png"
LABELS = {
    "gpuhost": "gpuhost audit",
    "floor-cold": "ssh floor (fresh connections)",
    "floor-mux": "ssh floor (warm ControlMaster)",
    "ansible-raw": "Ansible raw: ssh launcher for gpuhost's probe",
    "ansible-script": "Ansible script (probe)",
    "ansible-shell": "Ansible shell (probe)",
    "ansible-modules": "Ansible modules playbook (facts + judgement)",
    "gpuhost-null": "gpuhost fleet runner, `true` only",
    "floor-cold-null": "ssh floor (fresh), `true` only",
    "floor-mux-null": "ssh floor (mux), `true` only",
    "ansible-raw-null": "Ansible raw, `true` only",
}


def by_tool(series: list[dict]) -> dict[str, dict[int, dict]]:
    tools: dict[str, dict[int, dict]] = {}
    for row in series:
        tools.setdefault(row["tool"], {})[row["hosts"]] = row
    return tools


def table(tools: dict[str, dict[int, dict]]) -> str:
    counts = sorted({n for rows in tools.values() for n in rows})
    lines = ["| tool | " + " | ".join(f"{n} hosts" for n in counts) + " |",
             "|---|" + "---:|" * len(counts)]
    for tool, rows in tools.items():
        cells = []
        for n in counts:
            row = rows.get(n)
            cells.append(f"**{row['median_s']:.2f} s** ({row['min_s']:.2f}-{row['max_s']:.2f})"
                         if row else "-")
        lines.append(f"| {LABELS.get(tool, tool)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ratios(tools: dict[str, dict[int, dict]]) -> str:
    lines = ["| hosts | gpuhost / floor (fresh) | gpuhost / floor (mux) | Ansible raw / gpuhost "
             "| Ansible modules / gpuhost |", "|---:|---:|---:|---:|---:|"]
    for n, row in sorted(tools.get("gpuhost", {}).items()):
        g = row["median_s"]

        def cell(tool: str, inverse: bool = False, n: int = n, g: float = g) -> str:
            other = tools.get(tool, {}).get(n)
            if not other:
                return "-"
            return f"{(other['median_s'] / g) if inverse else (g / other['median_s']):.2f}x"

        lines.append(f"| {n} | {cell('floor-cold')} | {cell('floor-mux')} | "
                     f"{cell('ansible-raw', True)} | {cell('ansible-modules', True)} |")
    return "\n".join(lines)


def plot(panels: list[tuple[str, dict[str, dict[int, dict]]]]) -> None:
    """One panel per results file (e.g. before and after the speed fixes), same y scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 4.5), dpi=110,
                             sharey=True, squeeze=False)
    for ax, (title, tools) in zip(axes[0], panels, strict=True):
        for tool, rows in tools.items():
            counts = sorted(rows)
            ax.plot(counts, [rows[n]["median_s"] for n in counts], marker="o",
                    label=LABELS.get(tool, tool), linewidth=2.4 if tool == "gpuhost" else 1.4,
                    linestyle="--" if tool.endswith("-null") else "-")
        ax.set_xlabel("hosts")
        ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_xticks(sorted({n for rows in tools.values() for n in rows}))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("wall time, median (s, log scale)")
    fig.suptitle("Audit of N lab hosts (the hosts share the controller's 2 cores)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(PNG)


def _load_avg(series: list[dict]) -> str:
    loads = [r["load1_start"] for row in series for r in row["runs"] if r.get("load1_start")]
    return f"load avg at run starts {min(loads):.0f}-{max(loads):.0f}" if loads else "load unknown"


def main() -> int:
    panels = []
    for name, title in (("audit-3", "2026-11-22, lab bench3"),):
        path = RESULTS / f"{name}.json"
        if path.exists():
            series = json.loads(path.read_text())["series"]
            tools = by_tool(series)
            panels.append((f"{title} ({_load_avg(series)})", tools))
            print(f"{name}:\n\n{table(tools)}\n\n{ratios(tools)}\n")
    if not panels:
        print(f"plot: no {RESULTS}/audit*.json: run bench/audit.py first", file=sys.stderr)
        return 2
    plot(panels)
    print(f"wrote {PNG}")
    for name in ("provision-after", "memory-3", "memory-3-modules"):
        extra = RESULTS / f"{name}.json"
        if extra.exists():
            data = json.loads(extra.read_text())
            print(f"\n{name}:")
            for row in data["series"]:
                keys = {k: v for k, v in row.items() if k not in ("runs", "command")}
                print(f"  {keys}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
