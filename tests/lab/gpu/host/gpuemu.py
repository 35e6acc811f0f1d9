#!/usr/bin/python3
"""GPU emulator of a gpuhost lab host (test equipment; runs INSIDE the lab host, stdlib only).

One program, several names (argv[0] or the first argument):

  nvidia-smi ...            the stand-in for Debian's / NVIDIA's nvidia-smi (see docs/testing.md)
  nvidia-persistenced ...   the stand-in persistence daemon (Type=forking like the real one)
  gpuemu boot               boot unit: fresh per-boot GPU state, /proc/driver/nvidia for the
                            driver installed now (the "loaded module" until the next boot)
  gpuemu sync               dpkg hook: nvidia-smi / nvidia-persistenced appear once a driver
                            package is installed and disappear with it
  gpuemu inject KNOB [gpu=N] | gpuemu arm KNOB [gpu=N] (at the next boot, once)
  gpuemu clear | gpuemu state | gpuemu gpu-reset

Files: /etc/gpuhost-lab-gpu/model.json (the model, written by tests/lab at host creation),
/run/gpuhost-lab-gpu/state.json (per boot: persistence, clocks, volatile ECC, lost GPUs, the
loaded driver), /var/lib/gpuhost-lab-gpu/persistent.json (what a real GPU keeps across reboots
in its InfoROM: aggregate ECC, retired pages, remapped rows).  $GPUEMU_ROOT prefixes every path
(offline tests run the emulator on this machine that way).

Load: a GPU is busy while /run/gpuhost-lab-gpu/load/<index> (its content: when the load began)
was touched in the last LOAD_FRESH_S seconds (tests/lab/accept's GEMM stand-in does that);
its temperature, power, clocks and utilization then follow the model's ``load_series`` (one row per
second of a real ``nvidia-smi dmon`` capture under gpu-burn, the last row held), and an active HW
slowdown halves its clocks (NVML: HW slowdown cuts the clocks by half or more).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from typing import Any

ROOT = os.environ.get("GPUEMU_ROOT", "")
MODEL = f"{ROOT}/etc/gpuhost-lab-gpu/model.json"
STATE = f"{ROOT}/run/gpuhost-lab-gpu/state.json"
CALLS = f"{ROOT}/run/gpuhost-lab-gpu/calls.log"
LOAD_DIR = f"{ROOT}/run/gpuhost-lab-gpu/load"
LOAD_FRESH_S = 5.0
PERSISTENT = f"{ROOT}/var/lib/gpuhost-lab-gpu/persistent.json"
PERSISTENCED_PID = f"{ROOT}/var/run/nvidia-persistenced/nvidia-persistenced.pid"
PROC_DRIVER = f"{ROOT}/proc/driver"
SYS_MODULE = f"{ROOT}/sys/module"
PCI_DEVICES = f"{ROOT}/sys/bus/pci/devices"
# Packages whose installed version is "the installed driver" (Debian and NVIDIA's debian12 names;
# the lab repository's stand-ins use the same names), then NVIDIA's Ubuntu names (nvidia-smi is in
# nvidia-utils-<branch> up to 580, nvidia-utils from 590: tests/lab/nvidia_ubuntu.py); dpkg-query
# patterns
DRIVER_PACKAGES = ("nvidia-smi", "libnvidia-ml1", "nvidia-driver")
UBUNTU_SMI_PACKAGES = ("nvidia-utils-[0-9]*", "nvidia-utils")
# nvidia-persistenced: Debian's package of that name; Ubuntu's nvidia-compute-utils[-<branch>]
PERSISTENCED_PACKAGES = ("nvidia-persistenced", "nvidia-compute-utils-[0-9]*",
                         "nvidia-compute-utils")
# The open GPU kernel modules' DKMS package (NVIDIA's debian12 name, Debian's, NVIDIA's Ubuntu
# names) or Canonical's precompiled open modules (linux-modules-nvidia-580-server-open-<kernel>,
# tests/lab/ubuntu_archive.py): installed at boot, the "loaded module" is the open flavour, whose
# /proc/driver/nvidia/version reads differently
OPEN_MODULE_PACKAGES = ("nvidia-kernel-open-dkms", "nvidia-open-kernel-dkms",
                        "nvidia-dkms-[0-9]*-open", "nvidia-dkms-open",
                        "linux-modules-nvidia-[0-9]*-open-*")
# The same on a Rocky-shaped host (NVIDIA's RPM names, tests/lab/rpmrepo.py), asked of rpm when
# dpkg has no driver package (the host's base system stays dpkg-managed)
RPM_DRIVER_PACKAGES = ("nvidia-driver-cuda", "libnvidia-ml", "nvidia-driver")
RPM_OPEN_MODULE_PACKAGES = ("kmod-nvidia-open-dkms",)
SELF = "/usr/lib/gpuhost-lab-gpu/gpuemu.py"
# Where Debian's packages put the binaries (their files are diverted away, see install_diversions)
SMI_REAL_PATH = "/usr/lib/nvidia/current/nvidia-smi"
PERSISTENCED_PATH = "/usr/bin/nvidia-persistenced"
SMI_PATH = "/usr/bin/nvidia-smi"
CUDA_BY_BRANCH = {"470": "11.4", "525": "12.0", "535": "12.2", "550": "12.4", "560": "12.6",
                  "565": "12.7", "570": "12.8", "575": "12.9", "580": "13.0",
                  # the first driver of each CUDA 13 minor (data/matrix.yaml cuda: 13.1 from
                  # 590.44.01, 13.2 from 595.45.04, 13.3 from 610.43.02)
                  "590": "13.1", "595": "13.2", "610": "13.3"}

# nvidia-smi's exit codes (nvidia-smi(1), RETURN VALUE)
RC_OK, RC_ARG, RC_PERMISSION, RC_NO_DRIVER, RC_LOST, RC_MISMATCH = 0, 2, 4, 9, 15, 18
NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.")


# ------------------------------------------------------------------ files and versions


def _read_json(path: str, default: Any) -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def _write_json(path: str, data: Any) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def model() -> dict[str, Any]:
    data: dict[str, Any] = _read_json(MODEL, {})
    return data


def installed_driver() -> str | None:
    """Upstream version of the installed driver package (None: no driver package installed)."""
    override = os.environ.get("GPUEMU_INSTALLED")
    if override is not None:
        return override or None
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Package} ${Version} ${db:Status-Abbrev}\\n",
             *DRIVER_PACKAGES, *UBUNTU_SMI_PACKAGES], capture_output=True, text=True,
            check=False).stdout
    except OSError:
        out = ""
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2][1:2] == "i":  # "ii", "hi": installed (held or not)
            version = parts[1].split(":", 1)[-1]
            return version.rsplit("-", 1)[0] if "-" in version else version
    return next(iter(_rpm_versions(RPM_DRIVER_PACKAGES)), None)


def _rpm_versions(packages: tuple[str, ...]) -> list[str]:
    """VERSION of the installed ones of ``packages`` per rpm (none where rpm is absent)."""
    try:
        out = subprocess.run(["rpm", "-q", "--qf", "%{VERSION}\\n", *packages],
                             capture_output=True, text=True, check=False).stdout
    except OSError:
        return []
    # "package X is not installed" lines are not versions
    return [line for line in out.splitlines() if line and " " not in line]


def installed_flavor() -> str:
    """"open" when an open kernel module package is installed, else "proprietary"."""
    override = os.environ.get("GPUEMU_FLAVOR")
    if override is not None:
        return override
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f", "${db:Status-Abbrev}\\n", *OPEN_MODULE_PACKAGES],
            capture_output=True, text=True, check=False).stdout
    except OSError:
        out = ""
    if any(line[1:2] == "i" for line in out.splitlines()):
        return "open"
    return "open" if _rpm_versions(RPM_OPEN_MODULE_PACKAGES) else "proprietary"


def fresh_state(loaded: str | None, count: int) -> dict[str, Any]:
    return {"loaded": loaded, "flavor": installed_flavor() if loaded else None,
            "booted": time.time(),
            "fabric": None,  # None: as the model says (Completed on a full HGX board)
            "gpus": [{"pm": False, "app": None, "lgc": None, "lmc": None, "ecc_vol_unc": 0,
                      "ecc_vol_corr": 0, "retired_pending": False, "remap_pending": False,
                      "lost": False, "pcie": None, "clock_events": [], "nvlink_down": [],
                      "missing": False} for _ in range(count)]}


def load_state(m: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] | None = _read_json(STATE, None)
    if state is None:  # the boot unit did not run (yet): a boot with today's driver
        state = fresh_state(installed_driver(), len(m.get("bus_ids", [])))
        _write_json(STATE, state)
    return state


def load_persistent(count: int) -> dict[str, Any]:
    data: dict[str, Any] = _read_json(PERSISTENT, {})
    gpus = data.setdefault("gpus", [])
    while len(gpus) < count:
        gpus.append({"ecc_agg_unc": 0, "retired_sbe": 0, "retired_dbe": 0, "remap_unc": 0,
                     "remap_corr": 0})
    data.setdefault("xid", [])
    return data


def persistenced_running() -> bool:
    try:
        with open(PERSISTENCED_PID) as f:
            pid = int(f.read().strip())
        os.kill(pid, 0)
        return True
    except (OSError, ValueError):
        return False


def cuda_version(driver: str) -> str:
    return CUDA_BY_BRANCH.get(driver.split(".")[0], "12.2")


# ------------------------------------------------------------------ the GPUs nvidia-smi sees


class Gpu:
    """One emulated GPU: the model's data plus this boot's state and the persistent counters."""

    def __init__(self, m: dict[str, Any], index: int, st: dict[str, Any],
                 per: dict[str, Any], number: int | None = None) -> None:
        self.m, self.index, self.st, self.per = m, index, st, per
        self.bus_id = m["bus_ids"][index]
        # nvidia-smi's index: the enumeration order of the GPUs present (a missing GPU shifts it)
        self.number = index if number is None else number
        self.fabric: tuple[str, str] | None = None

    def events(self) -> set[str]:
        """Active clock event reasons (gpuemu inject clock-event=...)."""
        return set(self.st.get("clock_events") or [])

    @property
    def persistence(self) -> bool:
        return bool(self.st["pm"]) or persistenced_running()

    @property
    def app_clocks(self) -> tuple[int, int] | None:
        """(graphics, memory) application clocks, None where the GPU has none."""
        default = self.m["clocks"].get("default_applications")
        if default is None:
            return None
        app = self.st["app"] or default
        return int(app[0]), int(app[1])

    def pcie(self) -> tuple[int, int, int, int]:
        """(gen max, gen current, width max, width current)."""
        p = self.m["pcie"]
        cur = self.st["pcie"] or [p["gen"], p["width"]]
        return p["gen"], cur[0], p["width"], cur[1]

    def current_clocks(self) -> tuple[int, int, int]:
        c = self.m["clocks"]
        gr, mem = c["idle_graphics"], c["idle_memory"]
        if self.st["lgc"]:
            gr = self.st["lgc"][0]
        if self.st["lmc"]:
            mem = self.st["lmc"][0]
        return gr, gr, mem

    def load_seconds(self) -> float | None:
        """Seconds since this GPU's load began; None: idle (no fresh load file)."""
        path = f"{LOAD_DIR}/{self.index}"
        try:
            touched = os.stat(path).st_mtime
            with open(path) as f:
                began = float(f.read().strip() or touched)
        except (OSError, ValueError):
            return None
        if time.time() - touched > LOAD_FRESH_S:
            return None
        return max(0.0, time.time() - began)

    def telemetry(self) -> dict[str, Any]:
        """temperature C, power W, graphics/SM clock MHz, utilization % now (idle or loaded)."""
        gr, _sm, _mem = self.current_clocks()
        idle = {"temp": self.m.get("idle_temp_c", 30), "power": self.m["power"]["idle_draw"],
                "clock": gr, "util": 0}
        rows = (self.m.get("load_series") or {}).get("rows") or []
        busy = self.load_seconds()
        if busy is None or not rows:
            return idle
        power, temp, clock = rows[min(int(busy), len(rows) - 1)]
        if "hw_slowdown" in self.events():
            clock = clock // 2
        return {"temp": temp, "power": float(power), "clock": clock, "util": 100}

    def supported(self) -> dict[int, list[int]]:
        """{memory MHz: [graphics MHz, high to low]}."""
        out: dict[int, list[int]] = {}
        for entry in self.m["clocks"]["supported"]:
            if "graphics" in entry:
                out[int(entry["memory"])] = [int(g) for g in entry["graphics"]]
            else:
                top, low, step = entry["graphics_max"], entry["graphics_min"], entry["step"]
                out[int(entry["memory"])] = list(range(top, low - 1, -step))
        return out


