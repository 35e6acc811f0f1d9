"""``gpuhost audit [INVENTORY]``: gather every host's GPU stack in one pass and judge it.

No INVENTORY audits this machine (no SSH). With a pyinfra inventory file, hosts are probed in
parallel (one SSH command each) and reported as they finish. Two answers, never mixed: the
verdict (is the stack right and healthy?) and the security exposure (do NVIDIA's security
bulletins affect it?). Exit 0 clean or warnings only, 1 errors found or a host unreachable (with
``--fail-on security`` also an exposure rated an error), 2 bad input.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

import click

from gpuhost.audit.report import table
from gpuhost.audit.summary import exit_code_for
from gpuhost.audit_run import (
    audit_fleet,
    audit_local,
    check_pythons_option,
    check_report_paths,
    load_settings,
    write_reports,
)
from gpuhost.cli._echo import warn_if_stale
from gpuhost.cli._options import connect_timeout_option, fail_on_option


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
    check_pythons_option(pythons)  # a bad --python is bad input (exit 2)
    if inventory is None and (limit or shard):
        raise click.UsageError("--limit and --shard need an INVENTORY")
    settings = load_settings(profiles_file)
    warn_if_stale()
    check_report_paths(json_path, junit_path, prom_path, html_path)  # before any host is audited
    # With the JSON report on stdout, the readable report goes to stderr.
    out = sys.stderr if json_path == "-" else sys.stdout
    if inventory is None:
        reports = audit_local(settings, pythons or None)
        extra: dict[str, Any] = {"inventory": None}
    else:
        sink = open(os.devnull, "w") if quiet else contextlib.nullcontext(out)  # noqa: SIM115
        with sink as stream:  # the readable report, or nothing with --quiet
            reports, extra = audit_fleet(
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
    matrix_date = getattr(settings.matrix, "updated", None)
    report = write_reports(
        reports, extra, json_path, junit_path, prom_path, matrix_date, html_path, fail_on
    )
    click.echo(table.closing_text(reports, report, local=inventory is None, quiet=quiet), file=out)
    return exit_code_for(report["summary"], fail_on)
