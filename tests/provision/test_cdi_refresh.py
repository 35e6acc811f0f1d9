"""CDI specs kept true by provision and upgrade: real generated specs (tests/fixtures/cdi), the
operation's commands, the command itself run here with a stand-in nvidia-ctk, and the upgrade's
pass after the restart."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from harden.fakehost import FakeHost, command_to_json
from pyinfra.context import ctx_host

from gpuhost.inventory.loader import InventoryHost
from gpuhost.matrix.profiles import load_profiles
from gpuhost.operations import cdi as ops
from gpuhost.parsers.cdi import CDI_SECTION, NVIDIA_SPEC, CdiSpec, parse_cdi_specs
from gpuhost.upgrade.hoststeps import HostSteps, StepSettings
from gpuhost.upgrade.validate import Expectation
from tests.upgrade.fakes import ScriptedRemote, fail, ok

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cdi"
OLD = (FIXTURES / "nvidia-460.91.03-dgx-a100.yaml").read_text(encoding="utf-8")
DRIVER = "535.309.01"


def _listing(*specs: tuple[str, str]) -> str:
    return "".join(f"{CDI_SECTION}{path}\n{text}\n" for path, text in specs)


def _specs(*specs: tuple[str, str]) -> list[CdiSpec]:
    return parse_cdi_specs(_listing(*specs))


def test_targets_are_the_stale_specs_and_the_wanted_one() -> None:
    stale = _specs(("/etc/cdi/nvidia.yaml", OLD))
    assert ops.targets(stale, DRIVER, wanted=False) == ["/etc/cdi/nvidia.yaml"]
    fresh = _specs(("/etc/cdi/nvidia.yaml", OLD.replace("460.91.03", DRIVER)))
    assert ops.targets(fresh, DRIVER, wanted=True) == []
    assert ops.targets([], DRIVER, wanted=False) == []  # nothing asked, nothing there
    assert ops.targets([], DRIVER, wanted=True) == [NVIDIA_SPEC]
    run_only = _specs(("/var/run/cdi/nvidia.yaml", OLD))  # nvidia-cdi-refresh's place
    assert ops.targets(run_only, DRIVER, wanted=True) == [NVIDIA_SPEC, "/var/run/cdi/nvidia.yaml"]
    broken = _specs(("/etc/cdi/other.yaml", "[1"))
    assert ops.targets(broken, DRIVER, wanted=False) == []


def _run(specs: list[CdiSpec], wanted: bool) -> tuple[list, list[str]]:
    fake = FakeHost({"signing.CdiSpecs": specs})
    fake.state = SimpleNamespace(is_executing=False, current_stage=None)  # type: ignore[attr-defined]
    with ctx_host.use(fake):
        commands = [
            command_to_json(c)
            for c in ops.spec_current._inner(driver_version=DRIVER, wanted=wanted)  # type: ignore[attr-defined]
        ]
    return commands, fake.noops


def test_the_operation_regenerates_only_what_is_stale() -> None:
    commands, _ = _run(_specs(("/etc/cdi/nvidia.yaml", OLD)), wanted=False)
    assert commands == [ops.generate_command("/etc/cdi/nvidia.yaml", DRIVER)]
    assert commands[0].endswith("nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml")
    current = _specs(("/etc/cdi/nvidia.yaml", OLD.replace("460.91.03", DRIVER)))
    commands, noops = _run(current, wanted=True)
    assert commands == [] and noops == [
        f"CDI specs name driver {DRIVER} (or there are none to keep)"
    ]


def _stub(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{script}\n", encoding="utf-8")
    path.chmod(0o755)


@pytest.mark.skipif(
    Path("/proc/driver/nvidia/version").exists(), reason="this machine has an NVIDIA driver loaded"
)
def test_the_command_on_a_host_with_and_without_the_generator(tmp_path: Path) -> None:
    out = tmp_path / "nvidia.yaml"
    tools = tmp_path / "bin"
    tools.mkdir()
    no_ctk = {**os.environ, "PATH": f"{tools}:/usr/bin:/bin"}
    command = ops.generate_command(str(out), DRIVER)
    missing = subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=no_ctk)
    assert missing.returncode == 1
    assert missing.stderr.strip() == ops.NO_GENERATOR.format(path=out)
    _stub(tools, "nvidia-ctk", 'echo "$@" > "${3#--output=}"')
    made = subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=no_ctk)
    assert made.returncode == 0, made.stderr
    assert out.read_text(encoding="utf-8").strip() == f"cdi generate --output={out}"


def test_upgrade_regenerates_after_the_restart(tmp_path: Path) -> None:
    name = next(iter(sorted(load_profiles())))
    hosts = {"h1": InventoryHost("h1", {"gpuhost_profile": name}, ())}
    steps = HostSteps(hosts, StepSettings(target=name, snapshots=tmp_path / "snapshots"))
    listing = _listing(("/etc/cdi/nvidia.yaml", OLD))
    remote = ScriptedRemote("h1").on(CDI_SECTION, ok(listing)).on("cdi generate", ok())
    steps._remotes["h1"] = remote  # type: ignore[assignment]
    expect = Expectation("p", driver_version=DRIVER, marker={"cdi": False})
    assert steps.refresh_cdi("h1", expect) == ["/etc/cdi/nvidia.yaml"]
    assert remote.commands[-1] == ops.generate_command("/etc/cdi/nvidia.yaml", DRIVER)
    broken = ScriptedRemote("h1").on(CDI_SECTION, ok(listing))
    broken.on("cdi generate", fail(ops.NO_GENERATOR.format(path="/etc/cdi/nvidia.yaml")))
    steps._remotes["h1"] = broken  # type: ignore[assignment]
    with pytest.raises(Exception, match="regenerating the CDI spec /etc/cdi/nvidia.yaml failed"):
        steps.refresh_cdi("h1", expect)


@pytest.mark.parametrize(("loaded", "matches"), [(DRIVER, True), ("535.261.03", False)])
def test_the_loaded_module_test_reads_proc_driver_version(loaded: str, matches: bool) -> None:
    """The command's test of /proc/driver/nvidia/version (its real format, as in
    tests/fixtures/captures/proc-driver-version) for the target driver."""
    proc = (
        f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {loaded}  Thu Jan  1 00:00:00 UTC 2026\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
    )
    command = ops.generate_command("/etc/cdi/nvidia.yaml", DRIVER)
    pattern = command.split("grep -q ", 1)[1].split(" /proc/", 1)[0]
    found = subprocess.run(["sh", "-c", f"grep -q {pattern}"], input=proc, text=True)
    assert (found.returncode == 0) is matches
