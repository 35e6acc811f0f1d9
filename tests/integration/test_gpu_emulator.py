"""The lab's GPU emulator offline (no lab): its model data equals the real captures it cites, read
with gpuhost's own parsers, and the stand-in nvidia-smi's outputs parse to the same values, change
with -pm/-ac/-lgc/-lmc where the GPU accepts them and refuse with nvidia-smi's texts where not."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lab import gpu as emulator

from gpuhost.parsers.nvidia_smi import parse_output
from gpuhost.parsers.topo import parse_topo

MODELS = emulator.load_models()


def _capture_gpu(name: str):  # type: ignore[no-untyped-def]
    report = parse_output((emulator.CAPTURES / MODELS[name]["capture"]).read_text())
    assert report.ok and report.gpus, name
    return report.gpus[0]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_data_is_the_capture(name: str) -> None:
    model, gpu = MODELS[name], _capture_gpu(name)
    assert gpu.name == model["name"]
    assert gpu.vbios == model["vbios"]
    assert gpu.memory_total_mib == model["memory_mib"]
    assert gpu.power.default == model["power"]["default"]
    assert (gpu.power.min, gpu.power.max) == (model["power"]["min"], model["power"]["max"])
    clocks = model["clocks"]
    assert (gpu.clocks.max_graphics, gpu.clocks.max_sm, gpu.clocks.max_mem) == (
        clocks["max_graphics"],
        clocks["max_sm"],
        clocks["max_memory"],
    )
    assert [
        gpu.clocks.default_applications_graphics,
        gpu.clocks.default_applications_mem,
    ] == clocks["default_applications"]
    assert gpu.pcie.gen_max == model["pcie"]["gen"]
    assert gpu.pcie.width_max == model["pcie"]["width"]
    assert gpu.ecc.mode_current is model["ecc"]
    assert gpu.product_architecture == model["architecture"]
    assert model["bus_ids"][0] == gpu.pci_bus_id
    # the supported-clocks lists hold the max and the default application clocks
    smi = emulator.host_model(name, 1)
    for graphics, memory in (
        [clocks["max_graphics"], clocks["max_memory"]],
        clocks["default_applications"],
    ):
        assert graphics in _ladder(smi).get(memory, []), (name, graphics, memory)


def _ladder(model: dict) -> dict[int, list[int]]:  # type: ignore[type-arg]
    out = {}
    for entry in model["clocks"]["supported"]:
        out[entry["memory"]] = entry.get("graphics") or list(
            range(entry["graphics_max"], entry["graphics_min"] - 1, -entry["step"])
        )
    return out


def test_nvlink_and_topology_from_captures() -> None:
    h100 = MODELS["h100-sxm"]["nvlink"]
    text = (emulator.CAPTURES / h100["capture"]).read_text()
    assert text.count("Link ") == h100["links"] and h100["speed"] in text
    a100 = MODELS["a100-sxm4"]["nvlink"]
    topo = parse_topo((emulator.CAPTURES / a100["capture"]).read_text())
    assert topo is not None and topo.links["GPU0"]["GPU1"] == f"NV{a100['links']}"


@pytest.fixture
def host(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A root for the emulator on this machine ($GPUEMU_ROOT), model h100-sxm:2, driver
    535.261.03 installed and loaded."""

    def make(model: str = "h100-sxm", count: int = 2, installed: str = "535.261.03"):  # type: ignore[no-untyped-def]
        (tmp_path / "etc/gpuhost-lab-gpu").mkdir(parents=True, exist_ok=True)
        (tmp_path / "etc/gpuhost-lab-gpu/model.json").write_text(
            json.dumps(emulator.host_model(model, count))
        )
        env = dict(
            os.environ, GPUEMU_ROOT=str(tmp_path), GPUEMU_INSTALLED=installed, GPUEMU_ROOT_USER="1"
        )

        def smi(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, str(emulator.EMULATOR), *args],
                capture_output=True,
                text=True,
                env={**env, **extra},
                check=False,
            )

        assert smi("boot").returncode == 0
        return smi

    return make