def gpus(m: dict[str, Any], st: dict[str, Any], per: dict[str, Any]) -> list[Gpu]:
    """The GPUs nvidia-smi sees: the model's, less those injected missing."""
    present = [i for i in range(len(m["bus_ids"])) if not st["gpus"][i].get("missing")]
    out = [Gpu(m, i, st["gpus"][i], per["gpus"][i], n) for n, i in enumerate(present)]
    for g in out:
        g.fabric = fabric(m, st)
    return out


# Clock event reasons as nvidia-smi shows them (XML tag suffix, -q text label, indent), in its
# order (tests/fixtures/captures/nvidia-smi-xml/*.xml, the H100 -q capture); "Clocks Throttle
# Reasons" before driver 535
CLOCK_EVENTS = (("gpu_idle", "Idle", 8), ("applications_clocks_setting",
                "Applications Clocks Setting", 8), ("sw_power_cap", "SW Power Cap", 8),
                ("hw_slowdown", "HW Slowdown", 8), ("hw_thermal_slowdown", "HW Thermal Slowdown",
                12), ("hw_power_brake_slowdown", "HW Power Brake Slowdown", 12),
                ("sync_boost", "Sync Boost", 8), ("sw_thermal_slowdown", "SW Thermal Slowdown", 8),
                ("display_clocks_setting", "Display Clock Setting", 8))
# knob value -> the reasons it makes active (a HW thermal slowdown or power brake is also a HW
# slowdown: NVML's clocks event reasons documentation)
CLOCK_KNOB = {"hw-slowdown": ("hw_slowdown",), "hw-thermal": ("hw_slowdown", "hw_thermal_slowdown"),
              "power-brake": ("hw_slowdown", "hw_power_brake_slowdown"),
              "sw-thermal": ("sw_thermal_slowdown",)}
FABRIC_KNOB = {"in-progress": ("In Progress", "N/A"), "not-started": ("Not Started", "N/A"),
               "failure": ("Completed", "Unknown Error")}


def _event_word(driver: str) -> str:
    return "event" if int(driver.split(".")[0]) >= 535 else "throttle"


def _active_events(g: Gpu) -> set[str]:
    active = set(g.events())
    if not g.persistence and not active:
        active.add("gpu_idle")
    return active


def fabric(m: dict[str, Any], st: dict[str, Any]) -> tuple[str, str] | None:
    """(state, status) of the NVSwitch fabric registration; None: the GPUs join no fabric."""
    if not m.get("nvswitch_bus_ids"):
        return None
    return tuple(st.get("fabric") or ("Completed", "Success"))  # type: ignore[return-value]


def _na(value: Any, unit: str = "") -> str:
    return "N/A" if value is None else f"{value}{unit}"


def _en(flag: bool) -> str:
    return "Enabled" if flag else "Disabled"


# ------------------------------------------------------------------ -q -x


def xml_report(m: dict[str, Any], gs: list[Gpu], driver: str) -> str:
    ts = time.strftime("%a %b %e %H:%M:%S %Y")
    out = ['<?xml version="1.0" ?>',
           '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">',
           "<nvidia_smi_log>",
           f"\t<timestamp>{ts}</timestamp>",
           f"\t<driver_version>{driver}</driver_version>",
           f"\t<cuda_version>{cuda_version(driver)}</cuda_version>",
           f"\t<attached_gpus>{len(gs)}</attached_gpus>"]
    for g in gs:
        out += _xml_gpu(m, g, driver)
    out.append("</nvidia_smi_log>")
    return "\n".join(out) + "\n"


def _xml_events(g: Gpu, driver: str) -> list[str]:
    word = _event_word(driver)
    active = _active_events(g)
    return ([f"\t\t<clocks_{word}_reasons>"]
            + [f"\t\t\t<clocks_{word}_reason_{key}>"
               f"{'Active' if key in active else 'Not Active'}</clocks_{word}_reason_{key}>"
               for key, _label, _indent in CLOCK_EVENTS]
            + [f"\t\t</clocks_{word}_reasons>"])


def _xml_fabric(g: Gpu) -> list[str]:
    if g.fabric is None:
        return ["\t\t<fabric>", "\t\t\t<state>N/A</state>", "\t\t\t<status>N/A</status>",
                "\t\t</fabric>"]
    state, status = g.fabric
    return ["\t\t<fabric>", f"\t\t\t<state>{state}</state>", f"\t\t\t<status>{status}</status>",
            "\t\t\t<cliqueId>0</cliqueId>",
            "\t\t\t<clusterUuid>00000000-0000-0000-0000-000000000000</clusterUuid>",
            "\t\t\t<health>", "\t\t\t\t<bandwidth>N/A</bandwidth>", "\t\t\t</health>",
            "\t\t</fabric>"]


