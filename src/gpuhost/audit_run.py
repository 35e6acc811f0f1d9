"""``gpuhost audit``'s run: the matrix and profiles hosts are judged against, this machine or an
inventory's hosts probed (``fleet.gather``: one SSH command each, reported as they finish) and
judged (``audit.host``), and the report files written (JSON, JUnit, Prometheus, HTML).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from gpuhost.audit.host import (
    AuditSettings,
    HostReport,
    audit_host,
    failed_host,
    unreachable_host,
)
from gpuhost.audit.report import json_report, junit, prom, table
from gpuhost.errors import ConfigError, GpuhostError
from gpuhost.fabric.counters import CounterStore
from gpuhost.fabric.judge import snapshot
from gpuhost.facts.host_facts import HostFacts
from gpuhost.fleet import gather
from gpuhost.inventory.loader import select
from gpuhost.output import check_output_path, write_output
from gpuhost.terminal import FleetProgress

PYTHONS_KEY = "gpuhost_pythons"


def load_settings(profiles_file: str | None) -> AuditSettings:
    """The matrix and the profiles every host is judged against."""
    from gpuhost import matrix as matrix_pkg

    matrix = matrix_pkg.load_matrix()
    load_profiles = getattr(matrix_pkg, "load_profiles", None)
    if load_profiles is None:
        if profiles_file:
            raise ConfigError(
                f"--profiles {profiles_file}: profiles are not supported by this build"
            )
        return AuditSettings(matrix=matrix, profiles={})
    from gpuhost.inventory.profiles import profile_table

    return AuditSettings(matrix=matrix, profiles=profile_table(profiles_file))


def _write(path: str, text: str, what: str) -> None:
    write_output(path, text, f"--{what}")


def write_reports(
    reports: list[HostReport],
    extra: Mapping[str, Any],
    json_path: str | None,
    junit_path: str | None,
    prom_path: str | None,
    matrix_date: str | None = None,
    html_path: str | None = None,
    fail_on: str = "compatibility",
) -> dict[str, Any]:
    report = json_report.build_report(reports, extra, matrix_date)
    if json_path:
        _write(json_path, json_report.dumps(report), "json")
    if junit_path:
        _write(junit_path, junit.render(reports, fail_on), "junit")
    if prom_path:
        try:  # a temporary file renamed over the target: node_exporter never reads half of it
            prom.write(prom_path, reports, report["summary"])
        except OSError as exc:
            raise ConfigError(f"--prom {prom_path}: cannot write ({exc.strerror or exc})") from exc
    if html_path:
        from gpuhost.audit.report import html

        _write(html_path, html.render(report), "html")
    return report


def counter_store() -> CounterStore | None:
    """Where the RDMA error counters are kept between runs: the state folder
    ($GPUHOST_STATE_DIR, else the XDG state folder); None when it is unsafe to use."""
    from gpuhost.statedir import check_state_dir, default_state_dir

    state = default_state_dir(os.environ, Path.home())
    try:
        check_state_dir(state)
    except ConfigError as exc:
        print(f"gpuhost: fabric counters not compared: {exc}", file=sys.stderr)
        return None
    return CounterStore(state)


def judge_host(
    name: str,
    facts: HostFacts,
    data: Mapping[str, Any],
    settings: AuditSettings,
    open_store: Callable[[], CounterStore | None],
) -> HostReport:
    """``audit_host`` with the host's fabric counters of the last run, then this run's kept;
    ``open_store`` is asked only for a host with RDMA counters (a run without any never reads
    the state folder)."""
    counters = snapshot(facts.fabric.ports)
    store = open_store() if counters else None
    previous = store.load(name) if store is not None else None
    report = audit_host(name, facts, data, settings, previous)
    if store is not None and counters:
        try:
            store.save(name, counters)
        except ConfigError as exc:
            print(f"gpuhost: {exc}", file=sys.stderr)
    return report


def audit_local(settings: AuditSettings, pythons: tuple[str, ...] | None) -> list[HostReport]:
    from gpuhost.facts.local import gather_local

    try:
        facts = gather_local(pythons)
    except GpuhostError as exc:
        return [unreachable_host("localhost", str(exc))]
    return [judge_host("localhost", facts, {}, settings, counter_store)]


def audit_fleet(
    inventory: str,
    limit: str | None,
    shard: str | None,
    parallel: int,
    settings: AuditSettings,
    pythons: tuple[str, ...] | None,
    out: IO[str],
    connect_timeout: int = 10,
    profiles_option: str | None = None,
) -> tuple[list[HostReport], dict[str, Any]]:
    from dataclasses import replace

    from gpuhost.facts.gpu_stack import GpuStack
    from gpuhost.inventory.profiles import profile_table, profiles_file

    def host_settings(data: Mapping[str, Any]) -> AuditSettings:
        """--profiles for every host, else the host's own gpuhost_profiles_file."""
        if profiles_option or not profiles_file(None, data):
            return settings
        return replace(settings, profiles=profile_table(None, data))

    selection = select(
        inventory, limit=limit, shard=shard, uses_profiles=True, profiles=profiles_option
    )
    out.write(table.header_line() + "\n")
    out.flush()
    # On a terminal a status line (n/N done, failing, elapsed) stays under the host lines.
    progress = FleetProgress(len(selection.names), "audit", out)
    progress.start()

    def fact_kwargs(data: Mapping[str, Any]) -> dict[str, Any]:
        named = data.get(PYTHONS_KEY)
        return {"pythons": list(pythons) if pythons else named}

    reports = []
    store = functools.cache(counter_store)  # opened once, at the first host with counters
    try:
        for result in gather(
            selection,
            GpuStack,
            fact_kwargs=fact_kwargs,
            parallel=parallel,
            connect_timeout=connect_timeout,
        ):
            if result.ok and result.value is not None:
                settings_here = host_settings(result.data)
                report = judge_host(result.name, result.value, result.data, settings_here, store)
            elif result.reachable:
                report = failed_host(result.name, result.error or "no result")
            else:
                report = unreachable_host(result.name, result.error or "no result")
            reports.append(report)
            failing = report.verdict in ("error", "unreachable")
            progress.host_done(table.host_line(report, out), failing)
    finally:
        progress.close()
    extra = {"inventory": inventory, "limit": limit, "shard": selection.shard_label}
    return reports, extra


def check_pythons_option(pythons: tuple[str, ...]) -> None:
    """``--python`` paths are checked before any host is audited: a bad one is bad input, not a
    host that could not be audited."""
    if not pythons:
        return
    from gpuhost.probe.script import check_pythons

    try:
        check_pythons(list(pythons))
    except ConfigError as exc:
        raise ConfigError(f"--python {str(exc).removeprefix('gpuhost_pythons: ')}") from None


def check_report_paths(
    json_path: str | None, junit_path: str | None, prom_path: str | None, html_path: str | None
) -> None:
    """A report that cannot be written is known before any host is audited."""
    problem = prom.target_problem(prom_path) if prom_path else None
    if problem:
        raise ConfigError(f"--prom {prom_path}: {problem}")
    for option, path in (
        ("--json", json_path),
        ("--junit", junit_path),
        ("--prom", prom_path),
        ("--html", html_path),
    ):
        if path:
            check_output_path(path, option)
