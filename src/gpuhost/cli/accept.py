"""``gpuhost accept INVENTORY``: a server is accepted only after a judged burn-in.

Every selected host runs the stages at once (inventory against its node class, DCGM
diagnostics, a GEMM soak on every GPU with its telemetry judged over the whole soak,
nvbandwidth, single-node NCCL), then pairwise ``ib_write_bw`` and the multi-node collective
tier across hosts; one acceptance record per host (``--json``, and the state folder's history).
Exit 0 every host passed, 1 a host failed or a stage could not run, 2 bad input (before any
host is touched), 130/143 stopped by SIGINT/SIGTERM (the load stopped, records interrupted).
What each stage judges: docs/acceptance.md.
"""

from __future__ import annotations

from pathlib import Path

import click

from gpuhost.accept.gate import GATES
from gpuhost.accept.model import AcceptRequest
from gpuhost.accept.options import STAGES, accept_options
from gpuhost.accept.run import run_accept
from gpuhost.cli._options import limit_option, state_option


@click.command("accept")
@click.argument("inventory")
@click.option(
    "--duration",
    default="1h",
    show_default=True,
    metavar="TIME",
    help="The GEMM soak's budget: 60s, 90m, 4h.",
)
@click.option(
    "--skip",
    multiple=True,
    metavar="STAGE",
    help=f"Leave a stage out (repeatable): {', '.join(STAGES)}.",
)
@click.option(
    "--floor",
    "floors",
    multiple=True,
    metavar="STAGE=N UNIT",
    help="Your floor where the data has none: gemm=N TFLOPS (per GPU), "
    "nvbandwidth=N GB/s (host<->GPU), nccl=N GB/s (busbw), ib=N Gb/s (per pair).",
)
@click.option(
    "--dcgm-level",
    type=click.IntRange(3, 4),
    default=3,
    show_default=True,
    help="dcgmi diag run level (3: ~15 min; 4: adds memtest and pulse, ~1-2 h).",
)
@click.option(
    "--gate",
    type=click.Choice(GATES),
    help="Keep each node out of the scheduler until it passes: Slurm drain (every "
    "node must be drained already) or a Kubernetes taint.",
)
@click.option(
    "--json",
    "json_path",
    metavar="FILE|-",
    help='Write {"hosts": [record, ...]} (gpuhost schema acceptance).',
)
@click.option("--junit", "junit_path", metavar="FILE|-", help="JUnit XML: host x stage.")
@click.option("--prom", "prom_path", metavar="FILE", help="Prometheus textfile of the verdicts.")
@click.option(
    "--parallel",
    type=click.IntRange(1, 1024),
    default=32,
    show_default=True,
    help="Hosts run at once.",
)
@limit_option
@state_option
def command(
    inventory: str,
    duration: str,
    skip: tuple[str, ...],
    floors: tuple[str, ...],
    dcgm_level: int,
    gate: str | None,
    json_path: str | None,
    junit_path: str | None,
    prom_path: str | None,
    parallel: int,
    limit: tuple[str, ...],
    state_dir: Path,
) -> int:
    """Burn in INVENTORY's hosts (@local: this machine) and judge them.

    \b
    Example:
      gpuhost accept inventories/new-rack.py --duration 4h --json accept.json
      gpuhost accept @local --duration 60s --skip ib --skip collective
    """
    options = accept_options(duration, skip, floors, dcgm_level, gate)
    limits = ",".join(limit) or None
    request = AcceptRequest(inventory, limits, options, state_dir, json_path, junit_path, prom_path,
                            parallel=parallel)  # fmt: skip
    return run_accept(request, click.echo)