def test_reports_parse_to_the_model_and_follow_setters(host) -> None:  # type: ignore[no-untyped-def]
    smi = host("h100-sxm", 2)
    report = parse_output(smi("nvidia-smi", "-q", "-x").stdout)
    assert report.ok and report.driver_version == "535.261.03" and len(report.gpus) == 2
    assert [g.persistence_mode for g in report.gpus] == [False, False]
    assert report.gpus[1].pci_bus_id == "00000000:2A:00.0"
    done = smi("nvidia-smi", "-i", "1", "-pm", "1")
    assert done.stdout == "Enabled persistence mode for GPU 00000000:2A:00.0.\nAll done.\n"
    assert smi("nvidia-smi", "-ac", "2619,1800").returncode == 0
    for fmt in (["-q", "-x"], ["-q"]):
        gpus = parse_output(smi("nvidia-smi", *fmt).stdout).gpus
        assert [g.persistence_mode for g in gpus] == [False, True]
        assert {g.clocks.applications_graphics for g in gpus} == {1800}
    csv = smi(
        "nvidia-smi",
        "--query-gpu=index,persistence_mode,clocks.applications.graphics",
        "--format=csv,noheader,nounits",
    ).stdout
    assert csv == "0, Disabled, 1800\n1, Enabled, 1800\n"
    assert smi("nvidia-smi", "-rac").returncode == 0
    reset = parse_output(smi("nvidia-smi", "-q", "-x").stdout).gpus[0]
    assert reset.clocks.applications_graphics == 1980
    assert (
        smi("nvidia-smi", "-L")
        .stdout.splitlines()[1]
        .startswith("GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-")
    )
    ours = parse_topo(smi("nvidia-smi", "topo", "-m").stdout)
    assert ours is not None and ours.links["GPU0"]["GPU1"] == "NV18" and ours.nvlink
    # a new boot forgets persistence and clocks, like a real GPU
    smi("boot")
    gpus = parse_output(smi("nvidia-smi", "-q", "-x").stdout).gpus
    assert [g.persistence_mode for g in gpus] == [False, False]


def test_refusals_use_nvidia_smi_texts_and_exit_codes(host) -> None:  # type: ignore[no-untyped-def]
    smi = host("t4", 1)
    bad = smi("nvidia-smi", "-ac", "5001,1591")
    assert bad.returncode == 0  # nvidia-smi treats it as a warning
    assert bad.stdout.startswith(
        'Specified clock combination "(MEM 5001, SM 1591)" is not '
        "supported for GPU 00000000:00:1E.0."
    )
    assert "Treating as warning and moving on." in bad.stdout
    lmc = smi("nvidia-smi", "-lmc", "5001")  # Turing: no locked memory clocks
    assert lmc.stdout.startswith("Setting locked Memory clocks is not supported for GPU")
    assert smi("nvidia-smi", "-lgc", "1590").returncode == 0  # Volta and newer lock GPU clocks
    user = smi("nvidia-smi", "-ac", "5001,1590", GPUEMU_ROOT_USER="0")
    if os.geteuid() != 0:
        assert user.returncode == 4
        assert user.stdout == (
            "The current user does not have permission to change clocks for "
            "GPU 00000000:00:1E.0.\nTerminating early due to previous errors.\n"
        )


