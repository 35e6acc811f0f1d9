"""``gpuhost report merge A.json B.json ... -o OUT``: one fleet report from shard reports.

Each input must be a schema-1 audit report (``gpuhost audit --json``). Hosts are concatenated
(a host present in two inputs is an error: the shards overlapped) and the summary — verdicts,
stack groups, outliers — is computed again over all of them, exactly as one run would.
"""

from __future__ import annotations

from typing import Any

import click

from gpuhost.audit.report import json_report
from gpuhost.audit.report.table import fleet_text
from gpuhost.audit.summary import exit_code_for, with_security
from gpuhost.cli._options import fail_on_option
from gpuhost.cli._output import write_output
from gpuhost.errors import ConfigError

HOST_KEYS = ("name", "reachable", "facts", "findings", "verdict")


def _read(path: str) -> dict[str, Any]:
    """One input report, checked by shape against its JSON Schema (field path in the message)."""
    from gpuhost.readers import check_shape, read_json

    what = "a gpuhost audit --json report"
    data = read_json(path, what)
    if not isinstance(data, dict) or data.get("schema") != json_report.SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ConfigError(
            f"{path}: expected a gpuhost audit report with schema {json_report.SCHEMA}, "
            f"found schema {found!r}"
        )
    check_shape(data, "merged-report" if "merged_from" in data else "audit-report", path)
    hosts = data.get("hosts")
    if not isinstance(hosts, list):
        raise ConfigError(f"{path}: 'hosts' must be a list, found {type(hosts).__name__}")
    if not hosts:  # merge said 'verdict ok' and html 'unreachable' for such a report
        raise ConfigError(f"{path}: the report lists no hosts (gpuhost audit always lists some)")
    for index, host in enumerate(hosts):
        if not isinstance(host, dict) or any(key not in host for key in HOST_KEYS):
            raise ConfigError(f"{path}: hosts[{index}] must have the keys {', '.join(HOST_KEYS)}")
    return data


def merge_reports(paths: list[str]) -> dict[str, Any]:
    """One schema-1 report from several; ConfigError on bad input or overlapping hosts."""
    seen: dict[str, str] = {}
    hosts: list[dict[str, Any]] = []
    shards: list[str] = []
    dates: list[str] = []
    for path in paths:
        data = _read(path)
        if isinstance(data.get("matrix_date"), str):
            dates.append(data["matrix_date"])
        summary = data.get("summary")
        if isinstance(summary, dict) and summary.get("shard"):
            shards.append(str(summary["shard"]))
        for host in data["hosts"]:
            name = str(host["name"])
            if name in seen:
                raise ConfigError(
                    f"{path}: host {name!r} is also in {seen[name]}; the inputs overlap (each "
                    "host must come from exactly one shard)"
                )
            seen[name] = path
            hosts.append(with_security(host))  # a report written before the split: apart now
    hosts.sort(key=lambda h: str(h["name"]))
    # Shards judged against different matrix data: the merged report names the oldest.
    return json_report.report_from_entries(
        hosts, {"merged_from": list(paths), "shards": shards}, min(dates, default=None)
    )


@click.group("report")
def command() -> None:
    """Work with audit reports (JSON, schema 1).

    \b
    Example:
      gpuhost report html fleet.json -o fleet.html
    """


@command.command("merge")
@click.argument("reports", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    metavar="FILE|-",
    help="Where to write the merged report.",
)
@fail_on_option("an error finding or an unreachable host")
def merge(reports: tuple[str, ...], output: str, fail_on: str) -> int:
    """Merge the JSON reports of inventory shards (gpuhost audit --shard K/N --json ...).

    \b
    Example:
      gpuhost report merge shard1.json shard2.json -o fleet.json
    """
    merged = merge_reports(list(reports))
    text = json_report.dumps(merged)
    write_output(output, text, "-o")
    if output != "-":
        click.echo(fleet_text(merged["summary"]))
    return exit_code_for(merged["summary"], fail_on)


def write_html(report: dict[str, Any], output: str, option: str = "-o") -> None:
    """Write the HTML fleet report; ConfigError naming the option when it cannot be written."""
    from gpuhost.audit.report import html

    write_output(output, html.render(report), option)  # "-": standard output


@command.command("html")
@click.argument("report")
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    metavar="FILE|-",
    help="Where to write the HTML page (one self-contained file; - for standard output).",
)
def html_cmd(report: str, output: str) -> int:
    """Render a JSON audit report as one self-contained HTML page.

    The page needs no network when opened: verdict counts, identical-stack groups as a chart,
    outliers highlighted, findings filterable by rule, severity and host, each host's stack.

    \b
    Example:
      gpuhost audit inventories/fleet.py --json fleet.json
      gpuhost report html fleet.json -o fleet.html
    """
    data = _read(report)
    write_html(data, output)
    click.echo(
        f"{output}: {len(data['hosts'])} host(s), verdict {data['summary'].get('verdict')}",
        err=output == "-",  # standard output carries the page
    )
    return 0
