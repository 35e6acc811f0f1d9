"""The stages judged across hosts: pairwise ``ib_write_bw`` and the multi-node collective tier.

``pairs(names)`` (pure): each host the client of its neighbour in inventory order (a ring), so
every host sends and receives once. For a pair, the server ``ib_write_bw`` starts on one host
(bounded by ``timeout``), the client on the other connects to the server's address
(``ssh_hostname``, else its name), both with ``--use_cuda=0`` (GPUDirect RDMA from GPU 0)
and ``--report_gbits``; the client's table (``parsers.benchmarks.parse_perftest_bw``) is the
measure, against the user's floor (``--floor ib=N Gb/s``; none is sourced). Inventory data
``gpuhost_ib_device`` names the HCA (default: perftest's first).

The collective stage runs ``gpuhost check INVENTORY --tier collective``'s run
(``collective.hosts``/``collective.run``) over the same hosts; its setup problems (no nccl-tests
folder, no launcher) are its COULD-NOT-RUN reason.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpuhost.accept.judge import COULD_NOT_RUN, FAIL, PASS, SKIPPED, StageResult, could_not_run
from gpuhost.accept.model import AcceptRequest, HostRun
from gpuhost.errors import GpuhostError, ParseError
from gpuhost.inventory.contract import value
from gpuhost.parsers.benchmarks import parse_perftest_bw

IB_SECONDS = 10
IB_TIMEOUT_S = 120.0
NOT_INSTALLED = 127


def pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    """[(server, client)]: a ring over ``names``; one pair for two hosts; none for fewer."""
    if len(names) < 2:
        return []
    if len(names) == 2:
        return [(names[0], names[1])]
    return [(names[(i + 1) % len(names)], names[i]) for i in range(len(names))]


def ib_command(device: str | None, server: str | None) -> str:
    argv = ["ib_write_bw", "--report_gbits", "--use_cuda=0", "-D", str(IB_SECONDS)]
    if device:
        argv += ["-d", device]
    if server:
        argv.append(server)
    return f"timeout {int(IB_TIMEOUT_S)} " + " ".join(shlex.quote(a) for a in argv)


def _one_pair(
    server: HostRun, client: HostRun, floor: float | None
) -> tuple[str, float | None, str | None]:
    """(verdict, average Gb/s, problem line) of one pair."""
    address = str(server.host.data.get("ssh_hostname") or server.host.name)
    device = value(server.host.data, "gpuhost_ib_device")
    with ThreadPoolExecutor(2) as pool:
        serving = pool.submit(server.remote.run, ib_command(device, None), IB_TIMEOUT_S + 30)
        time.sleep(2)  # the server listens before the client connects (perftest's own advice)
        rc, out = client.remote.run(
            ib_command(value(client.host.data, "gpuhost_ib_device"), address), IB_TIMEOUT_S + 30
        )
        serving.result()
    label = f"{client.host.name} -> {server.host.name}"
    if rc == NOT_INSTALLED or "not found" in out and "ib_write_bw" in out:
        return COULD_NOT_RUN, None, f"{label}: ib_write_bw (perftest) is not installed"
    try:
        result = parse_perftest_bw(out)
    except ParseError:
        tail = out.strip().splitlines()[-1][:200] if out.strip() else f"exit {rc}"
        return FAIL, None, f"{label}: ib_write_bw failed: {tail}"
    if floor is not None and result.average_gbits < floor:
        return (
            FAIL,
            result.average_gbits,
            (f"{label}: {result.average_gbits:g} Gb/s, below the floor {floor:g} Gb/s"),
        )
    return PASS, result.average_gbits, None


def ib_stages(runs: Sequence[HostRun], floor: float | None) -> dict[str, StageResult]:
    ready = [r for r in runs if r.doc is not None]
    if len(runs) < 2:
        return {
            r.host.name: could_not_run("ib", "pairwise ib_write_bw needs at least two hosts")
            for r in runs
        }
    by_name = {r.host.name: r for r in ready}
    found: dict[str, list[tuple[str, float | None, str | None]]] = {r.host.name: [] for r in runs}
    for server, client in pairs([r.host.name for r in ready]):
        try:
            outcome = _one_pair(by_name[server], by_name[client], floor)
        except GpuhostError as exc:
            outcome = (COULD_NOT_RUN, None, str(exc))
        found[server].append(outcome)
        found[client].append(outcome)
    out = {}
    for run in runs:
        got = found[run.host.name]
        if not got:
            out[run.host.name] = could_not_run("ib", "no partner host reachable for ib_write_bw")
            continue
        verdicts = {v for v, _, _ in got}
        verdict = FAIL if FAIL in verdicts else COULD_NOT_RUN if COULD_NOT_RUN in verdicts else PASS
        lines = tuple(line for _, _, line in got if line) or (
            "average "
            + ", ".join(f"{g:g}" for _, g, _ in got if g is not None)
            + " Gb/s"
            + ("" if floor else " (no floor given: --floor ib=N Gb/s)"),
        )
        measured = {"average_gbits": [g for _, g, _ in got if g is not None]}
        out[run.host.name] = StageResult(
            "ib", verdict, lines, measured, {"gbits": floor} if floor else {}
        )
    return out


def collective_stages(runs: Sequence[HostRun], request: AcceptRequest) -> dict[str, StageResult]:
    from gpuhost.collective.hosts import Options, executor, setup_from_inventory
    from gpuhost.collective.run import run_collective

    names = [r.host.name for r in runs]
    try:
        setup = setup_from_inventory(request.inventory, request.limit, Options())
        with executor(request.inventory, request.limit, setup) as execute:
            report = run_collective(setup, execute)
    except GpuhostError as exc:
        return {n: could_not_run("collective", str(exc)) for n in names}
    verdict = {"pass": PASS, "fail": FAIL}.get(report.verdict, COULD_NOT_RUN)
    lines = tuple(
        f"{r.test} {r.stage} {'+'.join(r.nodes)}: {r.verdict} {r.reason}"[:300]
        for r in report.runs[:10]
    )
    measured: dict[str, Any] = {"floor_busbw_gbs": setup.floor.busbw_gbs}
    return {n: StageResult("collective", verdict, lines, measured) for n in names}


def cross_host_stages(
    runs: Sequence[HostRun], request: AcceptRequest, echo: Callable[..., object]
) -> dict[str, list[StageResult]]:
    options = request.options
    out: dict[str, list[StageResult]] = {r.host.name: [] for r in runs}
    if options.runs("ib"):
        echo("ib: pairwise ib_write_bw")
        for name, stage in ib_stages(runs, options.floors.get("ib")).items():
            out[name].append(stage)
    else:
        for run in runs:
            out[run.host.name].append(StageResult("ib", SKIPPED, ("skipped (--skip)",)))
    if not options.runs("collective"):
        for run in runs:
            out[run.host.name].append(StageResult("collective", SKIPPED, ("skipped (--skip)",)))
    elif len(runs) < 2:
        for run in runs:
            out[run.host.name].append(
                could_not_run("collective", "the multi-node collective needs at least two hosts")
            )
    else:
        echo("collective: the multi-node collective tier")
        for name, stage in collective_stages(runs, request).items():
            out[name].append(stage)
    return out