def _xml_gpu(m: dict[str, Any], g: Gpu, driver: str) -> list[str]:
    c = m["clocks"]
    gen_max, gen_cur, w_max, w_cur = g.pcie()
    gr, sm, mem = g.current_clocks()
    app = g.app_clocks
    default_app = c.get("default_applications")
    p = m["power"]
    ecc_c = g.st["ecc_vol_corr"]
    ecc_u, agg_u = g.st["ecc_vol_unc"], g.per["ecc_agg_unc"]
    lines = [
        f'\t<gpu id="{g.bus_id}">',
        f"\t\t<product_name>{m['name']}</product_name>",
        f"\t\t<product_brand>{m['brand']}</product_brand>",
        f"\t\t<product_architecture>{m['architecture']}</product_architecture>",
        "\t\t<display_mode>Disabled</display_mode>",
        "\t\t<display_active>Disabled</display_active>",
        f"\t\t<persistence_mode>{_en(g.persistence)}</persistence_mode>",
        "\t\t<addressing_mode>None</addressing_mode>",
        "\t\t<mig_mode>",
        f"\t\t\t<current_mig>{'Disabled' if m.get('mig') else 'N/A'}</current_mig>",
        f"\t\t\t<pending_mig>{'Disabled' if m.get('mig') else 'N/A'}</pending_mig>",
        "\t\t</mig_mode>",
        "\t\t<mig_devices>\n\t\t\tNone\n\t\t</mig_devices>",
        "\t\t<accounting_mode>Disabled</accounting_mode>",
        f"\t\t<serial>{serial(m, g.index)}</serial>",
        f"\t\t<uuid>{uuid(m, g.index)}</uuid>",
        f"\t\t<minor_number>{g.index}</minor_number>",
        f"\t\t<vbios_version>{m['vbios']}</vbios_version>",
        f"\t\t<gsp_firmware_version>{driver}</gsp_firmware_version>",
        "\t\t<multigpu_board>No</multigpu_board>",
        f"\t\t<board_part_number>{m['board_part_number']}</board_part_number>",
        f"\t\t<gpu_module_id>{g.index + 1}</gpu_module_id>",
        "\t\t<gpu_reset_status>",
        f"\t\t\t<reset_required>{'Yes' if g.st['lost'] else 'No'}</reset_required>",
        "\t\t\t<drain_and_reset_recommended>No</drain_and_reset_recommended>",
        "\t\t</gpu_reset_status>",
        "\t\t<pci>",
        f"\t\t\t<pci_bus>{g.bus_id[9:11]}</pci_bus>",
        f"\t\t\t<pci_device>{g.bus_id[12:14]}</pci_device>",
        f"\t\t\t<pci_domain>{g.bus_id[:8]}</pci_domain>",
        f"\t\t\t<pci_device_id>{m['pci_device_id'].removeprefix('0x')}</pci_device_id>",
        f"\t\t\t<pci_bus_id>{g.bus_id}</pci_bus_id>",
        f"\t\t\t<pci_sub_system_id>{m['pci_sub_system_id'].removeprefix('0x')}"
        "</pci_sub_system_id>",
        "\t\t\t<pci_gpu_link_info>",
        "\t\t\t\t<pcie_gen>",
        f"\t\t\t\t\t<max_link_gen>{gen_max}</max_link_gen>",
        f"\t\t\t\t\t<current_link_gen>{gen_cur}</current_link_gen>",
        f"\t\t\t\t\t<device_current_link_gen>{gen_cur}</device_current_link_gen>",
        f"\t\t\t\t\t<max_device_link_gen>{gen_max}</max_device_link_gen>",
        f"\t\t\t\t\t<max_host_link_gen>{gen_max}</max_host_link_gen>",
        "\t\t\t\t</pcie_gen>",
        "\t\t\t\t<link_widths>",
        f"\t\t\t\t\t<max_link_width>{w_max}x</max_link_width>",
        f"\t\t\t\t\t<current_link_width>{w_cur}x</current_link_width>",
        "\t\t\t\t</link_widths>",
        "\t\t\t</pci_gpu_link_info>",
        "\t\t\t<replay_counter>0</replay_counter>",
        "\t\t</pci>",
        "\t\t<fan_speed>N/A</fan_speed>",
        f"\t\t<performance_state>{'P0' if g.persistence else 'P8'}</performance_state>",
        *_xml_events(g, driver),
        "\t\t<fb_memory_usage>",
        f"\t\t\t<total>{m['memory_mib']} MiB</total>",
        f"\t\t\t<reserved>{m.get('memory_reserved_mib', 0)} MiB</reserved>",
        "\t\t\t<used>0 MiB</used>",
        f"\t\t\t<free>{m['memory_mib'] - m.get('memory_reserved_mib', 0)} MiB</free>",
        "\t\t</fb_memory_usage>",
        "\t\t<bar1_memory_usage>",
        f"\t\t\t<total>{m['bar1_mib']} MiB</total>",
        "\t\t\t<used>1 MiB</used>",
        f"\t\t\t<free>{m['bar1_mib'] - 1} MiB</free>",
        "\t\t</bar1_memory_usage>",
        "\t\t<compute_mode>Default</compute_mode>",
        "\t\t<utilization>",
        "\t\t\t<gpu_util>0 %</gpu_util>",
        "\t\t\t<memory_util>0 %</memory_util>",
        "\t\t</utilization>",
        "\t\t<ecc_mode>",
        f"\t\t\t<current_ecc>{_en(m['ecc'])}</current_ecc>",
        f"\t\t\t<pending_ecc>{_en(m['ecc'])}</pending_ecc>",
        "\t\t</ecc_mode>",
        "\t\t<ecc_errors>",
        "\t\t\t<volatile>",
        f"\t\t\t\t<sram_correctable>{ecc_c}</sram_correctable>",
        f"\t\t\t\t<sram_uncorrectable>{ecc_u}</sram_uncorrectable>",
        "\t\t\t\t<dram_correctable>0</dram_correctable>",
        "\t\t\t\t<dram_uncorrectable>0</dram_uncorrectable>",
        "\t\t\t</volatile>",
        "\t\t\t<aggregate>",
        "\t\t\t\t<sram_correctable>0</sram_correctable>",
        f"\t\t\t\t<sram_uncorrectable>{agg_u}</sram_uncorrectable>",
        "\t\t\t\t<dram_correctable>0</dram_correctable>",
        "\t\t\t\t<dram_uncorrectable>0</dram_uncorrectable>",
        "\t\t\t</aggregate>",
        "\t\t</ecc_errors>",
    ]
    if m["retired_pages"]:
        lines += [
            "\t\t<retired_pages>",
            "\t\t\t<multiple_single_bit_retirement>",
            f"\t\t\t\t<retired_count>{g.per['retired_sbe']}</retired_count>",
            "\t\t\t\t<retired_pagelist>\n\t\t\t\t</retired_pagelist>",
            "\t\t\t</multiple_single_bit_retirement>",
            "\t\t\t<double_bit_retirement>",
            f"\t\t\t\t<retired_count>{g.per['retired_dbe']}</retired_count>",
            "\t\t\t\t<retired_pagelist>\n\t\t\t\t</retired_pagelist>",
            "\t\t\t</double_bit_retirement>",
            f"\t\t\t<pending_blacklist>{'Yes' if g.st['retired_pending'] else 'No'}"
            "</pending_blacklist>",
            f"\t\t\t<pending_retirement>{'Yes' if g.st['retired_pending'] else 'No'}"
            "</pending_retirement>",
            "\t\t</retired_pages>",
            "\t\t<remapped_rows>N/A</remapped_rows>",
        ]
    else:
        lines += [
            "\t\t<retired_pages>",
            "\t\t\t<multiple_single_bit_retirement>",
            "\t\t\t\t<retired_count>N/A</retired_count>",
            "\t\t\t\t<retired_pagelist>N/A</retired_pagelist>",
            "\t\t\t</multiple_single_bit_retirement>",
            "\t\t\t<double_bit_retirement>",
            "\t\t\t\t<retired_count>N/A</retired_count>",
            "\t\t\t\t<retired_pagelist>N/A</retired_pagelist>",
            "\t\t\t</double_bit_retirement>",
            "\t\t\t<pending_blacklist>N/A</pending_blacklist>",
            "\t\t\t<pending_retirement>N/A</pending_retirement>",
            "\t\t</retired_pages>",
            "\t\t<remapped_rows>",
            f"\t\t\t<remapped_row_corr>{g.per['remap_corr']}</remapped_row_corr>",
            f"\t\t\t<remapped_row_unc>{g.per['remap_unc']}</remapped_row_unc>",
            f"\t\t\t<remapped_row_pending>{'Yes' if g.st['remap_pending'] else 'No'}"
            "</remapped_row_pending>",
            "\t\t\t<remapped_row_failure>No</remapped_row_failure>",
            "\t\t</remapped_rows>",
        ]
    lines += [
        "\t\t<temperature>",
        f"\t\t\t<gpu_temp>{g.telemetry()['temp']} C</gpu_temp>",
        "\t\t</temperature>",
        "\t\t<gpu_power_readings>",
        f"\t\t\t<power_state>{'P0' if g.persistence else 'P8'}</power_state>",
        f"\t\t\t<power_draw>{g.telemetry()['power']:.2f} W</power_draw>",
        f"\t\t\t<current_power_limit>{p['default']:.2f} W</current_power_limit>",
        f"\t\t\t<requested_power_limit>{p['default']:.2f} W</requested_power_limit>",
        f"\t\t\t<default_power_limit>{p['default']:.2f} W</default_power_limit>",
        f"\t\t\t<min_power_limit>{p['min']:.2f} W</min_power_limit>",
        f"\t\t\t<max_power_limit>{p['max']:.2f} W</max_power_limit>",
        "\t\t</gpu_power_readings>",
        "\t\t<clocks>",
        f"\t\t\t<graphics_clock>{gr} MHz</graphics_clock>",
        f"\t\t\t<sm_clock>{sm} MHz</sm_clock>",
        f"\t\t\t<mem_clock>{mem} MHz</mem_clock>",
        f"\t\t\t<video_clock>{c['max_video']} MHz</video_clock>",
        "\t\t</clocks>",
        "\t\t<applications_clocks>",
        f"\t\t\t<graphics_clock>{_na(app and app[0], ' MHz')}</graphics_clock>",
        f"\t\t\t<mem_clock>{_na(app and app[1], ' MHz')}</mem_clock>",
        "\t\t</applications_clocks>",
        "\t\t<default_applications_clocks>",
        f"\t\t\t<graphics_clock>{_na(default_app and default_app[0], ' MHz')}</graphics_clock>",
        f"\t\t\t<mem_clock>{_na(default_app and default_app[1], ' MHz')}</mem_clock>",
        "\t\t</default_applications_clocks>",
        "\t\t<max_clocks>",
        f"\t\t\t<graphics_clock>{c['max_graphics']} MHz</graphics_clock>",
        f"\t\t\t<sm_clock>{c['max_sm']} MHz</sm_clock>",
        f"\t\t\t<mem_clock>{c['max_memory']} MHz</mem_clock>",
        f"\t\t\t<video_clock>{c['max_video']} MHz</video_clock>",
        "\t\t</max_clocks>",
        "\t\t<clock_policy>",
        "\t\t\t<auto_boost>N/A</auto_boost>",
        "\t\t\t<auto_boost_default>N/A</auto_boost_default>",
        "\t\t</clock_policy>",
        *_xml_fabric(g),
        "\t\t<supported_clocks>",
    ]
    for memclk, graphics in g.supported().items():
        lines.append("\t\t\t<supported_mem_clock>")
        lines.append(f"\t\t\t\t<value>{memclk} MHz</value>")
        lines += [f"\t\t\t\t<supported_graphics_clock>{x} MHz</supported_graphics_clock>"
                  for x in graphics]
        lines.append("\t\t\t</supported_mem_clock>")
    lines += ["\t\t</supported_clocks>", "\t\t<processes>\n\t\t</processes>", "\t</gpu>"]
    return lines


