"""``gpuhost report merge A.json B.json ... -o OUT``: one fleet report from shard reports.

Each input must be a schema-1 audit report (``gpuhost audit --json``). Hosts are concatenated
(a host present in two inputs is an error: the shards overlapped) and the summary — verdicts,
stack groups, outliers — is computed again over all of them, exactly as one run would.
"""

from __future__ import annotations

import click

from gpuhost.audit.report import html, json_report
from gpuhost.audit.report.merge import merge_reports, read_report
from gpuhost.audit.report.table import fleet_text
from gpuhost.audit.summary import exit_code_for
from gpuhost.cli._options import fail_on_option
from gpuhost.output import write_output


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
    write_output(output, json_report.dumps(merged), "-o")
    if output != "-":
        click.echo(fleet_text(merged["summary"]))
    return exit_code_for(merged["summary"], fail_on)


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
    data = read_report(report)
    write_output(output, html.render(data), "-o")  # "-": standard output
    click.echo(
        f"{output}: {len(data['hosts'])} host(s), verdict {data['summary'].get('verdict')}",
        err=output == "-",  # standard output carries the page
    )
    return 0
