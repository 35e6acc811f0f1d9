"""GPU clocks: application clocks where the GPU supports them, locked clocks where it does not.

The clock values come from the profile or, when it leaves them open, from the GPU's own "max
supported" readings (``nvidia-smi -q -x``: ``max_clocks``) - never from a table in code. The
commands are written to one script that ``gpuhost-clocks.service`` runs at every boot and a udev
rule re-runs whenever the nvidia module is loaded again, so a driver reload does not silently reset
clocks.
"""

from __future__ import annotations

from collections.abc import Generator

from pyinfra import host
from pyinfra.api import OperationValueError, operation
from pyinfra.facts.systemd import SystemdEnabled

from gpuhost.facts.nvidia_smi import SmiQuery
from gpuhost.operations._facts import fact
from gpuhost.operations._files import put_text
from gpuhost.parsers.nvidia_smi import GpuInfo, SmiReport

SCRIPT_PATH = "/usr/local/lib/gpuhost/apply-clocks.sh"
UNIT_NAME = "gpuhost-clocks.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT_NAME}"
UDEV_RULE_PATH = "/etc/udev/rules.d/71-gpuhost-clocks.rules"
MODES = ("auto", "application", "locked", "off")

UNIT = f"""[Unit]
Description=gpuhost: apply the profile's GPU clocks
After=nvidia-persistenced.service
Wants=nvidia-persistenced.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart={SCRIPT_PATH}

[Install]
WantedBy=multi-user.target
"""

UDEV_RULE = (
    "# Written by gpuhost: re-apply GPU clocks whenever the nvidia module is (re)loaded.\n"
    'ACTION=="add", SUBSYSTEM=="module", KERNEL=="nvidia", '
    f'RUN+="/bin/systemctl --no-block restart {UNIT_NAME}"\n'
)


def _target(gpu: GpuInfo, graphics: int | None, memory: int | None) -> tuple[int, int]:
    gr = graphics if graphics is not None else gpu.clocks.max_graphics
    mem = memory if memory is not None else gpu.clocks.max_mem
    if gr is None or mem is None:
        raise OperationValueError(
            f"GPU {gpu.index} ({gpu.name}): the GPU reports no max clocks and the profile gives "
            "none; set clocks.graphics_mhz and clocks.memory_mhz in the profile"
        )
    return gr, mem


def uses_application_clocks(gpu: GpuInfo, mode: str) -> bool:
    """Whether ``-ac`` (True) or ``-lgc``/``-lmc`` (False) sets this GPU's clocks."""
    if mode == "application":
        if gpu.clocks.applications_clocks_supported is False:
            raise OperationValueError(
                f"GPU {gpu.index} ({gpu.name}) reports application clocks as not supported or "
                "deprecated; use clocks mode 'locked' or 'auto'"
            )
        return True
    if mode == "locked":
        return False
    return gpu.clocks.applications_clocks_supported is True


def plan_clocks(
    report: SmiReport, mode: str = "auto", graphics: int | None = None, memory: int | None = None
) -> list[str]:
    """The nvidia-smi commands setting every GPU's clocks (pure; empty when no GPU is visible)."""
    if mode not in MODES:
        raise OperationValueError(f"clocks mode {mode!r}: expected one of {', '.join(MODES)}")
    if mode == "off" or not report.ok:
        return []
    commands = []
    for position, gpu in enumerate(report.gpus):
        index = gpu.index if gpu.index is not None else position
        gr, mem = _target(gpu, graphics, memory)
        if uses_application_clocks(gpu, mode):
            commands.append(f"nvidia-smi -i {index} -ac {mem},{gr}")
        else:
            commands.append(f"nvidia-smi -i {index} -lgc {gr},{gr}")
            commands.append(f"nvidia-smi -i {index} -lmc {mem},{mem}")
    return commands


def clocks_in_effect(
    report: SmiReport, mode: str, graphics: int | None, memory: int | None
) -> bool:
    """False when a GPU using application clocks shows other values than wanted (e.g. after a
    driver reload). Locked clocks are not reported by nvidia-smi -q, so they count as in effect."""
    for gpu in report.gpus:
        if uses_application_clocks(gpu, mode):
            gr, mem = _target(gpu, graphics, memory)
            if (gpu.clocks.applications_graphics, gpu.clocks.applications_mem) != (gr, mem):
                return False
    return True


def render_script(commands: list[str]) -> str:
    lines = [
        "#!/bin/sh",
        "# Written by gpuhost from the profile and the GPUs' own max clocks; rerun by",
        f"# {UNIT_NAME} at boot and by {UDEV_RULE_PATH} when the driver loads.",
        "set -e",
        *commands,
    ]
    return "\n".join(lines) + "\n"


@operation()
def applied(
    report: SmiReport | None = None,
    mode: str = "auto",
    graphics: int | None = None,
    memory: int | None = None,
) -> Generator:
    """Set GPU clocks now and after every boot and driver load.

    + report: the host's ``SmiQuery`` fact (``gpuhost.facts.nvidia_smi``)
    + mode: ``auto`` (application clocks where supported, else locked), ``application``,
      ``locked`` or ``off``
    + graphics: graphics/SM clock in MHz; default the GPU's max
    + memory: memory clock in MHz; default the GPU's max

    **Example:**

    .. code:: python

        clocks.applied(name="GPU clocks", report=host.get_fact(SmiQuery), mode="auto")
    """
    if report is None:
        report = fact(SmiQuery)
    commands = plan_clocks(report, mode, graphics, memory)
    if not commands:
        reason = "clocks mode is off" if mode == "off" else f"nvidia-smi state {report.state}"
        host.noop(f"no GPU clocks to set ({reason})")
        return
    script = list(put_text(SCRIPT_PATH, render_script(commands), mode="755"))
    unit = list(put_text(UNIT_PATH, UNIT))
    rule = list(put_text(UDEV_RULE_PATH, UDEV_RULE))
    changes: list = script + unit + rule
    if unit:
        changes.append("systemctl daemon-reload")
    if not host.get_fact(SystemdEnabled, services=[UNIT_NAME]).get(UNIT_NAME):
        changes.append(f"systemctl enable {UNIT_NAME}")
    if script or unit or not clocks_in_effect(report, mode, graphics, memory):
        changes.append(f"systemctl restart {UNIT_NAME}")
    if not changes:
        host.noop("GPU clocks already applied")
    yield from changes