def test_faults_and_driver_states(host) -> None:  # type: ignore[no-untyped-def]
    smi = host("h100-sxm", 2)
    assert smi("inject", "remap-pending", "gpu=1").returncode == 0
    gpu = parse_output(smi("nvidia-smi", "-q", "-x").stdout).gpus[1]
    assert gpu.remapped_rows.pending is True and gpu.remapped_rows.uncorrectable == 1
    assert smi("inject", "retired-pages").returncode == 2  # Hopper remaps rows
    assert smi("inject", "ecc-uncorrectable").returncode == 0
    ecc = parse_output(smi("nvidia-smi", "-q", "-x").stdout).gpus[0].ecc
    assert ecc.volatile_uncorrectable == 1
    smi("boot")  # volatile counts and pending flags go, the InfoROM counts stay
    gpus = parse_output(smi("nvidia-smi", "-q", "-x").stdout).gpus
    assert gpus[0].ecc.volatile_uncorrectable == 0 and gpus[0].ecc.aggregate_uncorrectable == 1
    assert gpus[1].remapped_rows.pending is False and gpus[1].remapped_rows.uncorrectable == 1
    assert smi("inject", "pcie-downgrade", "gpu=0").returncode == 0
    link = parse_output(smi("nvidia-smi", "-q", "-x").stdout).gpus[0].pcie
    assert (link.width_current, link.width_max) == (8, 16)
    assert smi("inject", "gpu-lost", "gpu=1").returncode == 0
    lost = smi("nvidia-smi", "-q", "-x")
    assert lost.returncode == 15 and parse_output(lost.stdout).state == "gpu-lost"
    smi("clear")
    assert parse_output(smi("nvidia-smi", "-q", "-x").stdout).ok
    # installed driver newer than the loaded one: nvidia-smi's mismatch until the next boot
    mismatch = smi("nvidia-smi", "-q", "-x", GPUEMU_INSTALLED="535.309.01")
    assert parse_output(mismatch.stdout).state == "driver-library-mismatch"
    assert mismatch.returncode == 18
    # a fault armed for the next boot appears at that boot only
    assert smi("arm", "gpu-lost", "gpu=7").returncode == 2  # this host has GPUs 0..1
    assert smi("arm", "remap-pending", "gpu=1").returncode == 0
    assert parse_output(smi("nvidia-smi", "-q", "-x").stdout).gpus[1].remapped_rows.pending is False
    smi("boot")
    assert parse_output(smi("nvidia-smi", "-q", "-x").stdout).gpus[1].remapped_rows.pending is True
    smi("boot")
    assert parse_output(smi("nvidia-smi", "-q", "-x").stdout).gpus[1].remapped_rows.pending is False
    # no module loaded at boot (no driver installed then)
    smi("boot", GPUEMU_INSTALLED="")
    none = smi("nvidia-smi")
    assert none.returncode == 9 and parse_output(none.stdout).state == "driver-not-loaded"


def test_spec_errors_are_one_line() -> None:
    from lab.config import LabConfigError

    assert emulator.parse_spec("h100-sxm:8") == ("h100-sxm", 8)
    assert emulator.parse_spec("t4") == ("t4", 1)
    for bad in ("h200:1", "t4:0", "t4:9", "H100"):
        with pytest.raises(LabConfigError, match="--gpu"):
            emulator.parse_spec(bad)
    with pytest.raises(LabConfigError, match="fault"):
        emulator.inject_command("xid")
    for bad in ("fabric", "gpu-missing=1", "clock-event=a;b", "melt"):
        with pytest.raises(LabConfigError, match="fault"):
            emulator.inject_command(bad)
    assert "inject xid=79 gpu=2" in emulator.inject_command("xid=79", 2)


def test_lab_inventory_carries_profile_and_gpu() -> None:
    from lab import toolfiles

    state = {
        "name": "x",
        "state_dir": "/tmp/x",
        "proxy_url": "p",
        "repo_url": "r",
        "repo_key_path": "k",
        "repo_key_path_on_host": "kh",
        "hosts": [
            {
                "name": "h1",
                "address": "10.123.9.11",
                "gpu": ["t4", 1],
                "profile": "debian12-nonfree-535-security",
            },
            {"name": "h2", "address": "10.123.9.12"},
        ],
    }
    namespace: dict = {}  # type: ignore[type-arg]
    exec(toolfiles.inventory(state), namespace)  # noqa: S102 - the file pyinfra would exec
    h1, h2 = (dict(data) for _name, data in namespace["lab_hosts"])
    assert h1["gpuhost_profile"] == "debian12-nonfree-535-security" and h1["lab_gpu"] == "t4:1"
    assert "gpuhost_profile" not in h2 and "lab_gpu" not in h2
    # a host with a profile can install NVIDIA-repository profiles from the stand-in repository
    assert (h1["gpuhost_cuda_repo_url"], h1["gpuhost_cuda_repo_key"]) == ("r", "k")
    assert "gpuhost_cuda_repo_url" not in h2
    # an 8-GPU HGX H100 has NVSwitches: its inventory asks for fabric manager, a T4 host's not
    assert "gpuhost_fabric_manager" not in h1
    state["hosts"][0]["gpu"] = ["h100-sxm", 8]
    namespace = {}
    exec(toolfiles.inventory(state), namespace)  # noqa: S102
    assert dict(namespace["lab_hosts"][0][1])["gpuhost_fabric_manager"] is True


