"""The lab's GPU emulator, lab side: GPU models from real captures, and putting the emulator on a
lab host (test equipment; never part of the gpuhost package).

A lab host gets a GPU with ``attach(root, model, count, run)``: the emulator program
(``host/gpuemu.py``), the model's data (``/etc/gpuhost-lab-gpu/model.json``), a boot unit, a dpkg
hook and two dpkg diversions.  Nothing answers as ``nvidia-smi`` until a driver package is
installed on the host; docs/testing.md ("GPU-shaped lab hosts") says what is emulated and what
is not.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from .. import accept as accept_equipment
from ..config import LabConfigError

HERE = Path(__file__).resolve().parent
MODELS_FILE = HERE / "models.yaml"
CAPTURES = HERE / "captures"
EMULATOR = HERE / "host" / "gpuemu.py"
ON_HOST = "/usr/lib/gpuhost-lab-gpu/gpuemu.py"
UNIT = "gpuhost-lab-gpu.service"
KNOBS = ("xid", "ecc-uncorrectable", "retired-pages", "remap-pending", "gpu-lost",
         "driver-mismatch", "persistence-off", "pcie-downgrade", "clock-event", "fabric",
         "nvlink-down", "gpu-missing")
#: knobs that take a value (xid=N, clock-event=hw-slowdown, fabric=in-progress) or may
#: (nvlink-down=LINK); the emulator checks the value itself
KNOB_VALUE = {"xid": "required", "clock-event": "required", "fabric": "required",
              "nvlink-down": "optional"}
#: packaged files moved aside so that the emulator answers in their place (Debian's layout)
DIVERSIONS = ("/usr/lib/nvidia/current/nvidia-smi", "/usr/bin/nvidia-persistenced")

SPEC_RE = re.compile(r"^(?P<model>[a-z0-9-]+)(?::(?P<count>\d+))?$")

UNIT_TEXT = f"""[Unit]
Description=gpuhost lab: emulated GPUs (per-boot GPU state, /proc/driver/nvidia)
DefaultDependencies=no
After=local-fs.target systemd-tmpfiles-setup.service
Before=sysinit.target nvidia-persistenced.service gpuhost-clocks.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/bin/python3 {ON_HOST} boot

[Install]
WantedBy=sysinit.target
"""

DPKG_HOOK = f'DPkg::Post-Invoke {{ "/usr/bin/python3 {ON_HOST} sync || true"; }};\n'


def load_models() -> dict[str, dict[str, Any]]:
    """{model: data} with ``supported: capture`` resolved from the model's XML capture."""
    raw = yaml.safe_load(MODELS_FILE.read_text())["models"]
    models: dict[str, dict[str, Any]] = {}
    for name, data in raw.items():
        data = dict(data)
        clocks = dict(data["clocks"])
        if clocks["supported"] == "capture":
            clocks["supported"] = supported_clocks_from_xml(CAPTURES / data["capture"])
        data["clocks"] = clocks
        if data.get("load_series"):
            series = dict(data["load_series"])
            series["rows"] = dmon_rows(CAPTURES / series["capture"])
            data["load_series"] = series
        models[name] = data
    return models


def supported_clocks_from_xml(path: Path) -> list[dict[str, Any]]:
    """The first GPU's <supported_clocks> of an ``nvidia-smi -q -x`` capture."""
    root = ET.fromstring(path.read_text())
    gpu = root.find("gpu")
    if gpu is None:
        raise LabConfigError(f"{path}: no <gpu> element")
    out = []
    for entry in gpu.findall("supported_clocks/supported_mem_clock"):
        mem = int((entry.findtext("value") or "0").split()[0])
        graphics = [int((g.text or "0").split()[0])
                    for g in entry.findall("supported_graphics_clock")]
        out.append({"memory": mem, "graphics": graphics})
    if not out:
        raise LabConfigError(f"{path}: no <supported_clocks> in the first GPU")
    return out


def dmon_rows(path: Path) -> list[list[int]]:
    """[power W, GPU temperature C, SM clock MHz] per sample of an ``nvidia-smi dmon`` capture,
    by its header's column names (pwr, gtemp, pclk)."""
    header: list[str] = []
    rows = []
    for line in path.read_text().splitlines():
        if line.startswith("# gpu"):
            header = line.lstrip("# ").split()
        elif header and line.strip() and not line.startswith("#"):
            cells = dict(zip(header, line.split(), strict=False))
            rows.append([int(cells["pwr"]), int(cells["gtemp"]), int(cells["pclk"])])
    if not rows:
        raise LabConfigError(f"{path}: no nvidia-smi dmon samples")
    return rows


