"""Node-side cluster integration: the Slurm health check and the Prometheus metrics timer.

Deploys (from a pyinfra deploy file, or ``deploys/cluster.py``); gpuhost itself must be installed
on the node (``pip install gpuhost``), ``gpuhost`` names that command:

- ``install_health_check(gpuhost="gpuhost", drain=True, after=None, k8s=False)``:
  ``/usr/local/sbin/gpuhost-healthcheck`` for slurm.conf's ``HealthCheckProgram``
  (docs/monitoring.md shows the slurm.conf lines); ``after``: ``--after N``, ``k8s``: ``--k8s``
- ``install_metrics_timer(gpuhost="gpuhost", textfile_dir=..., minutes=15)``: a systemd timer
  writing ``gpuhost audit --prom`` into node_exporter's textfile directory
"""

from __future__ import annotations

from pyinfra.api import deploy

from gpuhost.errors import ConfigError
from gpuhost.operations import node_services
from gpuhost.operations.node_services import DEFAULT_TEXTFILE_DIR


@deploy("gpuhost node health check")
def install_health_check(
    gpuhost: str = "gpuhost", drain: bool = True, after: int | None = None, k8s: bool = False
) -> None:
    if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 1):
        raise ConfigError(
            f"install_health_check: after: expected a positive number of runs, found {after!r}"
        )
    if after is not None and not (drain or k8s):
        raise ConfigError("install_health_check: after counts runs for drain or k8s; give one")
    node_services.healthcheck(
        name=f"Health check wrapper {node_services.HEALTHCHECK_PATH}",
        gpuhost=gpuhost,
        drain=drain,
        after=after,
        k8s=k8s,
    )


@deploy("gpuhost metrics timer")
def install_metrics_timer(
    gpuhost: str = "gpuhost", textfile_dir: str = DEFAULT_TEXTFILE_DIR, minutes: int = 15
) -> None:
    if isinstance(minutes, bool) or not isinstance(minutes, int) or minutes < 1:
        raise ConfigError(
            f"install_metrics_timer: minutes: expected a positive integer, found {minutes!r}"
        )
    node_services.metrics_timer(
        name=f"{node_services.METRICS_UNIT}.timer (audit every {minutes} min)",
        gpuhost=gpuhost,
        textfile_dir=textfile_dir,
        minutes=minutes,
    )
