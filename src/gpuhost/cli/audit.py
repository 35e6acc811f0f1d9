"""``gpuhost audit [INVENTORY]``: gather every host's GPU stack in one pass and judge it.

No INVENTORY audits this machine (no SSH). With a pyinfra inventory file, hosts are probed in
parallel (one SSH command each) and reported as they finish. Two answers, never mixed: the
verdict (is the stack right and healthy?) and the security exposure (do NVIDIA's security
bulletins affect it?). Exit 0 clean or warnings only, 1 errors found or a host unreachable (with
``--fail-on security`` also an exposure rated an error), 2 bad input.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import IO, Any

import click

from gpuhost.audit.host import (
    AuditSettings,
    HostReport,
    audit_host,
    failed_host,
    unreachable_host,
)
from gpuhost.audit.report import json_report, junit, prom, table
from gpuhost.audit.summary import exit_code_for
from gpuhost.cli._dataage import warn_if_stale
from gpuhost.cli._options import connect_timeout_option, fail_on_option
from gpuhost.cli._output import check_output_path, write_output
from gpuhost.errors import ConfigError, GpuhostError
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


def _outputs(
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


def _audit_local(settings: AuditSettings, pythons: tuple[str, ...] | None) -> list[HostReport]:
    from gpuhost.facts.local import gather_local

    try:
        facts = gather_local(pythons)
    except GpuhostError as exc:
        return [unreachable_host("localhost", str(exc))]
    return [audit_host("localhost", facts, {}, settings)]


def _audit_fleet(
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

    from gpuhost import fleet
    from gpuhost.facts.gpu_stack import GpuStack
    from gpuhost.inventory.loader import select
    from gpuhost.inventory.profiles import profile_table, profiles_file

    def host_settings(data: Mapping[str, Any]) -> AuditSettings:
        """--profiles for every host, else the host's own gpuhost_profiles_file."""
        if profiles_option or not profiles_file(None, data):
            return settings
        return replace(settings, profiles=profile_table(None, data))

    selection = select(
        inventory, limit=limit, shard=shard, uses_profiles=True, profiles=profiles_option
    )
    click.echo(table.header_line(), file=out)
    # On a terminal a status line (n/N done, failing, elapsed) stays under the host lines.
    progress = FleetProgress(len(selection.names), "audit", out)
    progress.start()

    def fact_kwargs(data: Mapping[str, Any]) -> dict[str, Any]:
        named = data.get(PYTHONS_KEY)
        return {"pythons": list(pythons) if pythons else named}

    reports = []
    try:
        for result in fleet.gather(
            selection,
            GpuStack,
            fact_kwargs=fact_kwargs,
            parallel=parallel,
            connect_timeout=connect_timeout,
        ):
            if result.ok and result.value is not None:
                settings_here = host_settings(result.data)
                report = audit_host(result.name, result.value, result.data, settings_here)
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


