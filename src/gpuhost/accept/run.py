"""``gpuhost accept``'s run: hosts in parallel, cross-host stages, records, gate, reports.

``run_accept(request, echo)``: the hosts selected (``checks_support.inventory.load_hosts``), the
gate's precondition (every node drained) and the output paths checked before any host is
touched; then every host runs the agent at once (``remote.Remote``), its progress printed as it
comes; the per-host stages are judged (``judge.judge_host``); pairwise ``ib_write_bw`` between
neighbouring hosts (``pairs``) and, with ``--collective``, the multi-node collective tier run
across all; outliers against the run's median per GPU model; one record per host, kept in the
state folder (``record.keep``); the gate applied per host; ``--json`` written. Ctrl-C/SIGTERM:
every agent is told to stop (its GEMM load ends), the records are written as interrupted, no
node is resumed, and ``Stopped`` ends the command (130/143).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuhost.accept import gate, pairwise, reports
from gpuhost.accept.judge import (
    COULD_NOT_RUN,
    FAIL,
    SKIPPED,
    StageResult,
    could_not_run,
    host_verdict,
    judge_host,
)
from gpuhost.accept.model import AcceptRequest, HostRun
from gpuhost.accept.options import STAGES, AcceptOptions
from gpuhost.accept.record import build_record, keep, outliers
from gpuhost.accept.remote import Remote
from gpuhost.accept.telemetry import load_limits
from gpuhost.checks_support.inventory import LOCAL, CheckHost, load_hosts, ssh_config
from gpuhost.errors import GpuhostError
from gpuhost.inventory.contract import value
from gpuhost.locks import Lease, acquire, host_locks
from gpuhost.output import check_output_path, write_output
from gpuhost.signals import StopOnSignals

Echo = Callable[..., object]
PROGRESS_EVERY_S = 10.0


def _python(host: CheckHost) -> str:
    pythons = value(host.data, "gpuhost_pythons") or []
    return str(pythons[0]) if pythons else "python3"


def _progress(run: HostRun, echo: Echo) -> Callable[[str], None]:
    def said(line: str) -> None:
        stage, _, counts = line.partition(" ")
        now = time.monotonic()
        first = stage not in run.last_progress
        if first or now - run.last_progress[stage] >= PROGRESS_EVERY_S:
            run.last_progress[stage] = now
            shown = f"{stage} started" if counts == "0/1" else f"{stage} {counts} s"
            echo(f"{run.host.name}: {shown}")

    return said


def _run_one(run: HostRun, options: AcceptOptions, echo: Echo) -> None:
    nccl = str(value(run.host.data, "gpuhost_nccl_tests") or "")
    try:
        run.doc = run.remote.run_agent(options, _python(run.host), nccl, _progress(run, echo))
    except GpuhostError as exc:
        run.error = str(exc)
    echo(f"{run.host.name}: agent finished" + (f" ({run.error})" if run.error else ""))


def _stage_results(run: HostRun, options: AcceptOptions) -> list[StageResult]:
    if run.doc is None:
        why = run.error or "no result"
        return [
            StageResult(s, SKIPPED, ("skipped (--skip)",))
            if not options.runs(s)
            else could_not_run(s, why)
            for s in STAGES[:6]
        ]
    return judge_host(run.doc, run.host.data, options)


def _first_problem(stages: list[StageResult]) -> str | None:
    for stage in stages:
        if stage.verdict in (FAIL, COULD_NOT_RUN) and stage.lines:
            return f"{stage.stage}: {stage.lines[0]}"
    return None


def _records(
    runs: list[HostRun], request: AcceptRequest, interrupted: bool
) -> list[dict[str, Any]]:
    records = []
    for run in runs:
        stopped = interrupted or bool(run.doc and run.doc.get("interrupted"))
        verdict = COULD_NOT_RUN if stopped else host_verdict(run.stages)
        records.append(
            build_record(run.host.name, verdict, run.stages, run.doc, stopped, run.error)
        )
    model_of = {
        r["host"]: str(
            next(
                (s["measured"].get("gpu_model") for s in r["stages"] if s["stage"] == "inventory"),
                "",
            )
            or ""
        )
        for r in records
    }
    for host, lines in outliers(records, model_of, load_limits().outlier_fraction).items():
        record = next(r for r in records if r["host"] == host)
        record["outliers"] = lines
        if record["verdict"] != COULD_NOT_RUN:
            record["verdict"] = FAIL
    return records


def report_lines(records: list[dict[str, Any]]) -> list[str]:
    lines = []
    for record in records:
        history = record.get("history") or {}
        lemon = " LEMON" if history.get("lemon") else ""
        counts = f" (runs {history['runs']}, failed {history['failed']}{lemon})" if history else ""
        lines.append(f"{record['host']}: {record['verdict'].upper()}{counts}")
        for stage in record["stages"]:
            shown = stage["verdict"].upper()
            first = stage["lines"][0] if stage["lines"] else ""
            lines.append(f"  {stage['stage']:<12} {shown:<14} {first}".rstrip())
            for more in stage["lines"][1:6]:
                lines.append(f"  {'':<12} {'':<14} {more}")
        lines += [f"  outlier: {line}" for line in record.get("outliers") or []]
    return lines


def _outputs(request: AcceptRequest) -> dict[str, str]:
    given = {"json": request.json_path, "junit": request.junit_path, "prom": request.prom_path}
    return {option: path for option, path in given.items() if path}


def _setup(
    request: AcceptRequest,
) -> tuple[list[HostRun], dict[str, str], str | None, Lease]:
    for option, path in _outputs(request).items():
        check_output_path(path, f"--{option}")
    load_limits()  # a bad data/acceptance.yaml is one line now, not after hours of soak
    hosts = load_hosts(request.inventory, request.limit)
    # one writer per host (provision, upgrade, another acceptance run): refused, never waited
    lease = acquire(request.state_dir, host_locks(h.name for h in hosts), "accept")
    names: dict[str, str] = {}
    try:
        if request.options.gate:
            names = gate.node_names([(h.name, h.data) for h in hosts], request.options.gate)
            gate.before(request.options.gate, names)
    except BaseException:
        lease.release()
        raise
    folder = None if request.inventory == LOCAL else tempfile.mkdtemp(prefix="gpuhost-accept-")
    config = None
    if folder:
        config = Path(folder, "ssh_config")
        config.write_text(ssh_config(hosts, folder))
    return [HostRun(h, Remote(h, config)) for h in hosts], names, folder, lease


def run_accept(request: AcceptRequest, echo: Echo) -> int:
    """The run (module docstring); exit 0 when every host passed, else 1."""
    runs, names, folder, lease = _setup(request)
    options = request.options
    try:
        echo(
            f"gpuhost accept: {len(runs)} host(s), soak {options.duration_s:g} s, stages: "
            + ", ".join(s for s in STAGES if options.runs(s))
        )

        def stop_all() -> None:
            for run in runs:
                run.remote.stop()

        with StopOnSignals(stop_all, "acceptance run") as signals:
            with ThreadPoolExecutor(max_workers=max(1, min(request.parallel, len(runs)))) as pool:
                list(pool.map(lambda r: _run_one(r, options, echo), runs))
            for run in runs:
                run.stages = _stage_results(run, options)
            if signals.received is None:
                cross = pairwise.cross_host_stages(runs, request, echo)
                for run in runs:
                    run.stages += cross.get(run.host.name, [])
        interrupted = signals.received is not None
        records = _records(runs, request, interrupted)
        return _finish(records, request, names, interrupted, signals, echo)
    finally:
        if folder:
            for run in runs:
                run.remote.close()
            shutil.rmtree(folder, ignore_errors=True)
        lease.release()


def _finish(
    records: list[dict[str, Any]],
    request: AcceptRequest,
    names: dict[str, str],
    interrupted: bool,
    signals: StopOnSignals,
    echo: Echo,
) -> int:
    for record in records:
        record["history"] = keep(request.state_dir, record)
    for line in report_lines(records):
        echo(line)
    for option, path in _outputs(request).items():
        if option != "json":
            writer = reports.junit if option == "junit" else reports.prometheus
            write_output(path, writer(records), f"--{option}")
    if request.json_path:
        document = {
            "schema": 1,
            "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "hosts": records,
        }
        write_output(request.json_path, json.dumps(document, indent=1) + "\n", "--json")
    for record in records:
        if request.options.gate:
            stages = [
                replace(StageResult(s["stage"], s["verdict"]), lines=tuple(s["lines"]))
                for s in record["stages"]
            ]
            first = _first_problem(stages) or (record["outliers"] or [None])[0]
            done = gate.after(
                request.options.gate,
                names[record["host"]],
                record["verdict"],
                first,
                record["interrupted"],
            )
            if done:
                echo(f"gpuhost: {done}", err=True)
    if interrupted:
        raise signals.stopped(
            f"gpuhost: acceptance stopped by {signals.signal_name}; the load was stopped on "
            "every host, the records say interrupted and no node was resumed"
        )
    return 0 if all(r["verdict"] == "pass" for r in records) else 1