def serial(m: dict[str, Any], index: int) -> str:
    base = str(m["serial_base"])
    return str(int(base) + index).zfill(len(base))


def uuid(m: dict[str, Any], index: int) -> str:
    base = m["uuid_base"]  # GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxx: 10 of the last 12 digits
    return f"{base}{index:02x}"


# ------------------------------------------------------------------ -q (text)


def text_report(m: dict[str, Any], gs: list[Gpu], driver: str) -> str:
    def kv(indent: int, key: str, value: Any) -> str:
        return f"{' ' * indent}{key:<{38 - indent}}: {value}"

    out = ["", "==============NVSMI LOG==============", "",
           f"{'Timestamp':<38}: {time.strftime('%a %b %e %H:%M:%S %Y')}",
           f"{'Driver Version':<38}: {driver}",
           f"{'CUDA Version':<38}: {cuda_version(driver)}", "",
           f"{'Attached GPUs':<38}: {len(gs)}"]
    c = m["clocks"]
    for g in gs:
        gen_max, gen_cur, w_max, w_cur = g.pcie()
        gr, sm, mem = g.current_clocks()
        app = g.app_clocks
        default_app = c.get("default_applications")
        p = m["power"]
        out += [
            f"GPU {g.bus_id}",
            kv(4, "Product Name", m["name"]),
            kv(4, "Product Brand", m["brand"]),
            kv(4, "Product Architecture", m["architecture"]),
            kv(4, "Persistence Mode", _en(g.persistence)),
            kv(4, "Serial Number", serial(m, g.index)),
            kv(4, "GPU UUID", uuid(m, g.index)),
            kv(4, "Minor Number", g.index),
            kv(4, "VBIOS Version", m["vbios"]),
            "    PCI",
            kv(8, "Bus Id", g.bus_id),
            kv(8, "Device Id", m["pci_device_id"]),
            "        GPU Link Info",
            "            PCIe Generation",
            kv(16, "Max", gen_max),
            kv(16, "Current", gen_cur),
            "            Link Width",
            kv(16, "Max", f"{w_max}x"),
            kv(16, "Current", f"{w_cur}x"),
            kv(4, "Performance State", "P0" if g.persistence else "P8"),
            f"    Clocks {_event_word(driver).title()} Reasons",
            *(kv(indent, label, "Active" if key in _active_events(g) else "Not Active")
              for key, label, indent in CLOCK_EVENTS),
            "    FB Memory Usage",
            kv(8, "Total", f"{m['memory_mib']} MiB"),
            "    ECC Mode",
            kv(8, "Current", _en(m["ecc"])),
            kv(8, "Pending", _en(m["ecc"])),
            "    ECC Errors",
            "        Volatile",
            kv(12, "SRAM Correctable", g.st["ecc_vol_corr"]),
            kv(12, "SRAM Uncorrectable", g.st["ecc_vol_unc"]),
            "        Aggregate",
            kv(12, "SRAM Uncorrectable", g.per["ecc_agg_unc"]),
            "    Retired Pages",
            kv(8, "Single Bit ECC", g.per["retired_sbe"] if m["retired_pages"] else "N/A"),
            kv(8, "Double Bit ECC", g.per["retired_dbe"] if m["retired_pages"] else "N/A"),
            kv(8, "Pending Page Blacklist",
               ("Yes" if g.st["retired_pending"] else "No") if m["retired_pages"] else "N/A"),
        ]
        if m["retired_pages"]:
            out.append(kv(4, "Remapped Rows", "N/A"))
        else:
            out += ["    Remapped Rows",
                    kv(8, "Correctable Error", g.per["remap_corr"]),
                    kv(8, "Uncorrectable Error", g.per["remap_unc"]),
                    kv(8, "Pending", "Yes" if g.st["remap_pending"] else "No"),
                    kv(8, "Remapping Failure Occurred", "No")]
        out += [
            "    GPU Power Readings",
            kv(8, "Power Draw", f"{p['idle_draw']:.2f} W"),
            kv(8, "Current Power Limit", f"{p['default']:.2f} W"),
            kv(8, "Default Power Limit", f"{p['default']:.2f} W"),
            kv(8, "Min Power Limit", f"{p['min']:.2f} W"),
            kv(8, "Max Power Limit", f"{p['max']:.2f} W"),
            "    Clocks",
            kv(8, "Graphics", f"{gr} MHz"),
            kv(8, "SM", f"{sm} MHz"),
            kv(8, "Memory", f"{mem} MHz"),
            "    Applications Clocks",
            kv(8, "Graphics", _na(app and app[0], " MHz")),
            kv(8, "Memory", _na(app and app[1], " MHz")),
            "    Default Applications Clocks",
            kv(8, "Graphics", _na(default_app and default_app[0], " MHz")),
            kv(8, "Memory", _na(default_app and default_app[1], " MHz")),
            "    Max Clocks",
            kv(8, "Graphics", f"{c['max_graphics']} MHz"),
            kv(8, "SM", f"{c['max_sm']} MHz"),
            kv(8, "Memory", f"{c['max_memory']} MHz"),
        ]
        if g.fabric is not None:
            out += ["    Fabric", kv(8, "State", g.fabric[0]), kv(8, "Status", g.fabric[1]),
                    kv(8, "CliqueId", 0),
                    kv(8, "ClusterUUID", "00000000-0000-0000-0000-000000000000"),
                    "        Health", kv(12, "Bandwidth", "N/A")]
        out.append("")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ --query-gpu