@click.command("audit")
@click.argument("inventory", required=False)
@click.option(
    "--limit",
    "limits",
    multiple=True,
    metavar="HOSTS",
    help="Only these hosts or groups (comma separated, globs; repeatable).",
)
@click.option("--json", "json_path", metavar="FILE|-", help="Write the JSON report (schema 1).")
@click.option(
    "--junit", "junit_path", metavar="FILE", help="Write JUnit XML (a case per host and rule)."
)
@click.option(
    "--prom",
    "prom_path",
    metavar="FILE",
    help="Write a node_exporter textfile (replaced atomically; metrics in docs/audit-report.md).",
)
@click.option(
    "--html",
    "html_path",
    metavar="FILE",
    help="Write the HTML fleet report (one self-contained page; see gpuhost report html).",
)
@click.option(
    "--parallel",
    type=click.IntRange(1, 10000),
    default=64,
    show_default=True,
    help="Hosts probed at the same time.",
)
@click.option("--shard", metavar="K/N", help="Audit only the K-th of N slices of the inventory.")
@click.option(
    "--profiles",
    "profiles_file",
    metavar="FILE",
    help="Extra profiles file (YAML) besides gpuhost's own.",
)
@click.option(
    "--python",
    "pythons",
    multiple=True,
    metavar="PATH",
    help="Interpreter whose torch/TensorFlow to read (repeatable; default: inventory "
    "data gpuhost_pythons, else python3).",
)
@connect_timeout_option
@fail_on_option("an error finding or an unreachable host")
@click.option("--quiet", "-q", is_flag=True, help="Only the summary line and errors.")
def command(
    inventory: str | None,
    limits: tuple[str, ...],
    json_path: str | None,
    junit_path: str | None,
    prom_path: str | None,
    html_path: str | None,
    parallel: int,
    shard: str | None,
    profiles_file: str | None,
    pythons: tuple[str, ...],
    connect_timeout: int,
    fail_on: str,
    quiet: bool,
) -> int:
    """Audit the GPU stack of this machine (no INVENTORY, or @local), or of every host in
    INVENTORY (a pyinfra inventory).

    \b
    Example:
      gpuhost audit
      gpuhost audit inventories/fleet.py --json fleet.json --html fleet.html
    """
    limit = ",".join(limits) or None  # one --limit meaning: gpuhost.inventory.loader
    if inventory == "@local":  # pyinfra's name for this machine, as `gpuhost check @local` takes it
        inventory = None
    if pythons:  # a bad --python is bad input (exit 2), not a host that could not be audited
        from gpuhost.probe.script import check_pythons

        try:
            check_pythons(list(pythons))
        except ConfigError as exc:
            raise ConfigError(f"--python {str(exc).removeprefix('gpuhost_pythons: ')}") from None
    if inventory is None and (limit or shard):
        raise click.UsageError("--limit and --shard need an INVENTORY")
    settings = load_settings(profiles_file)
    warn_if_stale()
    problem = prom.target_problem(prom_path) if prom_path else None
    if problem:  # before any host is audited
        raise ConfigError(f"--prom {prom_path}: {problem}")
    for option, path in (
        ("--json", json_path),
        ("--junit", junit_path),
        ("--prom", prom_path),
        ("--html", html_path),
    ):
        if path:  # a report that cannot be written is known before any host is audited
            check_output_path(path, option)
    # With the JSON report on stdout, the readable report goes to stderr.
    out = sys.stderr if json_path == "-" else sys.stdout
    if inventory is None:
        reports = _audit_local(settings, pythons or None)
        extra: dict[str, Any] = {"inventory": None}
    else:
        stream = open("/dev/null", "w") if quiet else out  # noqa: SIM115 - closed below
        try:
            reports, extra = _audit_fleet(
                inventory,
                limit,
                shard,
                parallel,
                settings,
                pythons or None,
                stream,
                connect_timeout,
                profiles_file,
            )
        finally:
            if quiet:
                stream.close()
    matrix_date = getattr(settings.matrix, "updated", None)
    report = _outputs(
        reports, extra, json_path, junit_path, prom_path, matrix_date, html_path, fail_on
    )
    if not quiet and inventory is None:
        click.echo(table.host_block(reports[0]), file=out)
        text = table.findings_text(reports[0])
        click.echo(f"findings:\n{text}" if text else "findings: none", file=out)
        text = table.findings_text(reports[0], security=True)
        click.echo(f"security:\n{text}" if text else "security: no known advisory", file=out)
    elif not quiet:
        text = table.grouped_findings_text(reports)
        click.echo(f"findings:\n{text}" if text else "findings: no errors or warnings", file=out)
        text = table.grouped_findings_text(reports, security=True)
        if text:
            click.echo(f"security:\n{text}", file=out)
    summary_text = table.fleet_text(report["summary"])
    if not quiet:
        data = report["data"]
        click.echo(f"data: {data['date']} ({data['origin']})", file=out)
    if quiet:  # what --help promises: the error findings and the summary (verdict) lines
        errors = [
            line
            for security in (False, True)
            for line in table.grouped_findings_text(reports, security=security).splitlines()
            if line.lstrip().startswith("ERROR ")
        ]
        verdict = [
            line for line in summary_text.splitlines() if line.startswith(("verdict:", "security:"))
        ]
        summary_text = "\n".join(errors + (verdict or summary_text.splitlines()[-1:]))
    click.echo(summary_text, file=out)
    return exit_code_for(report["summary"], fail_on)
