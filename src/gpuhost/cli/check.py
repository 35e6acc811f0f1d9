"""``gpuhost check [INVENTORY]``: the validation checks (pytest-testinfra) on hosts.

The checks ship in the package (:mod:`gpuhost.checks`), so this works from an installed wheel in
any folder; ``$GPUHOST_CHECKS_DIR`` names another suite folder (with a conftest.py) instead.
The same as ``pytest -p gpuhost.checks.plugin --pyargs gpuhost.checks --inventory INVENTORY
[--tier T] [--limit L] [--junitxml FILE]``;
with no inventory, or ``@local``, it checks this machine. Exit 0 every check passed (or skipped
with a reason), 1 a check failed, 2 bad input: a bad inventory or --limit (found before pytest
runs), or pytest's own usage error (4), no check selected (5), interrupted (2) or internal error
(3), each with one line saying so; 130/143 when gpuhost itself is stopped by SIGINT/SIGTERM.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from gpuhost.checks.run import TIERS, checks_dir, pytest_argv, pytest_exit, run_pytest
from gpuhost.checks_support.inventory import LOCAL, load_hosts
from gpuhost.cli._options import FiniteRange, unchecked_state_option
from gpuhost.errors import ConfigError
from gpuhost.output import check_output_path

COLLECTIVE_DEFAULTS = {"launcher": "slurm", "launcher_args": (), "run_timeout": 900.0}
OPTION_NAMES = {"json_path": "json", "prom_path": "prom", "launcher_args": "launcher-arg"}


def collective_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The options of ``--tier collective`` (docs/fabric.md)."""
    for decorator in reversed(
        (
            click.option(
                "--nccl-tests",
                metavar="DIR",
                help="collective: nccl-tests' build folder on every node (in place of "
                "inventory data gpuhost_nccl_tests).",
            ),
            click.option(
                "--floor",
                type=FiniteRange(min=0, min_open=True),
                metavar="GB/s",
                help="collective: your all_reduce bus-bandwidth floor (in place of the data's).",
            ),
            click.option(
                "--gpus-per-node",
                type=click.IntRange(1, 1024),
                help="collective: ranks per node (default: the count of gpuhost_gpus).",
            ),
            click.option(
                "--launcher",
                type=click.Choice(("slurm", "mpi")),
                default="slurm",
                show_default=True,
                help="collective: srun or mpirun.",
            ),
            click.option(
                "--launcher-arg",
                "launcher_args",
                multiple=True,
                metavar="ARG",
                help="collective: one more argument for srun/mpirun (repeatable), e.g. "
                "--launcher-arg=--mpi=pmix.",
            ),
            click.option(
                "--run-timeout",
                type=FiniteRange(min=1),
                default=900.0,
                show_default=True,
                help="collective: seconds one run may take.",
            ),
            click.option("--json", "json_path", metavar="FILE|-", help="collective: JSON report."),
            click.option("--prom", "prom_path", metavar="FILE", help="collective: textfile."),
        )
    ):
        func = decorator(func)
    return func


def _no_collective_options(given: dict[str, Any]) -> None:
    for name, default in given.items():
        if default is not None and default != COLLECTIVE_DEFAULTS.get(name):
            option = "--" + OPTION_NAMES.get(name, name.replace("_", "-"))
            raise ConfigError(f"check: {option} is an option of --tier collective only")


def _collective(
    inventory: str, limit: str | None, junit: Path | None, others: bool, given: dict[str, Any]
) -> int:
    from gpuhost.collective.command import check_collective
    from gpuhost.collective.hosts import Options

    if others:
        raise ConfigError(
            "check --tier collective: --profiles, the health tier's options and pytest "
            "arguments do not apply"
        )
    options = Options(
        given["nccl_tests"],
        given["floor"],
        given["gpus_per_node"],
        given["launcher"],
        tuple(given["launcher_args"]),
        given["run_timeout"],
    )
    outputs = {"json": given["json_path"], "junit": junit, "prom": given["prom_path"]}
    return check_collective(inventory, limit, options, outputs, click.echo)