def _query_value(m: dict[str, Any], g: Gpu, field: str, driver: str, units: bool) -> str:
    gen_max, gen_cur, w_max, w_cur = g.pcie()
    _gr, _sm, mem = g.current_clocks()
    app = g.app_clocks
    c, p = m["clocks"], m["power"]
    now = g.telemetry()

    def mhz(v: Any) -> str:
        return "[N/A]" if v is None else (f"{v} MHz" if units else str(v))

    def watts(v: float) -> str:
        return f"{v:.2f} W" if units else f"{v:.2f}"

    values: dict[str, str] = {
        "index": str(g.number), "name": m["name"], "uuid": uuid(m, g.index),
        "pci.bus_id": g.bus_id, "driver_version": driver, "vbios_version": m["vbios"],
        "persistence_mode": _en(g.persistence), "pstate": "P0" if g.persistence else "P8",
        "memory.total": f"{m['memory_mib']} MiB" if units else str(m["memory_mib"]),
        "memory.used": "0 MiB" if units else "0",
        "temperature.gpu": str(now["temp"]),
        "utilization.gpu": f"{now['util']} %" if units else str(now["util"]),
        "power.draw": watts(now["power"]), "power.limit": watts(p["default"]),
        "enforced.power.limit": watts(p["default"]),
        "power.default_limit": watts(p["default"]), "power.min_limit": watts(p["min"]),
        "power.max_limit": watts(p["max"]),
        "clocks.gr": mhz(now["clock"]), "clocks.sm": mhz(now["clock"]), "clocks.mem": mhz(mem),
        "clocks.applications.graphics": mhz(app and app[0]),
        "clocks.applications.memory": mhz(app and app[1]),
        "clocks.max.graphics": mhz(c["max_graphics"]), "clocks.max.sm": mhz(c["max_sm"]),
        "clocks.max.memory": mhz(c["max_memory"]),
        "pcie.link.gen.current": str(gen_cur), "pcie.link.gen.max": str(gen_max),
        "pcie.link.width.current": str(w_cur), "pcie.link.width.max": str(w_max),
        "ecc.mode.current": _en(m["ecc"]),
        "ecc.errors.uncorrected.volatile.total": str(g.st["ecc_vol_unc"]),
        "ecc.errors.corrected.volatile.total": str(g.st["ecc_vol_corr"]),
        "ecc.errors.uncorrected.aggregate.total": str(g.per["ecc_agg_unc"]),
        "retired_pages.pending": ("Yes" if g.st["retired_pending"] else "No")
        if m["retired_pages"] else "[N/A]",
        "compute_cap": m["compute_cap"],
    }
    active = _active_events(g)
    for key, _label, _indent in CLOCK_EVENTS:  # clocks_event_reasons.* (535+ names)
        values[f"clocks_event_reasons.{key}"] = "Active" if key in active else "Not Active"
    aliases = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id",
               "clocks.current.graphics": "clocks.gr", "clocks.current.sm": "clocks.sm",
               "clocks.current.memory": "clocks.mem", "clocks.applications.gr":
               "clocks.applications.graphics", "clocks.applications.mem":
               "clocks.applications.memory", "clocks.max.gr": "clocks.max.graphics",
               "clocks.max.mem": "clocks.max.memory", "count": "count"}
    field = aliases.get(field, field)
    if field == "count":
        return str(len(m["bus_ids"]))
    if field not in values:
        raise KeyError(field)
    return values[field]


def query_gpu(m: dict[str, Any], gs: list[Gpu], driver: str, fields: str, fmt: str) -> int:
    opts = fmt.split(",")
    if not opts or opts[0] != "csv":
        print(f'"{fmt}" is not a valid format. Please run \'nvidia-smi -h\' for help.')
        return RC_ARG
    names = [f.strip() for f in fields.split(",") if f.strip()]
    units = "nounits" not in opts
    try:
        rows = [[_query_value(m, g, f, driver, units) for f in names] for g in gs]
    except KeyError as exc:
        print(f'Field "{exc.args[0]}" is not a valid field to query.')
        print()
        return RC_ARG
    if "noheader" not in opts:
        header = [f"{f} [MHz]" if units and f.startswith("clocks.") else f for f in names]
        print(", ".join(header))
    for row in rows:
        print(", ".join(row))
    return RC_OK


# ------------------------------------------------------------------ -L, nvlink, topo


def list_gpus(m: dict[str, Any], gs: list[Gpu]) -> str:
    return "".join(f"GPU {g.number}: {m['name']} (UUID: {uuid(m, g.index)})\n" for g in gs)


def nvlink_status(m: dict[str, Any], gs: list[Gpu]) -> str:
    out = []
    for g in gs:
        out.append(f"GPU {g.number}: {m['name']} (UUID: {uuid(m, g.index)})")
        links = m.get("nvlink") or {}
        down = set(g.st.get("nvlink_down") or [])
        for i in range(links.get("links", 0)):
            inactive = g.st["lost"] or i in down
            out.append(f"\t Link {i}: {'<inactive>' if inactive else links['speed']}")
    return "\n".join(out) + "\n"


def nvlink_errors(m: dict[str, Any], gs: list[Gpu]) -> str:
    """``nvidia-smi nvlink -e``: the real layout (Replay/Recovery/CRC per link), all zero."""
    out = []
    for g in gs:
        out.append(f"GPU {g.number}: {m['name']} (UUID: {uuid(m, g.index)})")
        for i in range((m.get("nvlink") or {}).get("links", 0)):
            out += [f"\t Link {i}: {name} Errors: 0" for name in ("Replay", "Recovery", "CRC")]
    return "\n".join(out) + "\n"


