"""``gpuhost check [INVENTORY]``: the validation checks (pytest-testinfra) on hosts.

The checks ship in the package (:mod:`gpuhost.checks`), so this works from an installed wheel in
any folder; ``$GPUHOST_CHECKS_DIR`` names another suite folder (with a conftest.py) instead.
The same as ``pytest -p gpuhost.checks.plugin --pyargs gpuhost.checks --inventory INVENTORY
[--tier T] [--limit L] [--junitxml FILE]``;
with no inventory, or ``@local``, it checks this machine. The exit code is pytest's: 0 every check
passed (or skipped with a reason), 1 a check failed, 2 interrupted, 3 internal error, 4 pytest
usage error, 5 no check selected. A bad inventory or --limit is found before pytest runs (exit 2).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click

import gpuhost.checks
from gpuhost.checks_support.inventory import LOCAL, load_hosts
from gpuhost.errors import ConfigError

CHECKS_DIR_ENV = "GPUHOST_CHECKS_DIR"
TIERS = ("static", "functional", "stress")


def checks_dir() -> Path:
    """The suite to run: $GPUHOST_CHECKS_DIR when set, else the checks inside the package.

    pytest gets the folder (not ``--pyargs``) so that its conftest.py, which loads the plugin,
    is read before the command line is parsed and ``--tier``/``--inventory`` are known options.
    """
    override = os.environ.get(CHECKS_DIR_ENV)
    if not override:
        return Path(gpuhost.checks.__file__).resolve().parent
    path = Path(override)
    if not (path / "conftest.py").is_file():
        raise ConfigError(
            f"checks: {CHECKS_DIR_ENV}={override}: no conftest.py in that folder (expected a "
            f"folder of checks with a conftest.py loading gpuhost.checks.plugin, like checks/ "
            f"in gpuhost's source tree); unset it to run the checks shipped with gpuhost"
        )
    return path


def pytest_argv(
    directory: Path,
    inventory: str,
    tier: str,
    limit: str | None,
    junit: Path | None,
    extra: tuple[str, ...] = (),
) -> list[str]:
    argv = [sys.executable, "-m", "pytest", str(directory), "-p", "no:cacheprovider", "-ra"]
    # "--opt=value": pytest reads an argument starting with "@" as a file of arguments
    argv += [f"--inventory={inventory}", f"--tier={tier}"]
    if limit:
        argv += [f"--limit={limit}"]
    if junit is not None:
        argv += [
            f"--junitxml={junit}",
            "-o",
            "junit_family=xunit1",
            "-o",
            "junit_suite_name=gpuhost-check",
        ]
    return argv + list(extra)


@click.command("check")
@click.argument("inventory", required=False, default=LOCAL)
@click.option(
    "--tier",
    type=click.Choice((*TIERS, "health")),
    default="functional",
    show_default=True,
    help="static; functional = static + smoke tests; stress = everything (minutes); health = "
    "the fast node health check of this machine (Slurm HealthCheckProgram, one line, < 5 s).",
)
@click.option(
    "--drain",
    is_flag=True,
    help="With --tier health: drain this Slurm node when unhealthy (reason 'gpuhost: ...'), "
    "resume it when healthy if gpuhost drained it.",
)
@click.option("--node", help="With --drain: the Slurm node name (default: the short hostname).")
@click.option("--limit", help="Only these hosts or groups of the inventory (comma-separated).")
@click.option(
    "--junit",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a JUnit XML report (one test case per check and host).",
)
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
def command(
    inventory: str,
    tier: str,
    drain: bool,
    node: str | None,
    limit: str | None,
    junit: Path | None,
    pytest_args: tuple[str, ...],
) -> int:
    """Validate hosts: run the checks on INVENTORY (a pyinfra inventory; default @local, this
    machine). Arguments after -- go to pytest (e.g. -- -k driver)."""
    if tier == "health" or drain or node:
        from gpuhost.checks_support.health import run_health

        if tier != "health" or inventory != LOCAL or limit or junit or pytest_args:
            raise ConfigError(
                "--tier health checks this machine only: gpuhost check @local --tier health "
                "[--drain [--node NAME]] (no inventory, --limit, --junit or pytest arguments; "
                "--drain and --node need --tier health)"
            )
        return run_health(drain, node, click.echo)
    load_hosts(None if inventory == LOCAL else inventory, limit)  # bad input: exit 2 here
    argv = pytest_argv(checks_dir(), inventory, tier, limit, junit, pytest_args)
    return subprocess.run(argv, check=False).returncode
