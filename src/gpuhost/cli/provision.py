"""``gpuhost provision INVENTORY``: pyinfra with the packaged provision deploy."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

import click

from gpuhost.errors import EXIT_USAGE, ConfigError
from gpuhost.matrix.profiles import load_profiles

DEPLOY_FILE = "run_provision.py"


def pyinfra_argv(
    inventory: str, deploy: str, dry: bool, limit: str | None, profiles: str | None
) -> list[str]:
    argv = [sys.executable, "-m", "pyinfra", inventory, deploy]
    # -y skips change detection, so a dry run must not pass it: it shows each host's plan instead.
    argv.append("--dry" if dry else "-y")
    if limit:
        argv += ["--limit", limit]
    if profiles:
        argv += ["--data", f"gpuhost_profiles_file={profiles}"]
    return argv


@click.command("provision")
@click.argument("inventory", type=click.Path(exists=True, dir_okay=False))
@click.option("--dry", is_flag=True, help="Print the plan per host; change nothing.")
@click.option("--limit", help="Only these hosts or groups (pyinfra --limit).")
@click.option(
    "--profiles",
    "profiles",
    type=click.Path(exists=True, dir_okay=False),
    help="Extra profiles YAML merged over the built-in ones.",
)
def command(inventory: str, dry: bool, limit: str | None, profiles: str | None) -> int:
    """Install and pin driver, CUDA, cuDNN and container toolkit to each host's profile."""
    if profiles:
        load_profiles(profiles)  # a bad profiles file is one clear error before any host is touched
    deploy = str(resources.files("gpuhost.deploys") / DEPLOY_FILE)
    with tempfile.TemporaryDirectory(prefix="gpuhost-provision-") as tmp:
        report = Path(tmp) / "guards.txt"
        env = dict(os.environ, GPUHOST_GUARD_REPORT=str(report))
        argv = pyinfra_argv(inventory, deploy, dry, limit, profiles)
        proc = subprocess.run(argv, env=env, check=False)
        refused = report.read_text().splitlines() if report.exists() else []
    if refused:
        for line in refused:
            click.echo(f"gpuhost: refused {line}", err=True)
        return EXIT_USAGE
    if proc.returncode not in (0, 1):
        raise ConfigError(f"{inventory}: pyinfra exited {proc.returncode}")
    return proc.returncode