def parse_spec(spec: str) -> tuple[str, int]:
    """``"h100-sxm:8"`` -> ("h100-sxm", 8); one clear error for anything else."""
    match = SPEC_RE.match(spec.strip())
    models = load_models()
    if not match or match.group("model") not in models:
        raise LabConfigError(
            f"--gpu {spec!r}: expected MODEL[:COUNT] with MODEL one of {', '.join(models)}"
        )
    name = match.group("model")
    count = int(match.group("count") or 1)
    limit = len(models[name]["bus_ids"])
    if not 1 <= count <= limit:
        raise LabConfigError(f"--gpu {spec!r}: {name} hosts have 1..{limit} GPUs, not {count}")
    return name, count


def host_model(name: str, count: int) -> dict[str, Any]:
    """The model.json a host with ``count`` GPUs of model ``name`` gets."""
    data = dict(load_models()[name])
    data["model"] = name
    # a full HGX board has its NVSwitches on the bus (fabric manager applies); fewer GPUs do not
    full = count == len(data["bus_ids"])
    data["nvswitch_bus_ids"] = list(data.get("nvswitch_bus_ids") or [])[:data["nvswitches"]] \
        if full else []
    data["bus_ids"] = list(data["bus_ids"][:count])
    return data


def attach(root: Path, name: str, count: int,
           run: Callable[[str], Any]) -> None:
    """Give the running lab host whose root is ``root`` (this machine's view of its overlay)
    ``count`` emulated GPUs of model ``name``; ``run`` runs a shell command on it.  Safe to
    repeat (the model is replaced, per-boot state starts over)."""
    lib = root / "usr/lib/gpuhost-lab-gpu"
    lib.mkdir(parents=True, exist_ok=True)
    (lib / "gpuemu.py").write_text(EMULATOR.read_text())
    (lib / "gpuemu.py").chmod(0o755)
    etc = root / "etc/gpuhost-lab-gpu"
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "model.json").write_text(json.dumps(host_model(name, count), indent=1) + "\n")
    (root / "etc/systemd/system" / UNIT).write_text(UNIT_TEXT)
    (root / "etc/apt/apt.conf.d/99gpuhost-lab-gpu").write_text(DPKG_HOOK)
    accept_equipment.install(root)  # dcgmi, nvbandwidth, nccl-tests, ib_write_bw, torch stand-ins
    sbin = root / "usr/local/sbin/gpuemu"
    if not sbin.is_symlink():
        sbin.symlink_to(ON_HOST)
    divert = " && ".join(
        f"{{ dpkg-divert --list {p} | grep -q gpuhost-lab-gpu || dpkg-divert --quiet "
        f"--package gpuhost-lab-gpu --rename --divert {p}.debian --add {p}; }}"
        for p in DIVERSIONS
    )
    proc = run(f"set -e; {divert}; rm -f /run/gpuhost-lab-gpu/state.json; "
               f"systemctl daemon-reload; systemctl enable --now {UNIT} >/dev/null 2>&1; "
               f"python3 {ON_HOST} sync")
    if getattr(proc, "returncode", 0) != 0:
        raise LabConfigError(f"GPU emulator setup failed: {getattr(proc, 'stderr', '')}")


JOURNAL_REMOTE = (
    "[ -x /lib/systemd/systemd-journal-remote ] || { DEBIAN_FRONTEND=noninteractive "
    "apt-get install -y -qq --no-install-recommends systemd-journal-remote >/dev/null && "
    "systemctl disable --now systemd-journal-remote.socket systemd-journal-upload.service "
    ">/dev/null 2>&1; true; }"
)


def inject_command(knob: str, gpu: int | None = None, verb: str = "inject") -> str:
    """The shell command injecting ``knob`` (``xid=79``, ``gpu-lost``, ...) on a host now
    (``verb`` inject) or at its next boot (``arm``)."""
    name, _, value = knob.partition("=")
    takes = KNOB_VALUE.get(name)
    if (name not in KNOBS or (takes == "required" and not value) or (takes is None and value)
            or (name == "xid" and not value.isdigit())
            or not all(c.isalnum() or c == "-" for c in value)):
        raise LabConfigError(
            f"fault {knob!r}: expected one of xid=N, clock-event=REASON, fabric=STATE, "
            f"nvlink-down[=LINK], {', '.join(k for k in KNOBS if k not in KNOB_VALUE)}"
        )
    args = f"{knob}" + (f" gpu={gpu}" if gpu is not None else "")
    prefix = f"{JOURNAL_REMOTE} && " if name == "xid" else ""
    return f"{prefix}python3 {ON_HOST} {verb} {args}"