def topo_matrix(m: dict[str, Any], gs: list[Gpu]) -> str:
    n = len(gs)
    links = (m.get("nvlink") or {}).get("links", 0)
    between = f"NV{links}" if links else m.get("topo_pcie", "PHB")
    header = ("\t" + "\t".join(f"GPU{i}" for i in range(n))
              + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID")
    rows = [header]
    for i in range(n):
        cells = [" X " if i == j else between for j in range(n)]
        rows.append(f"GPU{i}\t" + "\t".join(cells) + "\t0-1\t0\t\tN/A")
    legend = [
        "", "Legend:", "",
        "  X    = Self",
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
        "(e.g., QPI/UPI)",
        "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host "
        "Bridges within a NUMA node",
        "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
        "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host "
        "Bridge)",
        "  PIX  = Connection traversing at most a single PCIe bridge",
        "  NV#  = Connection traversing a bonded set of # NVLinks",
    ]
    return "\n".join(rows + legend) + "\n"


# ------------------------------------------------------------------ setters


def _clock_pair(value: str, example: str) -> tuple[int, int] | None:
    parts = value.split(",")
    try:
        nums = [int(x) for x in parts]
    except ValueError:
        return None
    if len(nums) == 1:
        return nums[0], nums[0]
    if len(nums) == 2:
        return nums[0], nums[1]
    return None


def set_state(m: dict[str, Any], gs: list[Gpu], st: dict[str, Any], action: str,
              value: str | None) -> int:
    """-pm / -ac / -rac / -lgc / -rgc / -lmc / -rmc on the selected GPUs (nvidia-smi's texts)."""
    arch = m["architecture"]
    volta_plus = arch not in ("Pascal", "Maxwell", "Kepler")
    ampere_plus = arch in ("Ampere", "Ada Lovelace", "Hopper", "Blackwell")
    root = os.geteuid() == 0 or os.environ.get("GPUEMU_ROOT_USER") == "1"
    rc = RC_OK
    warned = False
    pair: tuple[int, int] | None = None
    if action == "pm":
        if value not in ("0", "1", "ENABLED", "DISABLED", "enabled", "disabled"):
            print(f'Invalid persistence mode: {value}')
            return RC_ARG
        want = value in ("1", "ENABLED", "enabled")
        for g in gs:
            if not root:
                print(f"Unable to set persistence mode for GPU {g.bus_id}: Insufficient "
                      "Permissions")
                print("Terminating early due to previous errors.")
                return RC_PERMISSION
            if g.persistence == want and g.st["pm"] == want:
                print(f"Persistence mode is already {_en(want)} for GPU {g.bus_id}.")
            else:
                g.st["pm"] = want
                print(f"{_en(want)} persistence mode for GPU {g.bus_id}.")
        print("All done.")
        return rc
    if action in ("ac", "lgc", "lmc"):
        example = {"ac": "2000,300", "lgc": "1500,1500", "lmc": "5100,5100"}[action]
        pair = _clock_pair(value or "", example)
        if pair is None:
            if action == "ac":
                print(f'Specified clocks "{value}" are not valid. Please format input as '
                      f"memClk,smClk e.g. --applications-clocks={example}")
            elif action == "lgc":
                print(f'Specified clocks "{value}" are not valid. Please format input as '
                      "'gpuClkMin,gpuClkMax' or 'gpuClkVal' e.g. '--lock-gpu-clocks=1500,1500', "
                      "'--lock-gpu-clocks=1500', or '--lock-gpu-clocks=tdp,unlimited'")
            else:
                print(f'Specified clocks "{value}" are not valid. Please format input as '
                      "'memClkMin,memClkMax' or 'memClkVal' e.g. --lock-memory-clocks=5100,5100 "
                      "or --lock-memory-clocks=5100")
            return RC_ARG
    for g in gs:
        if not root:
            print(f"The current user does not have permission to change clocks for GPU "
                  f"{g.bus_id}.")
            print("Terminating early due to previous errors.")
            return RC_PERMISSION
        supported = g.supported()
        if action == "ac":
            assert pair is not None
            mem, gr = pair
            if g.app_clocks is None:
                print(f"Setting applications clocks is not supported for GPU {g.bus_id}.")
                print("Treating as warning and moving on.")
                warned = True
            elif gr not in supported.get(mem, []):
                print(f'Specified clock combination "(MEM {mem}, SM {gr})" is not supported for '
                      f"GPU {g.bus_id}. Run 'nvidia-smi -q -d SUPPORTED_CLOCKS' to see list of "
                      "supported clock combinations")
                print("Treating as warning and moving on.")
                warned = True
            else:
                g.st["app"] = [gr, mem]
                print(f'Applications clocks set to "(MEM {mem}, SM {gr})" for GPU {g.bus_id}')
        elif action == "rac":
            if g.app_clocks is None:
                print(f"Setting applications clocks is not supported for GPU {g.bus_id}.")
                print("Treating as warning and moving on.")
                warned = True
            else:
                g.st["app"] = None
        elif action == "lgc":
            assert pair is not None
            lo, hi = pair
            all_gr = {x for values in supported.values() for x in values}
            if not volta_plus:
                print(f"Setting locked GPU clocks is not supported for GPU {g.bus_id}.")
                print("Treating as warning and moving on.")
                warned = True
            elif lo > hi or lo not in all_gr or hi not in all_gr:
                print(f'Specified clock combination "(gpuClkMin {lo}, gpuClkMax {hi})" is not '
                      f"supported for GPU {g.bus_id}. Run 'nvidia-smi -q -d SUPPORTED_CLOCKS' to "
                      "see list of supported clock combinations")
                print("Treating as warning and moving on.")
                warned = True
            else:
                g.st["lgc"] = [lo, hi]
                print(f'GPU clocks set to "(gpuClkMin {lo}, gpuClkMax {hi})" for GPU {g.bus_id}')
        elif action == "rgc":
            if not volta_plus:
                print(f"Setting locked gpu clocks is not supported for GPU {g.bus_id}.")
                print("Treating as warning and moving on.")
                warned = True
            else:
                g.st["lgc"] = None
        elif action == "lmc":
            assert pair is not None
            lo, hi = pair
            if not ampere_plus:
                print(f"Setting locked Memory clocks is not supported for GPU {g.bus_id}.")
                print("Treating as warning and moving on.")
                warned = True
            elif lo > hi or lo not in supported or hi not in supported:
                print(f'Specified clock combination "(memClkMin {lo}, memClkMax {hi})" is not '
                      f"supported for GPU {g.bus_id}. Run 'nvidia-smi -q -d SUPPORTED_CLOCKS' to "
                      "see list of supported clock combinations")
                print("Treating as warning and moving on.")
                warned = True
            else:
                g.st["lmc"] = [lo, hi]
                print(f'Memory clocks set to "(memClkMin {lo}, memClkMax {hi})" for GPU '
                      f"{g.bus_id}")
        elif action == "rmc":
            if not ampere_plus:
                print(f"Setting locked Memory clocks is not supported for GPU {g.bus_id}.")
                print("Treating as warning and moving on.")
                warned = True
            else:
                g.st["lmc"] = None
    # "Treating as warning and moving on." still ends in "All done." and exit 0, as the real
    # nvidia-smi does (a script must read the GPU state back, not trust the exit code)
    del warned
    print("All done.")
    return rc


# ------------------------------------------------------------------ nvidia-smi


def log_call(argv: list[str], rc: int) -> None:
    """One line per state-changing call, per boot: which unit (cgroup) ran what, its exit code
    (tests read it to see who restored the clocks after a boot)."""
    try:
        with open("/proc/self/cgroup") as f:
            cgroup = f.read().strip().rsplit(":", 1)[-1]
    except OSError:
        cgroup = "?"
    with open(CALLS, "a") as f:
        f.write(f"{time.time():.3f} rc={rc} cgroup={cgroup} nvidia-smi {' '.join(argv)}\n")


def _driver_error(m: dict[str, Any], st: dict[str, Any]) -> tuple[str, int] | None:
    """The error every nvidia-smi call prints first: no module loaded, or a mismatch."""
    installed = installed_driver()
    loaded = st.get("loaded")
    if not loaded:
        return NO_DRIVER, RC_NO_DRIVER
    if installed and loaded != installed:
        library = ".".join(installed.split(".")[:2])
        return (f"Failed to initialize NVML: Driver/library version mismatch\n"
                f"NVML library version: {library}", RC_MISMATCH)
    return None


def smi_main(argv: list[str]) -> int:
    m = model()
    if not m:
        print(NO_DRIVER)
        return RC_NO_DRIVER
    st = load_state(m)
    per = load_persistent(len(m["bus_ids"]))
    err = _driver_error(m, st)
    if err:
        print(err[0])
        return err[1]
    driver = str(st["loaded"])
    all_gpus = gpus(m, st, per)
    args = list(argv)
    select: list[Gpu] = all_gpus
    if "-i" in args or any(a.startswith("--id=") for a in args):
        if "-i" in args:
            pos = args.index("-i")
            ident = args[pos + 1] if pos + 1 < len(args) else ""
            del args[pos:pos + 2]
        else:
            pos = next(i for i, a in enumerate(args) if a.startswith("--id="))
            ident = args.pop(pos).split("=", 1)[1]
        select = [g for g in all_gpus
                  if ident in (str(g.number), g.bus_id, uuid(m, g.index))]
        if not select:
            print("No devices were found")
            return 6
    lost = [g for g in select if g.st["lost"]]
    if lost:
        print(f"Unable to determine the device handle for GPU {lost[0].bus_id}: GPU is lost.  "
              "Reboot the system to recover this GPU")
        return RC_LOST
    setters = {"-pm": "pm", "--persistence-mode": "pm", "-ac": "ac",
               "--applications-clocks": "ac", "-rac": "rac", "--reset-applications-clocks": "rac",
               "-lgc": "lgc", "--lock-gpu-clocks": "lgc", "-rgc": "rgc",
               "--reset-gpu-clocks": "rgc", "-lmc": "lmc", "--lock-memory-clocks": "lmc",
               "-rmc": "rmc", "--reset-memory-clocks": "rmc"}
    for pos, arg in enumerate(args):
        key, _, inline = arg.partition("=")
        if key in setters:
            action = setters[key]
            value = inline or (args[pos + 1] if pos + 1 < len(args) else None)
            if action in ("pm", "ac", "lgc", "lmc") and not value:
                print(f"Option {key} is missing its value")
                return RC_ARG
            rc = set_state(m, select, st, action, value)
            _write_json(STATE, st)
            log_call(argv, rc)
            return rc
    if not args:
        sys.stdout.write(list_gpus(m, select))
        return RC_OK
    if args[0] in ("-L", "--list-gpus"):
        sys.stdout.write(list_gpus(m, select))
        return RC_OK
    if args[0] == "nvlink":
        errors = "-e" in args or "--errorcounters" in args
        sys.stdout.write((nvlink_errors if errors else nvlink_status)(m, select))
        return RC_OK
    if args[0] == "topo":
        if "-m" not in args and "--matrix" not in args:
            print("ERROR: Option -m is missing its value")
            return RC_ARG
        sys.stdout.write(topo_matrix(m, all_gpus))
        return RC_OK
    if args[0] == "--version":
        print(f"NVIDIA-SMI version  : {driver}\nNVML version        : {driver}\n"
              f"DRIVER version      : {driver}\nCUDA Version        : {cuda_version(driver)}")
        return RC_OK
    query = next((a for a in args if a.startswith("--query-gpu=")), None)
    if query:
        fmt = next((a.split("=", 1)[1] for a in args if a.startswith("--format=")), "")
        return query_gpu(m, select, driver, query.split("=", 1)[1], fmt)
    if args[0] in ("-q", "--query"):
        if "-x" in args or "--xml-format" in args:
            sys.stdout.write(xml_report(m, select, driver))
        else:
            sys.stdout.write(text_report(m, select, driver))
        return RC_OK
    print("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.")
    return RC_ARG


# ------------------------------------------------------------------ nvidia-persistenced


def persistenced_main(argv: list[str]) -> int:
    m = model()
    st = load_state(m) if m else {"loaded": None}
    if not st.get("loaded") or _driver_error(m, st):
        print("nvidia-persistenced failed to initialize. Check syslog for more details.",
              file=sys.stderr)
        return 1
    os.makedirs(os.path.dirname(PERSISTENCED_PID), exist_ok=True)
    pid = os.fork()
    if pid:
        # Type=forking: the parent exits once the daemon wrote its PID file
        for _ in range(100):
            if os.path.exists(PERSISTENCED_PID):
                return 0
            time.sleep(0.02)
        return 1
    os.setsid()
    with open(PERSISTENCED_PID, "w") as f:
        f.write(f"{os.getpid()}\n")
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    while True:
        time.sleep(3600)


# ------------------------------------------------------------------ boot, sync, faults


def proc_version(driver: str, m: dict[str, Any], flavor: str | None = None) -> str:
    """/proc/driver/nvidia/version of the loaded module, in the proprietary or the open module's
    format (tests/fixtures/captures/proc-driver-version/)."""
    date = m.get("driver_build_date", "Thu Jan  1 00:00:00 UTC 2026")
    gcc = "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14) \n"
    if flavor == "open":
        return (f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {driver}  Release Build"
                f"  (gpuhost-lab-gpu@emulator)  {date}\n{gcc}")
    return f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {driver}  {date}\n{gcc}"


def boot_main() -> int:
    """At every boot: a fresh GPU state and /proc/driver/nvidia for the driver installed now."""
    m = model()
    loaded = installed_driver()
    st = fresh_state(loaded, len(m.get("bus_ids", [])))
    _write_json(STATE, st)
    with open(CALLS, "w"):
        pass
    per = load_persistent(len(m.get("bus_ids", [])))
    _write_json(PERSISTENT, per)
    if ROOT == "":
        present_pci(m)
    armed = per.pop("armed", [])
    if armed:
        _write_json(PERSISTENT, per)
    if ROOT == "" and loaded:
        # The loaded module as the kernel shows it: /proc/driver/nvidia/version (gpuhost's audit
        # probe) and /sys/module/nvidia/version (gpuhost's reboot check).  Both are tmpfs mounts
        # inside this container only; the one over /sys/module hides the host kernel's modules
        # there (nothing in a lab host loads modules).
        for where in (PROC_DRIVER, SYS_MODULE):
            subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755,size=1m", "gpuemu", where],
                           check=True)
        os.makedirs(f"{PROC_DRIVER}/nvidia/gpus", exist_ok=True)
        for bus in m.get("bus_ids", []):
            os.makedirs(f"{PROC_DRIVER}/nvidia/gpus/{bus[4:].lower()}", exist_ok=True)
        os.makedirs(f"{SYS_MODULE}/nvidia", exist_ok=True)
        write_loaded(loaded, m, st["flavor"])
    for args in armed:  # faults armed for this boot (gpuemu arm), once
        inject_main(args)
    return 0


