"""Operations for gpuhost running on the node itself: the Slurm health check wrapper and the
systemd timer writing the audit's Prometheus textfile.

``render_*`` are pure (the files' text); the operations write a file only when it differs and
(re)start/enable the timer only when needed, so a re-run changes nothing.
"""

from __future__ import annotations

import shlex
from collections.abc import Generator
from typing import Any

from pyinfra import host
from pyinfra.api import operation

from gpuhost.facts.files import SmallFile
from gpuhost.facts.systemd_units import UnitFiles
from gpuhost.operations._facts import fact
from gpuhost.operations._files import put_text, same_text

HEALTHCHECK_PATH = "/usr/local/sbin/gpuhost-healthcheck"
METRICS_UNIT = "gpuhost-metrics"
UNIT_DIR = "/etc/systemd/system"
DEFAULT_TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"  # Debian's node_exporter default
PROM_NAME = "gpuhost.prom"


def render_healthcheck(
    gpuhost: str, drain: bool = True, after: int | None = None, k8s: bool = False
) -> str:
    """The wrapper slurm.conf's HealthCheckProgram (or a prolog/epilog) runs."""
    args = "check @local --tier health" + (" --drain" if drain else "") + (" --k8s" if k8s else "")
    args += f" --after {after}" if after is not None else ""
    return (
        "#!/bin/sh\n"
        "# Managed by gpuhost: the node health check (docs/monitoring.md). Exit 0 healthy, else\n"
        "# 1 with one reason line; --drain drains/resumes this Slurm node.\n"
        f'exec {shlex.quote(gpuhost)} {args} "$@"\n'
    )


def render_metrics_service(gpuhost: str, textfile_dir: str) -> str:
    target = f"{textfile_dir.rstrip('/')}/{PROM_NAME}"
    return (
        "[Unit]\n"
        "Description=gpuhost audit of this node into node_exporter's textfile directory\n"
        "After=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        "# exit 1 = the audit found errors: the metrics say which, the run itself worked\n"
        "SuccessExitStatus=1\n"
        "Nice=10\n"
        f"ExecStartPre=/usr/bin/install -d -m 0755 {shlex.quote(textfile_dir)}\n"
        # no inventory: the audit probes this machine (locally, no SSH)
        f"ExecStart={shlex.quote(gpuhost)} audit --prom {shlex.quote(target)}\n"
    )


def render_metrics_timer(minutes: int) -> str:
    return (
        "[Unit]\n"
        f"Description=gpuhost audit metrics every {minutes} minutes\n"
        "\n"
        "[Timer]\n"
        "OnActiveSec=30s\n"
        f"OnUnitActiveSec={minutes}min\n"
        "RandomizedDelaySec=30s\n"
        "\n"
        "[Install]\n"
        "WantedBy=timers.target\n"
    )


@operation()
def healthcheck(
    gpuhost: str = "gpuhost", drain: bool = True, after: int | None = None, k8s: bool = False
) -> Generator[Any, None, None]:
    """
    Install ``/usr/local/sbin/gpuhost-healthcheck`` (runs ``gpuhost check @local --tier health``).

    + gpuhost: the gpuhost command on the node (a path, or a name found on PATH)
    + drain: pass ``--drain`` (drain the Slurm node when unhealthy, resume what gpuhost drained)
    + after: pass ``--after N`` (consecutive runs a fault must be seen on before it drains)
    + k8s: pass ``--k8s`` (the Kubernetes node condition and taint)
    """
    content = render_healthcheck(gpuhost, drain, after, k8s)
    if same_text(fact(SmallFile, path=HEALTHCHECK_PATH), content):
        host.noop(f"{HEALTHCHECK_PATH} is up to date")
        return
    yield from put_text(HEALTHCHECK_PATH, content, mode="755")


@operation()
def metrics_timer(
    gpuhost: str = "gpuhost", textfile_dir: str = DEFAULT_TEXTFILE_DIR, minutes: int = 15
) -> Generator[Any, None, None]:
    """
    A systemd timer running ``gpuhost audit --prom DIR/gpuhost.prom`` (this machine) every
    ``minutes``.

    + gpuhost: the gpuhost command on the node
    + textfile_dir: node_exporter's ``--collector.textfile.directory``
    + minutes: the interval
    """
    files = {
        f"{UNIT_DIR}/{METRICS_UNIT}.service": render_metrics_service(gpuhost, textfile_dir),
        f"{UNIT_DIR}/{METRICS_UNIT}.timer": render_metrics_timer(minutes),
    }
    stale = [p for p, text in files.items() if not same_text(fact(SmallFile, path=p), text)]
    enabled = fact(UnitFiles, units=[f"{METRICS_UNIT}.timer"]).get(f"{METRICS_UNIT}.timer")
    if not stale and enabled == "enabled":
        host.noop(f"{METRICS_UNIT}.timer is installed and enabled")
        return
    for path in stale:
        yield from put_text(path, files[path])
    yield "systemctl daemon-reload"
    # start it now too (the first run comes OnUnitActiveSec after this one)
    yield f"systemctl enable {METRICS_UNIT}.timer && systemctl restart {METRICS_UNIT}.timer"