def test_loaded_module_reads_as_its_flavour() -> None:
    """/proc/driver/nvidia/version as the emulator presents it parses with gpuhost's parser to
    the flavour of the kernel module package installed at boot (open: NVIDIA's
    nvidia-kernel-open-dkms / Debian's nvidia-open-kernel-dkms)."""
    import importlib.util

    from gpuhost.parsers.driver import parse_proc_version

    spec = importlib.util.spec_from_file_location("gpuemu", emulator.EMULATOR)
    assert spec and spec.loader
    gpuemu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpuemu)
    m = emulator.host_model("t4", 1)
    for flavor in ("open", "proprietary"):
        module = parse_proc_version(gpuemu.proc_version("580.159.03", m, flavor))
        assert module is not None
        assert (module.version, module.flavor) == ("580.159.03", flavor)


def test_lab_clocks_profile_differs_from_the_built_in_only_in_clocks():
    """test_gpu_lab's profile is the built-in debian12-nonfree-535-security with clocks at max:
    companions, driver and packages must follow the built-in when it changes."""
    import dataclasses

    from gpuhost.matrix.profiles import load_profiles

    path = Path(__file__).parent / "data" / "gpu_lab_profiles.yaml"
    profiles = load_profiles(str(path))
    lab = dataclasses.asdict(profiles["lab-debian12-nonfree-535-security-clocks"])
    built_in = dataclasses.asdict(profiles["debian12-nonfree-535-security"])
    differ = {k for k in lab if lab[k] != built_in[k]}
    assert differ == {"name", "description", "clocks", "origin"}
    assert lab["clocks"]["policy"] == "max"