@click.command("check")
@click.argument("inventory", required=False, default=LOCAL)
@click.option(
    "--tier",
    type=click.Choice((*TIERS, "health", "collective")),
    default="functional",
    show_default=True,
    help="static; functional = static + smoke tests; stress = everything (minutes); fabric = "
    "the RDMA fabric's checks only (ports, counters, GPUDirect RDMA, ACS/IOMMU, GPU/NIC "
    "affinity); health = the fast node health check of this machine (Slurm "
    "HealthCheckProgram, one line, < 5 s); collective = nccl-tests across the inventory's "
    "nodes through srun or mpirun (docs/fabric.md).",
)
@click.option(
    "--drain",
    is_flag=True,
    help="With --tier health: drain this Slurm node when unhealthy (reason 'gpuhost: ...'), "
    "resume it when healthy if gpuhost drained it.",
)
@click.option("--node", help="With --drain: the Slurm node name (default: the short hostname).")
@click.option(
    "--after",
    type=click.IntRange(1, 1000),
    help="With --drain/--k8s: drain for a fault once it is seen on N consecutive runs "
    "[default: 3]; faults that demand it (a GPU fallen off the bus) drain at once, watch faults "
    "never.",
)
@click.option(
    "--k8s",
    is_flag=True,
    help="With --tier health: set the GpuhostGpuHealthy condition and the gpuhost.io/"
    "gpu-unhealthy taint on this Kubernetes node when it is drained, remove them when it is "
    "healthy (kubectl).",
)
@click.option("--k8s-node", help="With --k8s: the Kubernetes node name (default: the hostname).")
@unchecked_state_option
@click.option(
    "--limit",
    "limits",
    multiple=True,
    help="Only these hosts or groups of the inventory (comma-separated, globs; repeatable).",
)
@click.option(
    "--junit",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a JUnit XML report (one test case per check and host).",
)
@click.option(
    "--profiles",
    metavar="FILE",
    help="Profiles file for every host (in place of inventory data gpuhost_profiles_file).",
)
@collective_options
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
def command(
    inventory: str,
    tier: str,
    drain: bool,
    node: str | None,
    after: int | None,
    k8s: bool,
    k8s_node: str | None,
    state_dir: Path,
    limits: tuple[str, ...],
    junit: Path | None,
    profiles: str | None,
    pytest_args: tuple[str, ...],
    **collective: Any,
) -> int:
    """Validate hosts: run the checks on INVENTORY (a pyinfra inventory; default @local, this
    machine). Arguments after -- go to pytest (e.g. -- -k driver).

    \b
    Example:
      gpuhost check inventories/fleet.py --tier static --junit checks.xml
    """
    if inventory.startswith("-"):
        # 'gpuhost check --tier static -- -k driver': click gave the first word after -- to
        # INVENTORY; no inventory file is called so, so it is pytest's and the inventory @local
        pytest_args = (inventory, *pytest_args)
        inventory = LOCAL
    limit = ",".join(limits) or None  # one --limit meaning: gpuhost.inventory.loader
    if junit is not None:  # pytest made missing folders and raised on a file in the path
        check_output_path(str(junit), "--junit")
    if tier == "collective":
        others = profiles or pytest_args or drain or node or after or k8s or k8s_node
        return _collective(inventory, limit, junit, bool(others), collective)
    _no_collective_options(collective)
    health_options = drain or node or after or k8s or k8s_node or _given("state_dir")
    if tier == "health" or health_options:
        from gpuhost.checks_support.health_run import (
            DEFAULT_AFTER,
            HealthRequest,
            check_health_request,
            run_health,
        )

        others = inventory != LOCAL or bool(limit or junit or profiles or pytest_args)
        check_health_request(tier, others)
        if (after or _given("state_dir")) and not (drain or k8s or k8s_node):
            raise ConfigError("--after and --state-dir count runs for --drain or --k8s")
        request = HealthRequest(
            drain, node, k8s or bool(k8s_node), k8s_node, after or DEFAULT_AFTER, state_dir
        )
        return run_health(request, click.echo)
    if profiles:  # the checks run in pytest's folder: the file as this folder sees it
        from gpuhost.inventory.profiles import profile_table

        profile_table(profiles)  # a bad file is one line naming it as the user wrote it
        profiles = os.path.abspath(profiles)
    load_hosts(None if inventory == LOCAL else inventory, limit, profiles)  # bad input: exit 2
    argv = pytest_argv(checks_dir(), inventory, tier, limit, junit, pytest_args, profiles)
    return pytest_exit(run_pytest(argv))


def _given(name: str) -> bool:
    source = click.get_current_context().get_parameter_source(name)
    return source is not None and source != click.core.ParameterSource.DEFAULT