def arm_main(args: list[str]) -> int:
    """Arm a fault for the next boot only (e.g. to fail an upgrade's validation after its
    reboot): the same arguments as inject, checked now, applied by the boot unit."""
    m = model()
    knob = args[0].partition("=")[0] if args else ""
    gpus = [a for a in args[1:] if a.startswith("gpu=") and a[4:].isdigit()]
    if (not args or knob not in KNOBS or len(gpus) != len(args) - 1
            or any(int(a[4:]) >= len(m.get("bus_ids", [])) for a in gpus)):
        print(f"gpuemu arm: expected one of {', '.join(KNOBS)} (xid=N) [gpu=N] with N a GPU "
              "of this host", file=sys.stderr)
        return 2
    per = load_persistent(len(m.get("bus_ids", [])))
    per.setdefault("armed", []).append(args)
    _write_json(PERSISTENT, per)
    return 0


def present_pci(m: dict[str, Any]) -> None:
    """The GPUs (and a full HGX board's NVSwitches) on the PCI bus as sysfs shows them to
    gpuhost's probe and checks: a tmpfs over /sys/bus/pci/devices of this container only, one
    folder per device with vendor, device and class (the machine's own devices are hidden there)."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755,size=1m", "gpuemu", PCI_DEVICES],
                   check=True)
    _pci_devices(m)


def _pci_devices(m: dict[str, Any]) -> None:
    """One sysfs folder per GPU and NVSwitch of the model (made again by gpuemu clear)."""
    gpu_device = m["pci_device_id"].removeprefix("0x")[:4].lower()  # "0x233010DE": 2330, 10de
    devices = [(bus, gpu_device, "0x030200") for bus in m["bus_ids"]]  # 3D controller
    devices += [(bus, m["nvswitch_device_id"], "0x068000") for bus in m.get("nvswitch_bus_ids", [])]
    for bus, device, pci_class in devices:
        folder = f"{PCI_DEVICES}/{bus[4:].lower()}"
        os.makedirs(folder, exist_ok=True)
        for name, value in (("vendor", "0x10de"), ("device", f"0x{device.removeprefix('0x')}"),
                            ("class", pci_class)):
            with open(f"{folder}/{name}", "w") as f:
                f.write(value + "\n")


def write_loaded(driver: str, m: dict[str, Any], flavor: str | None) -> None:
    with open(f"{PROC_DRIVER}/nvidia/version", "w") as f:
        f.write(proc_version(driver, m, flavor))
    with open(f"{SYS_MODULE}/nvidia/version", "w") as f:
        f.write(f"{driver}\n")


def sync_main() -> int:
    """dpkg hook: link the stand-ins where the installed packages expect their binaries."""
    def installed(*patterns: str) -> bool:
        out = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Abbrev}\\n", *patterns],
                             capture_output=True, text=True, check=False).stdout
        return any(line[1:2] == "i" for line in out.splitlines())

    # Ubuntu: nvidia-utils[-<branch>] ships /usr/bin/nvidia-smi itself (replaced by the emulator
    # here, again after each dpkg run that put the package's file back)
    ubuntu_smi = installed(*UBUNTU_SMI_PACKAGES)
    has_smi = installed("nvidia-smi") or ubuntu_smi
    # Debian: /usr/bin/nvidia-smi is a slave link of nvidia-alternative to SMI_REAL_PATH, whose
    # packaged file is diverted away.  update-alternatives only makes a slave link whose target
    # exists, so SMI_REAL_PATH is always the emulator (made by tests/lab at attach time, never
    # removed here): without the alternative nothing reaches it.  The lab repository's stand-ins
    # for NVIDIA's debian12 packages ship SMI_REAL_PATH too (diverted the same way) and a
    # /usr/bin/nvidia-smi link to it; an older stand-in without that link gets one here.
    targets = [(SMI_REAL_PATH, True), (PERSISTENCED_PATH, installed(*PERSISTENCED_PACKAGES))]
    debian_smi = os.path.exists(SMI_REAL_PATH + ".debian")
    if ubuntu_smi or (has_smi and not os.path.lexists(SMI_PATH) and not debian_smi):
        targets.append((SMI_PATH, True))
    elif os.path.islink(SMI_PATH) and os.readlink(SMI_PATH) == SELF and not has_smi:
        targets.append((SMI_PATH, False))
    for path, wanted in targets:
        ours = os.path.islink(path) and os.readlink(path) == SELF
        if wanted and not ours:
            if os.path.lexists(path):
                os.unlink(path)  # a lab stand-in package's empty placeholder
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.symlink(SELF, path)
        elif not wanted and ours:
            os.unlink(path)
    return 0


# the driver's wording after the code, for the Xids the lab injects most (NVIDIA Xid catalog)
XID_TEXTS = {"79": "GPU has fallen off the bus.",
             "48": "An uncorrectable double bit error (DBE) has been detected on GPU.",
             "94": "Contained ECC error.", "95": "Uncontained ECC error.",
             "13": "Graphics Engine Exception.", "31": "Ch 00000008, intr 00000000. MMU Fault",
             # newer drivers: the recovery action the driver asks for (the NVML enum's values)
             "154": "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"}
KNOBS = ("xid", "ecc-uncorrectable", "retired-pages", "remap-pending", "gpu-lost",
         "driver-mismatch", "persistence-off", "pcie-downgrade", "clock-event", "fabric",
         "nvlink-down", "gpu-missing")


def inject_main(args: list[str]) -> int:
    if not args:
        print(f"gpuemu inject: expected one of {', '.join(KNOBS)} (xid=N) [gpu=N]",
              file=sys.stderr)
        return 2
    knob, _, knob_value = args[0].partition("=")
    index = 0
    for extra in args[1:]:
        key, _, value = extra.partition("=")
        if key != "gpu" or not value.isdigit():
            print(f"gpuemu inject: {extra!r}: expected gpu=N", file=sys.stderr)
            return 2
        index = int(value)
    m = model()
    count = len(m.get("bus_ids", []))
    if knob not in KNOBS:
        print(f"gpuemu inject: unknown knob {knob!r}; expected one of {', '.join(KNOBS)}",
              file=sys.stderr)
        return 2
    if not 0 <= index < count:
        print(f"gpuemu inject: gpu={index}: this host has GPUs 0..{count - 1}", file=sys.stderr)
        return 2
    st = load_state(m)
    per = load_persistent(count)
    g, p = st["gpus"][index], per["gpus"][index]
    bus = m["bus_ids"][index]
    if knob == "xid":
        if not knob_value.isdigit():
            print("gpuemu inject: xid needs a code, e.g. xid=79", file=sys.stderr)
            return 2
        text = XID_TEXTS.get(knob_value, "injected by the lab's GPU emulator")
        return _kernel_log(f"NVRM: Xid (PCI:{bus[4:14].lower()}): {knob_value}, pid=0, "
                           f"name=gpuemu, {text}")
    if knob == "ecc-uncorrectable":
        g["ecc_vol_unc"] += 1
        p["ecc_agg_unc"] += 1
    elif knob == "retired-pages":
        if not m["retired_pages"]:
            print(f"gpuemu inject: {m['name']} ({m['architecture']}) has no page retirement "
                  "(it remaps rows: use remap-pending)", file=sys.stderr)
            return 2
        p["retired_dbe"] += 1
        g["retired_pending"] = True
    elif knob == "remap-pending":
        if m["retired_pages"]:
            print(f"gpuemu inject: {m['name']} ({m['architecture']}) has no row remapping "
                  "(it retires pages: use retired-pages)", file=sys.stderr)
            return 2
        p["remap_unc"] += 1
        g["remap_pending"] = True
    elif knob == "gpu-lost":
        g["lost"] = True
    elif knob == "driver-mismatch":
        loaded = str(st.get("loaded") or installed_driver() or "")
        parts = loaded.split(".")
        if len(parts) < 2 or not parts[1].isdigit():
            print("gpuemu inject: no driver loaded to mismatch", file=sys.stderr)
            return 2
        parts[1] = str(int(parts[1]) - 1).zfill(len(parts[1]))
        st["loaded"] = ".".join(parts)
        if ROOT == "" and os.path.exists(f"{PROC_DRIVER}/nvidia/version"):
            write_loaded(st["loaded"], m, st.get("flavor"))
    elif knob == "persistence-off":
        if ROOT == "":
            subprocess.run(["systemctl", "stop", "nvidia-persistenced.service"], check=False,
                           capture_output=True)
        for gpu in st["gpus"]:
            gpu["pm"] = False
    elif knob == "pcie-downgrade":
        gen, width = m["pcie"]["gen"], m["pcie"]["width"]
        g["pcie"] = [max(1, gen - 2), width // 2]
    else:
        problem = _inject_new(knob, knob_value, m, st, index)
        if problem:
            print(f"gpuemu inject: {problem}", file=sys.stderr)
            return 2
    _write_json(STATE, st)
    _write_json(PERSISTENT, per)
    return 0


def _inject_new(knob: str, value: str, m: dict[str, Any], st: dict[str, Any],
                index: int) -> str | None:
    """clock-event=REASON, fabric=STATE, nvlink-down[=LINK], gpu-missing on GPU ``index``;
    the problem (one line) when the knob does not apply to this model."""
    g = st["gpus"][index]
    if knob == "clock-event":
        if value not in CLOCK_KNOB:
            return f"clock-event needs one of {', '.join(CLOCK_KNOB)}"
        g["clock_events"] = sorted(set(g.get("clock_events") or []) | set(CLOCK_KNOB[value]))
    elif knob == "fabric":
        if value not in FABRIC_KNOB:
            return f"fabric needs one of {', '.join(FABRIC_KNOB)}"
        if not m.get("nvswitch_bus_ids"):
            return (f"{m['name']} x{len(m['bus_ids'])} joins no NVSwitch fabric "
                    "(a full HGX board does)")
        st["fabric"] = list(FABRIC_KNOB[value])
    elif knob == "nvlink-down":
        links = (m.get("nvlink") or {}).get("links", 0)
        link = int(value) if value.isdigit() else 0 if not value else -1
        if not 0 <= link < links:
            return f"nvlink-down[=LINK]: {m['name']} has NVLink links 0..{links - 1}" if links \
                else f"{m['name']} has no NVLink"
        g["nvlink_down"] = sorted(set(g.get("nvlink_down") or []) | {link})
    elif knob == "gpu-missing":
        g["missing"] = True
        if ROOT == "":  # gone from the PCI bus too
            subprocess.run(["rm", "-rf", f"{PCI_DEVICES}/{m['bus_ids'][index][4:].lower()}"],
                           check=False)
    return None


def _kernel_log(message: str) -> int:
    """A kernel-transport journal entry of this boot, as `journalctl -k -b` shows it."""
    remote = "/lib/systemd/systemd-journal-remote"
    if not os.path.exists(remote):
        print("gpuemu inject xid: needs systemd-journal-remote (tests/lab installs it)",
              file=sys.stderr)
        return 1
    with open("/etc/machine-id") as f:
        machine = f.read().strip()
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip().replace("-", "")
    now = time.time()
    with open("/proc/uptime") as f:
        mono = int(float(f.read().split()[0]) * 1e6)
    entry = (f"__REALTIME_TIMESTAMP={int(now * 1e6)}\n__MONOTONIC_TIMESTAMP={mono}\n"
             f"_BOOT_ID={boot}\n_MACHINE_ID={machine}\n_TRANSPORT=kernel\n"
             f"SYSLOG_IDENTIFIER=kernel\nPRIORITY=4\n_HOSTNAME={os.uname().nodename}\n"
             f"MESSAGE={message}\n\n")
    target = f"/var/log/journal/{machine}/remote-gpuemu-{int(now * 1e6)}.journal"
    os.makedirs(os.path.dirname(target), exist_ok=True)
    proc = subprocess.run([remote, "-o", target, "-"], input=entry, text=True,
                          capture_output=True, check=False)
    if proc.returncode != 0:
        print(f"gpuemu inject xid: systemd-journal-remote failed: {proc.stderr.strip()}",
              file=sys.stderr)
    return proc.returncode


def clear_main() -> int:
    m = model()
    count = len(m.get("bus_ids", []))
    st = load_state(m)
    loaded = installed_driver() if st.get("loaded") else None
    fresh = fresh_state(loaded, count)
    for old, new in zip(st["gpus"], fresh["gpus"], strict=False):
        for key in ("pm", "app", "lgc", "lmc"):
            new[key] = old[key]
    fresh["booted"] = st.get("booted", time.time())
    fresh["flavor"] = st.get("flavor")  # the module loaded at boot stays loaded
    _write_json(STATE, fresh)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(PERSISTENT)
    if ROOT == "" and any(gpu.get("missing") for gpu in st["gpus"]):
        _pci_devices(m)
    if ROOT == "":
        for path in os.listdir("/var/log/journal"):
            folder = f"/var/log/journal/{path}"
            for name in os.listdir(folder) if os.path.isdir(folder) else []:
                if name.startswith("remote-gpuemu-"):
                    os.unlink(f"{folder}/{name}")
        if loaded and os.path.exists(f"{PROC_DRIVER}/nvidia/version"):
            write_loaded(loaded, m, fresh["flavor"])
    return 0


def main(argv: list[str]) -> int:
    name = os.path.basename(argv[0])
    args = argv[1:]
    if name == "nvidia-smi":
        return smi_main(args)
    if name == "nvidia-persistenced":
        return persistenced_main(args)
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, rest = args[0], args[1:]
    if cmd == "nvidia-smi":
        return smi_main(rest)
    if cmd == "nvidia-persistenced":
        return persistenced_main(rest)
    if cmd == "boot":
        return boot_main()
    if cmd == "sync":
        return sync_main()
    if cmd == "inject":
        return inject_main(rest)
    if cmd == "arm":
        return arm_main(rest)
    if cmd == "clear":
        return clear_main()
    if cmd == "gpu-reset":  # what a GPU reset does: per-boot state as at boot, same driver
        m = model()
        st = load_state(m)
        _write_json(STATE, fresh_state(st.get("loaded"), len(m.get("bus_ids", []))))
        return 0
    if cmd == "state":
        m = model()
        print(json.dumps({"state": load_state(m),
                          "persistent": load_persistent(len(m.get("bus_ids", [])))}, indent=1))
        return 0
    print(f"gpuemu: unknown command {cmd!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
