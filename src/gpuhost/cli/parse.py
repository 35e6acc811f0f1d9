"""``gpuhost parse FILE [--json]``: show what gpuhost reads from a captured output."""

from __future__ import annotations

import json
from pathlib import Path

import click

from gpuhost.errors import ParseError
from gpuhost.faults.judge import finding_line, xid_findings
from gpuhost.parsers.detect import parse_any, summary_lines
from gpuhost.parsers.xid import xid_events
from gpuhost.readers import MAX_FILE_BYTES, read_text


@click.command("parse")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=True, exists=False))
@click.option("--json", "as_json", is_flag=True, help="Print everything read, as JSON.")
def command(file: Path, as_json: bool) -> int:
    """Recognise a captured output FILE (nvidia-smi XML/-q/table/error, /proc/driver/nvidia/version,
    nvcc --version, torch collect_env, dpkg -l, a kernel log or dmesg, ...) and show what gpuhost
    reads from it. Each Xid of a kernel log is judged through the fault catalog as the audit
    judges it: its finding id (gpu.xid.N) and action.

    \b
    Example:
      gpuhost parse nvidia-smi-q.xml --json
      gpuhost parse /var/log/kern.log
    """
    text = read_text(file, "a captured output", MAX_FILE_BYTES)  # regular files; UTF-8/16
    try:
        result = parse_any(text)
    except ParseError as exc:
        raise ParseError(f"{file}: {exc}") from exc
    findings = xid_findings(xid_events(text)) if result["kind"] == "kernel-log" else []
    if result["kind"] == "kernel-log":
        result["findings"] = [f.to_dict() for f in findings]
    if as_json:
        click.echo(json.dumps(result, indent=2, sort_keys=False))
    else:
        lines = summary_lines(result)
        if result["kind"] == "kernel-log":
            lines.append(f"xid events: {len(result['xid_events'])}")
            lines += [finding_line(f) for f in findings]
        click.echo("\n".join(lines))
    return 0
