"""``gpuhost parse FILE [--json]``: show what gpuhost reads from a captured output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from gpuhost.errors import ParseError
from gpuhost.parsers.detect import parse_any
from gpuhost.readers import read_text

MAX_FILE_BYTES = 50_000_000
SUMMARY_KEYS = (
    "state",
    "driver_version",
    "cuda_version",
    "nvml_version",
    "kernel_module_version",
    "kernel_module_flavor",
    "torch_version",
    "torch_cuda",
    "cudnn",
    "cudnn_version",
    "container_toolkit_version",
    "message",
)


def read_capture(path: Path) -> str:
    """The file's text (``gpuhost.readers.read_text``: regular files only, UTF-8 with or without
    a BOM, UTF-16); ConfigError when it cannot be read or is not text."""
    return read_text(path, "a captured output", MAX_FILE_BYTES)


def summary_lines(result: dict[str, Any]) -> list[str]:
    lines = [f"kind: {result['kind']}"]
    for key in SUMMARY_KEYS:
        if result.get(key) is not None:
            lines.append(f"{key}: {result[key]}")
    for i, gpu in enumerate(result.get("gpus") or []):
        # a -q -d CLOCK report has no product name: the bus id alone names the GPU
        details = [str(gpu["name"])] if gpu.get("name") else []
        if gpu.get("pci_bus_id"):
            details.append(str(gpu["pci_bus_id"]))
        if gpu.get("uuid"):
            details.append(str(gpu["uuid"]))
        lines.append(f"gpu {gpu.get('index', i)}: " + (", ".join(details) or "(no name)"))
    if "packages" in result:
        lines.append(f"packages: {len(result['packages'])}")
        for package in result["packages"]:
            lines.append(f"  {package['status']:3} {package['name']} {package['version'] or '-'}")
    if "rows" in result:
        lines.append(f"rows: {len(result['rows'])}")
    if "nvlink" in result:
        lines.append(f"nvlink: {'yes' if result['nvlink'] else 'no'}")
    return lines


@click.command("parse")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=True, exists=False))
@click.option("--json", "as_json", is_flag=True, help="Print everything read, as JSON.")
def command(file: Path, as_json: bool) -> int:
    """Recognise a captured output FILE (nvidia-smi XML/-q/table/error, /proc/driver/nvidia/version,
    nvcc --version, torch collect_env, dpkg -l, ...) and show what gpuhost reads from it.

    \b
    Example:
      gpuhost parse nvidia-smi-q.xml --json
    """
    text = read_capture(file)
    try:
        result = parse_any(text)
    except ParseError as exc:
        raise ParseError(f"{file}: {exc}") from exc
    if as_json:
        click.echo(json.dumps(result, indent=2, sort_keys=False))
    else:
        click.echo("\n".join(summary_lines(result)))
    return 0