def test_fault_knobs_of_the_catalog_classes(host) -> None:  # type: ignore[no-untyped-def]
    """The knobs for issue 26's fault classes, read back with gpuhost's own parsers: clock event
    reasons (a HW thermal slowdown or power brake is a HW slowdown too), the NVSwitch fabric
    state of a full HGX board, an NVLink link down, a GPU missing from nvidia-smi, Xid 154."""
    from gpuhost.parsers.smi_misc import parse_nvlink_status

    smi = host("h100-sxm", 8)
    assert smi("inject", "clock-event=power-brake", "gpu=2").returncode == 0
    xml = smi("nvidia-smi", "-q", "-x").stdout
    text = smi("nvidia-smi", "-q").stdout
    for out in (xml, text):
        assert parse_output(out).ok and len(parse_output(out).gpus) == 8
    gpu2 = xml.split('<gpu id="00000000:3A:00.0">')[1].split("</gpu>")[0]
    assert "<clocks_event_reason_hw_power_brake_slowdown>Active<" in gpu2
    assert "<clocks_event_reason_hw_slowdown>Active<" in gpu2
    assert "<clocks_event_reason_sw_thermal_slowdown>Not Active<" in gpu2
    assert len(re.findall(r"\n {12}HW Power Brake Slowdown +: Active\n", text)) == 1
    old = smi("nvidia-smi", "-q", "-x", GPUEMU_INSTALLED="525.147.05")  # mismatch until boot
    assert old.returncode == 18
    # fabric: Completed/Success on a full board until injected
    assert xml.count("<state>Completed</state>") == 8 and "Fabric" in text
    assert smi("inject", "fabric=in-progress").returncode == 0
    assert smi("nvidia-smi", "-q", "-x").stdout.count("<state>In Progress</state>") == 8
    assert re.search(r"\n {8}State +: In Progress\n", smi("nvidia-smi", "-q").stdout)
    # NVLink link 5 of GPU 1 inactive
    assert smi("inject", "nvlink-down=5", "gpu=1").returncode == 0
    links = parse_nvlink_status(smi("nvidia-smi", "nvlink", "-s").stdout)
    assert [entry["links"][5] for entry in links[:2]] == ["26.562 GB/s", "<inactive>"]
    assert smi("inject", "nvlink-down=18").returncode == 2  # links 0..17
    # GPU 3 missing: 7 GPUs, numbered 0..6, its bus id gone
    assert smi("inject", "gpu-missing", "gpu=3").returncode == 0
    report = parse_output(smi("nvidia-smi", "-q", "-x").stdout)
    assert len(report.gpus) == 7 and "00000000:5D:00.0" not in {g.pci_bus_id for g in report.gpus}
    assert smi("nvidia-smi", "-L").stdout.splitlines()[-1].startswith("GPU 6: NVIDIA H100")
    smi("clear")
    clean = smi("nvidia-smi", "-q", "-x").stdout
    assert len(parse_output(clean).gpus) == 8 and "In Progress" not in clean
    assert "<clocks_event_reason_hw_slowdown>Active<" not in clean
    # knobs that do not fit the model are refused
    smi2 = host("t4", 1)
    assert smi2("inject", "fabric=failure").returncode == 2  # no NVSwitch fabric
    assert smi2("inject", "nvlink-down").returncode == 2  # no NVLink
    assert smi2("inject", "clock-event=melting").returncode == 2
    assert "<clocks_event_reasons>" in smi2("nvidia-smi", "-q", "-x").stdout  # 535 names them so
    assert "<state>N/A</state>" in smi2("nvidia-smi", "-q", "-x").stdout
    assert emulator.inject_command("clock-event=hw-thermal", 0).endswith(
        "inject clock-event=hw-thermal gpu=0"
    )
    assert "xid=154" in emulator.inject_command("xid=154")


def test_under_load_the_telemetry_follows_the_captured_series(host, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A fresh load file (the GEMM stand-in's) makes GPU 1 busy: power, temperature and SM clock
    are the rows of the captured dmon under gpu-burn, one per second, the last one held; HW
    slowdown halves the clock; a stale load file is idle again."""
    smi = host("h100-sxm", 2)
    rows = MODELS["h100-sxm"]["load_series"]["rows"]
    query = (
        "--query-gpu=index,temperature.gpu,power.draw,clocks.sm,utilization.gpu,"
        "clocks_event_reasons.hw_thermal_slowdown",
        "--format=csv,noheader,nounits",
    )
    assert smi("nvidia-smi", *query).stdout.splitlines()[1] == "1, 30, 69.61, 345, 0, Not Active"
    load = tmp_path / "run/gpuhost-lab-gpu/load"
    load.mkdir(parents=True)
    (load / "1").write_text(f"{time.time() - 30}\n")  # busy for 30 s: the last row, held
    power, temp, clock = rows[-1]
    busy = f"1, {temp}, {power:.2f}, {clock}, 100, Not Active"
    assert smi("nvidia-smi", *query).stdout.splitlines()[1] == busy
    assert smi("inject", "clock-event=hw-thermal", "gpu=1").returncode == 0
    hot = smi("nvidia-smi", *query).stdout.splitlines()[1]
    assert hot == f"1, {temp}, {power:.2f}, {clock // 2}, 100, Active"
    os.utime(load / "1", (time.time() - 10, time.time() - 10))  # no longer touched: idle
    assert smi("nvidia-smi", *query).stdout.splitlines()[1].startswith("1, 30, 69.61, 345, 0")
