"""``gpuhost upgrade`` end to end on GPU-shaped lab hosts with Debian's real NVIDIA packages.

Four lab hosts with emulated GPUs (tests/lab/gpu: h1, h3 a T4, h2, h4 an L4) are provisioned once
at ``debian12-nonfree-535`` (driver 535.261.03 from bookworm, pinned and held; ~70 s per host, all
in parallel), rebooted so the module loads, and shared by every test of this module. Each
upgrade run below that a later test builds on is a module fixture (``fleet``, ``failure_run``,
``rolling_run``), so each test also passes alone (the Slurm test asks for the rolling upgrade).
Target: ``debian12-nonfree-535-security`` (535.309.01 from bookworm-security). Drain is ``none``
(no scheduler) but in the Slurm test.

1. One run over h1..h3 with a failure injected on each (in parallel, ``--batch 3``):
   h1 a site validation hook rejects 535.309.01; h2 DKMS fails for 535.309.01 so the install
   stops midway (packages unpacked, nvidia-kernel-dkms half-configured); h3 has lost bookworm
   from its sources (only bookworm-security remains, 535.261.03 cannot be downloaded) and its
   validation fails. Every host must come back to 535.261.03, held, with its pin file and marker
   as before, left drained (no undrain).
2. h4 alone: SIGINT to the controller's whole process group (a terminal's Ctrl-C) while apt
   installs 535.309.01 on the host; the install is journaled interrupted (nothing rolled back),
   ``--resume`` redoes it and finishes; ``gpuhost rollback --yes`` puts h4 back at 535.261.03.
3. A 4-host rolling upgrade (canary h1, then batches of 2, ``--checks static``) whose controller
   is SIGKILLed during the install of the first batch; ``--resume`` (with h4's GPU armed to be
   lost at its next boot) finishes it without touching h1 again: h1..h3 pass validation on the
   new set, run 535.309.01 with its module loaded, their snapshots hold the old set, and
   ``gpuhost audit`` finds no error; h4's GPU is lost at the upgrade's reboot, its validation
   fails (audit gpu.lost and the checks), it is rolled back and audits clean on the old set but
   for the old driver's security bulletins.
4. Slurm (h5 the controller): drain waits for jobs, resume after validation, drained on rollback.
5. ``provision --reboot`` on h4 reboots because its loaded module is older than the installed
   driver (the emulator's driver-mismatch knob), and the installed driver's module loads.

Audit findings accepted in the lab (``--accept-audit``), with their reason:
  profile.cuda       the CUDA toolkit is left out (gpuhost_install_cuda = False: 1.6 GB download)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuhost.upgrade.journal import Journal, read_records

pytestmark = [pytest.mark.lab, pytest.mark.slow]

BASE, TARGET = "debian12-nonfree-535", "debian12-nonfree-535-security"
OLD, NEW = "535.261.03", "535.309.01"
LAB_ACCEPTED = ("profile.cuda",)
# h1..h4: emulated GPUs of two architectures (tests/lab/gpu), Debian's real driver packages
# (no h100-sxm: its NVSwitches need a fabric manager Debian does not package)
SHAPES = {1: ("t4", 1), 2: ("l4", 1), 3: ("t4", 1), 4: ("l4", 1)}
ACCEPT = [arg for rule in LAB_ACCEPTED for arg in ("--accept-audit", rule)]
GPUHOST = str(Path(sys.executable).with_name("gpuhost"))
OLD_PROFILES = str(Path(__file__).resolve().parents[1] / "data" / "old_profiles.yaml")
DRIVER_PACKAGES = ("nvidia-smi", "libnvidia-ml1", "nvidia-driver", "nvidia-kernel-dkms", "libcuda1")
WATCHED_FILES = ("/etc/apt/preferences.d/gpuhost-nvidia", "/etc/gpuhost/profile",
                 "/etc/apt/sources.list.d/debian.sources")

SITE_HOOK = """#!/bin/sh
# site check: our jobs break with 535.309.01
v=$(dpkg-query -W -f='${Version}' nvidia-smi)
case "$v" in 535.309.01*) %s echo "jobs fail with nvidia-smi $v"; exit 1;; esac
exit 0
"""
FAILING_DKMS = """#!/bin/sh
# injected: the DKMS module of 535.309.01 does not build
if [ "$1" = add ] && echo "$*" | grep -q 535.309.01; then
    echo "dkms: injected build failure for 535.309.01" >&2; exit 1
fi
exec /usr/sbin/dkms.gpuhost-test "$@"
"""


def _inventory(path: Path, lab: Any, hosts: list[Any], profile: str) -> Path:
    data = {
        "ssh_user": "root",
        "ssh_key": str(lab.key_path),
        "ssh_known_hosts_file": str(lab.known_hosts_path),
        "ssh_strict_host_key_checking": "yes",
        "gpuhost_profile": profile,
        "gpuhost_install_cuda": False,  # nvidia-cuda-toolkit: 1.6 GB download
        "gpuhost_harden": False,  # lab hosts have no CAP_NET_ADMIN for nftables
        # BASE (535.261.03) left the built-in profiles (NVIDIA security bulletins): test data now
        "gpuhost_profiles_file": OLD_PROFILES,
    }
    entries = [(h.name, {"ssh_hostname": h.address, **data}) for h in hosts]
    path.write_text(f"gpu_nodes = {entries!r}\n")
    return path


def _gpuhost(*args: str, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GPUHOST, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def _packages(host: Any) -> dict[str, str]:
    """{name: "VERSION STATUS"} of the installed driver packages."""
    out = host.run("dpkg-query -W -f='${Package}|${Version}|${db:Status-Abbrev}\\n' "
                   + " ".join(DRIVER_PACKAGES)).stdout
    rows = [line.split("|") for line in out.splitlines() if line.count("|") == 2]
    return {n: f"{v} {s.strip()}" for n, v, s in rows if v}


def _host_state(host: Any) -> dict[str, Any]:
    files = host.run("sha256sum " + " ".join(WATCHED_FILES) + " 2>&1").stdout
    return {
        "packages": _packages(host),
        "holds": sorted(host.run("apt-mark showhold").stdout.split()),
        "files": files,
        "dpkg_audit": host.run("dpkg --audit").stdout.strip(),
    }


def _at(state: dict[str, Any], version: str) -> bool:
    return bool(state["packages"]) and all(
        v.startswith(version) and v.endswith(" hi") for v in state["packages"].values()
    )


def _loaded(host: Any) -> str:
    """The driver version of the loaded module, as nvidia-smi reports it ('' if none)."""
    proc = host.run("nvidia-smi --query-gpu=driver_version --format=csv,noheader")
    return proc.stdout.strip().splitlines()[0] if proc.returncode == 0 and proc.stdout else ""


def _journal(state_dir: Path) -> Path:
    runs = sorted((state_dir / "runs").glob("*.jsonl"))
    assert len(runs) == 1, runs
    return runs[0]


@pytest.fixture(scope="module")
def fleet(lab: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Four GPU-shaped lab hosts re-created from the base image and provisioned at BASE in
    parallel, rebooted so that the driver's module is loaded."""
    view = lab(4)
    for index, host in enumerate(view.hosts, 1):  # re-created: other tests may have changed them
        host.record = view.manager.set_shape(index, SHAPES[index], None)
        # one host after the other fills the lab's apt proxy: four identical index requests at
        # once can leave one apt-get update hanging on a truncated answer
        update = host.run("apt-get update -qq", timeout=300)
        assert update.returncode == 0, (host.name, update.stderr)
    tmp = tmp_path_factory.mktemp("upgrade")
    inventory = _inventory(tmp / "all.py", view, view.hosts, BASE)
    # --reboot: the module of the installed driver loads at boot, as on a GPU server; the run
    # after it starts the persistence daemon, which cannot start before a GPU is there
    for extra in (["--reboot"], []):
        proc = _gpuhost("provision", str(inventory), *extra)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for host in view.hosts:
        state = _host_state(host)
        assert _at(state, OLD), (host.name, state)
        assert _loaded(host) == OLD, host.name
    try:
        yield {"lab": view, "hosts": view.hosts, "tmp": tmp}
    finally:
        for index in SHAPES:  # the plain lab hosts other modules expect
            view.manager.set_shape(index, None, None)


@pytest.fixture(scope="module")
def failure_run(fleet: dict[str, Any]) -> dict[str, Any]:
    """One upgrade of h1..h3, a different failure injected on each; returns what the tests
    check, then removes the injections again (hosts stay at 535.261.03)."""
    h1, h2, h3 = fleet["hosts"][:3]
    tmp: Path = fleet["tmp"]
    before = {h.name: _host_state(h) for h in (h1, h2, h3)}
    hook = ("mkdir -p /etc/gpuhost/validate.d && cat > /etc/gpuhost/validate.d/50-site-check "
            "<<'EOF'\n{}EOF\nchmod 755 /etc/gpuhost/validate.d/50-site-check")
    assert h1.run(hook.format(SITE_HOOK % "")).returncode == 0
    assert h2.run(
        "dpkg-divert --local --rename --divert /usr/sbin/dkms.gpuhost-test --add /usr/sbin/dkms "
        f"&& cat > /usr/sbin/dkms <<'EOF'\n{FAILING_DKMS}EOF\nchmod 755 /usr/sbin/dkms"
    ).returncode == 0
    sources = h3.run("cat /etc/apt/sources.list.d/debian.sources").stdout
    assert "Suites: bookworm bookworm-updates" in sources
    cut = h3.run("sed -i 's/^Suites: bookworm bookworm-updates$/Suites: bookworm-updates/' "
                 "/etc/apt/sources.list.d/debian.sources && apt-get update -qq", timeout=300)
    assert cut.returncode == 0, cut.stderr
    gone = h3.run(f"cd /tmp && apt-get download nvidia-smi={OLD}-1")
    assert gone.returncode != 0, "the repository must no longer offer the old version"
    # the validation hook also empties apt's own archive cache: only gpuhost's cache is left
    assert h3.run(hook.format(SITE_HOOK % "apt-get clean;")).returncode == 0

    state_dir = tmp / "state-failures"
    inventory = _inventory(tmp / "failures.py", fleet["lab"], [h1, h2, h3], BASE)
    proc = _gpuhost("upgrade", str(inventory), "--to", TARGET, "--canary", "0", "--batch", "3",
                    "--max-failures", "3", "--state-dir", str(state_dir), *ACCEPT)
    progress = Journal.open(_journal(state_dir)).progress()
    after = {h.name: _host_state(h) for h in (h1, h2, h3)}
    h3_extra = {
        "download": h3.run(f"cd /tmp && apt-get download nvidia-smi={OLD}-1").returncode,
        "history": h3.run("tail -n 40 /var/log/apt/history.log").stdout,
    }
    # remove the injections; the hosts stay at 535.261.03 for the next test
    h1.run("rm -f /etc/gpuhost/validate.d/50-site-check")
    h2.run("rm -f /usr/sbin/dkms && dpkg-divert --local --rename --remove /usr/sbin/dkms")
    h3.run("rm -f /etc/gpuhost/validate.d/50-site-check && sed -i "
           "'s/^Suites: bookworm-updates$/Suites: bookworm bookworm-updates/' "
           "/etc/apt/sources.list.d/debian.sources && apt-get update -qq", timeout=300)
    return {"proc": proc, "progress": progress, "before": before, "after": after,
            "h3": h3_extra}


def _assert_rolled_back(run: dict[str, Any], host: str, step: str, why: str) -> None:
    proc, progress = run["proc"], run["progress"]
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    p = progress[host]
    assert p.outcome == "rolled_back", (p.outcome, p.failure, proc.stdout[-3000:])
    assert p.failed == step, (p.failed, p.failure)
    assert why in p.failure, p.failure
    assert "undrain" not in p.done  # left drained for a human
    assert [s for s in ("rollback", "rollback_restart", "rollback_validate") if s in p.done] == [
        "rollback", "rollback_restart", "rollback_validate"]
    before, after = run["before"][host], run["after"][host]
    assert _at(after, OLD), after
    assert after["packages"] == before["packages"]
    assert after["holds"] == before["holds"]
    assert after["dpkg_audit"] == ""


def test_failed_validation_rolls_back_with_holds_and_configs(failure_run) -> None:
    _assert_rolled_back(failure_run, "h1", "validate",
                        "validation hook 50-site-check: jobs fail with nvidia-smi 535.309.01")
    assert failure_run["after"]["h1"]["files"] == failure_run["before"]["h1"]["files"]


def test_install_failing_midway_rolls_back(failure_run) -> None:
    _assert_rolled_back(failure_run, "h2", "install", "deploy failed")
    assert failure_run["after"]["h2"]["files"] == failure_run["before"]["h2"]["files"]


def test_rollback_installs_from_the_cache_when_the_repository_lost_the_old_version(
    failure_run,
) -> None:
    _assert_rolled_back(failure_run, "h3", "validate", "validation hook 50-site-check")
    assert failure_run["h3"]["download"] != 0  # no repository offers 535.261.03 any more
    assert "/var/cache/gpuhost/packages/" in failure_run["h3"]["history"]


def test_ctrl_c_during_install_is_resumed_not_rolled_back(fleet: dict[str, Any]) -> None:
    h4, tmp = fleet["hosts"][3], fleet["tmp"]
    before = _host_state(h4)
    assert _at(before, OLD), before
    state_dir = tmp / "state-ctrl-c"
    inventory = _inventory(tmp / "ctrl-c.py", fleet["lab"], [h4], BASE)
    args = ["upgrade", str(inventory), "--to", TARGET, "--canary", "0",
            "--state-dir", str(state_dir), *ACCEPT]
    log_path = tmp / "ctrl-c-first.log"
    with log_path.open("w") as log:
        # its own process group, as a shell gives a foreground job: the SIGINT goes to all of it
        controller = subprocess.Popen([GPUHOST, *args], stdout=log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 600
            apt_running = False
            while time.monotonic() < deadline and controller.poll() is None and not apt_running:
                runs = list((state_dir / "runs").glob("*.jsonl"))
                if runs and any(r.get("step") == "install" and r.get("status") == "started"
                                for r in read_records(runs[0])):
                    apt_running = h4.run("pgrep -x 'apt-get|dpkg'").returncode == 0
                time.sleep(0.5)
            assert apt_running, log_path.read_text()[-3000:]
            os.killpg(controller.pid, signal.SIGINT)
            sent = time.monotonic()
            code = controller.wait(timeout=60)
            took = time.monotonic() - sent
        finally:
            if controller.poll() is None:
                os.killpg(controller.pid, signal.SIGKILL)
                controller.wait()
    output = log_path.read_text()
    assert code == 130, output[-3000:]
    assert took < 15, (took, output[-2000:])  # no long silence after Ctrl-C
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output[-3000:]
    assert "gpuhost: upgrade stopped by SIGINT; journal " in output
    journal = _journal(state_dir)
    records = read_records(journal)
    installs = [r["status"] for r in records if r.get("step") == "install"]
    assert installs == ["started", "interrupted"], installs
    assert not any(r.get("kind") == "outcome" for r in records)
    progress = Journal.open(journal).progress()["h4"]
    assert progress.current == "install" and progress.failed is None
    seen = len(records)

    proc = _gpuhost(*args, "--resume")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    later = read_records(journal)[seen:]
    assert (later[0]["step"], later[0]["status"], later[0]["detail"]) == (
        "install", "started", "resumed")
    steps = [r["step"] for r in read_records(journal) if r.get("kind") == "step"]
    assert not {"rollback", "rollback_restart", "rollback_validate", "abort"} & set(steps)
    assert Journal.open(journal).progress()["h4"].outcome == "upgraded"
    after = _host_state(h4)
    assert _at(after, NEW) and after["dpkg_audit"] == "", after

    # back to BASE for the rolling upgrade below: the brake needs --yes without a terminal
    refused = _gpuhost("rollback", str(inventory), "--state-dir", str(state_dir))
    assert refused.returncode == 2 and "confirm with --yes" in refused.stderr, refused.stderr
    back = _gpuhost("rollback", str(inventory), "--state-dir", str(state_dir), "--yes")
    assert back.returncode == 0, back.stdout[-3000:] + back.stderr[-2000:]
    restored = _host_state(h4)
    assert restored["packages"] == before["packages"] and restored["holds"] == before["holds"]

    # two more snapshots (their caches are hard links to apt's archive, seconds each), then the
    # on-host caches of all but the newest are pruned; the controller's documents stay
    for _ in range(2):
        time.sleep(1.1)  # snapshot ids are UTC seconds
        taken = _gpuhost("snapshot", "take", str(inventory), "--state-dir", str(state_dir))
        assert taken.returncode == 0, taken.stdout + taken.stderr
    ids = sorted(p.stem for p in (state_dir / "snapshots" / "h4").glob("*.json"))
    assert len(ids) == 3
    cache = "ls /var/cache/gpuhost/packages"
    assert set(ids) <= set(h4.run(cache).stdout.split())
    pruned = _gpuhost("snapshot", "prune", str(inventory), "--keep", "1",
                      "--state-dir", str(state_dir))
    assert pruned.returncode == 0, pruned.stdout + pruned.stderr
    assert f"h4: removed 2 cache(s) ({ids[0]}, {ids[1]})" in pruned.stdout
    left = set(h4.run(cache).stdout.split())
    assert ids[2] in left and not {ids[0], ids[1]} & left
    assert len(list((state_dir / "snapshots" / "h4").glob("*.json"))) == 3


@pytest.fixture(scope="module")
def rolling_run(fleet: dict[str, Any], failure_run: dict[str, Any]) -> dict[str, Any]:
    """A 4-host rolling upgrade (canary h1, then batches of 2, the static checks at validation)
    whose controller is SIGKILLed during the install of the first batch, then resumed with a
    lost GPU armed on h4 for its next boot: the upgrade's own reboot after h4's install brings
    the fault (on a GPU server: the GPU falls off the bus at boot)."""
    hosts, tmp = fleet["hosts"], fleet["tmp"]
    for host in hosts:
        assert _at(_host_state(host), OLD), host.name
    state_dir = tmp / "state-rolling"
    inventory = _inventory(tmp / "rolling.py", fleet["lab"], hosts, BASE)
    args = ["upgrade", str(inventory), "--to", TARGET, "--canary", "1", "--batch", "2",
            "--checks", "static", "--state-dir", str(state_dir), *ACCEPT]
    log = (tmp / "rolling-first.log").open("w")
    controller = subprocess.Popen([GPUHOST, *args], stdout=log, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 900
    journal = None
    try:
        while time.monotonic() < deadline and controller.poll() is None:
            runs = list((state_dir / "runs").glob("*.jsonl"))
            if runs:
                journal = runs[0]
                records = read_records(journal)
                if any(r.get("host") == "h2" and r.get("step") == "install"
                       and r.get("status") == "started" for r in records):
                    break
            time.sleep(1)
        time.sleep(3)  # apt is working on h2 and h3 now (15 s was long enough to finish it)
        assert controller.poll() is None, (tmp / "rolling-first.log").read_text()[-3000:]
    finally:
        # the controller machine dies: all its processes (none left if it had already exited)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(controller.pid, signal.SIGKILL)
        controller.wait()
        log.close()
    assert journal is not None
    killed = Journal.open(journal).progress()
    seen = len(read_records(journal))
    fleet["lab"].manager.gpu_inject(4, "gpu-lost", 0, at_next_boot=True)
    proc = _gpuhost("upgrade", *args[1:], "--resume")
    return {"proc": proc, "journal": journal, "killed": killed, "seen": seen,
            "final": Journal.open(journal).progress()}


def test_killed_rolling_upgrade_resumes_without_redoing_finished_hosts(
    fleet: dict[str, Any], rolling_run: dict[str, Any]
) -> None:
    hosts, tmp = fleet["hosts"][:3], fleet["tmp"]
    killed, proc = rolling_run["killed"], rolling_run["proc"]
    assert killed["h1"].outcome == "upgraded"
    assert killed["h2"].current == "install" and killed["h2"].outcome is None
    assert not killed["h4"].started
    records = read_records(rolling_run["journal"])
    later = records[rolling_run["seen"]:]
    assert not [r for r in later if r.get("host") == "h1"]  # a finished host is not touched
    resumed = [r for r in later if r.get("host") == "h2" and r.get("status") == "started"]
    assert resumed[0]["step"] == "install" and resumed[0]["detail"] == "resumed"
    snapshotted = {h for h in ("h2", "h3") if "snapshot" in killed[h].done}
    assert "h2" in snapshotted
    # a snapshot is never retaken once taken (packages may have changed since)
    assert not [r for r in later if r.get("step") == "snapshot" and r.get("host") in snapshotted]
    final = rolling_run["final"]
    assert {h.name: final[h.name].outcome for h in hosts} == {
        h.name: "upgraded" for h in hosts}, proc.stdout[-4000:]

    for host in hosts:
        state = _host_state(host)
        assert _at(state, NEW), (host.name, state)  # every driver package new and held
        assert _loaded(host) == NEW, host.name  # the upgrade's reboot loaded the new module
        marker = json.loads(host.run("cat /etc/gpuhost/profile").stdout)
        assert marker["profile"] == TARGET and marker["driver"]["version"] == NEW
        # the snapshot shows the old set
        snap = Path(final[host.name].data["snapshot_path"])
        doc = json.loads(snap.read_text())
        assert doc["packages"]["nvidia-smi"]["version"] == f"{OLD}-1"
        assert "nvidia-smi" in doc["holds"]

    # the audit, with the inventory now naming the new profile, finds no errors beyond the lab's
    new_inventory = _inventory(tmp / "rolling-new.py", fleet["lab"], hosts, TARGET)
    audit = _gpuhost("audit", str(new_inventory), "--json", str(tmp / "audit.json"), "-q")
    report = json.loads((tmp / "audit.json").read_text())
    errors = {(h["name"], f["rule"]) for h in report["hosts"] for f in h["findings"]
              if f["severity"] == "error" and f["rule"] not in LAB_ACCEPTED}
    assert not errors, audit.stdout
    assert all(h["reachable"] for h in report["hosts"])


def test_gpu_lost_at_the_upgrades_reboot_rolls_that_host_back_to_a_clean_old_set(
    fleet: dict[str, Any], rolling_run: dict[str, Any]
) -> None:
    """h4's GPU is lost at the boot after its install: validation fails on it (audit and
    check), h4 is rolled back, rebooted (the fault came for one boot) and validated on the old
    set; the other three passed validation, static checks included, on the new set."""
    h4, tmp, proc = fleet["hosts"][3], fleet["tmp"], rolling_run["proc"]
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-2000:]
    p = rolling_run["final"]["h4"]
    assert p.outcome == "rolled_back", (p.outcome, p.failure, proc.stdout[-3000:])
    assert p.failed == "validate" and "gpu.lost" in p.failure, p.failure
    assert "check test_" in p.failure, p.failure  # the static checks failed there too
    assert [s for s in ("rollback", "rollback_restart", "rollback_validate") if s in p.done] == [
        "rollback", "rollback_restart", "rollback_validate"]
    records = read_records(rolling_run["journal"])
    validated = {r["host"] for r in records if r.get("step") == "validate"
                 and r.get("status") == "done"}
    assert validated == {"h1", "h2", "h3"}, validated
    state = _host_state(h4)
    assert _at(state, OLD) and state["dpkg_audit"] == "", state
    assert _loaded(h4) == OLD  # its GPU is back after the rollback's reboot, on the old module
    assert json.loads(h4.run("cat /etc/gpuhost/profile").stdout)["profile"] == BASE

    old_inventory = _inventory(tmp / "rolled-back.py", fleet["lab"], [h4], BASE)
    audit = _gpuhost("audit", str(old_inventory), "--json", str(tmp / "audit-h4.json"), "-q")
    report = json.loads((tmp / "audit-h4.json").read_text())
    assert report["hosts"][0]["reachable"], audit.stdout
    # the old set's one error is why it is upgraded: NVIDIA's bulletins name 535.261.03
    errors = {f["rule"] for f in report["hosts"][0]["findings"] if f["severity"] == "error"}
    assert errors <= {"security.driver"} | set(LAB_ACCEPTED), report["hosts"][0]["findings"]


SLURM_CONF = """ClusterName=gpuhost-lab
SlurmctldHost={ctld}({ctld_addr})
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmUser=slurm
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmdSpoolDir=/var/lib/slurm/slurmd
StateSaveLocation=/var/lib/slurm/slurmctld
ReturnToService=2
MinJobAge=3600
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
{nodes}
PartitionName=gpu Nodes={names} Default=YES MaxTime=INFINITE State=UP
"""
SLURM_INSTALL = ("export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y "
                 "-qq --no-install-recommends munge slurm-client {daemon} >/tmp/slurm.log 2>&1")


def _slurm_node(ctld: Any, node: str) -> dict[str, str]:
    out = ctld.run(f"scontrol -o show node {node}").stdout.strip()
    return dict(f.split("=", 1) for f in re.split(r" (?=[A-Za-z]+=)", out) if "=" in f)


def _slurm_cluster(ctld: Any, nodes: list[Any]) -> None:
    """Debian's Slurm 22.05: slurmctld on ``ctld``, slurmd on ``nodes``, one munge key."""
    jobs = [(ctld, "slurmctld")] + [(n, "slurmd") for n in nodes]
    # one host at a time, one retry: concurrent apt runs through the lab's apt-cacher-ng have hit
    # its rename race (a truncated index) on this machine
    for host, daemon in jobs:
        for _attempt in range(2):
            proc = host.run(SLURM_INSTALL.format(daemon=daemon), 900)
            if proc.returncode == 0:
                break
        log = host.run("tail -n 20 /tmp/slurm.log").stdout
        assert proc.returncode == 0, (host.name, daemon, log)
    conf = SLURM_CONF.format(
        ctld=ctld.name, ctld_addr=ctld.address, names=",".join(n.name for n in nodes),
        nodes="\n".join(f"NodeName={n.name} NodeAddr={n.address} CPUs=1" for n in nodes))
    key = ctld.run("base64 -w0 /etc/munge/munge.key").stdout.strip()
    for host, daemon in jobs:
        setup = host.run(
            f"echo {key} | base64 -d > /etc/munge/munge.key && chmod 400 /etc/munge/munge.key "
            f"&& chown munge:munge /etc/munge/munge.key && systemctl restart munge "
            f"&& mkdir -p /var/log/slurm && chown slurm /var/log/slurm "
            f"&& cat > /etc/slurm/slurm.conf <<'EOF'\n{conf}EOF\n"
            f"systemctl enable -q {daemon} && systemctl restart {daemon}")
        assert setup.returncode == 0, (host.name, setup.stderr)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        states = {n.name: _slurm_node(ctld, n.name).get("State") for n in nodes}
        if all(s == "IDLE" for s in states.values()):
            return
        time.sleep(2)
    raise AssertionError(f"slurm nodes not idle: {states}")


@pytest.mark.usefixtures("rolling_run")  # h2 and h3 at 535.309.01: the move to BASE below
def test_slurm_drain_waits_for_jobs_resumes_after_validation_and_stays_drained_on_rollback(
    lab: Any, fleet: dict[str, Any], failure_run: dict[str, Any]
) -> None:
    """A real Slurm (Debian's slurmctld on h5, slurmd on h2 and h3, both at 535.309.01 after the
    rolling upgrade) and a move to the BASE profile: h2's running job finishes before anything
    changes, h2 is drained while it changes and resumed once validated; h3 (its validation
    fails) is rolled back and stays drained for a human."""
    h2, h3 = fleet["hosts"][1], fleet["hosts"][2]
    ctld = lab(5).host("h5")
    _slurm_cluster(ctld, [h2, h3])
    hook = ("mkdir -p /etc/gpuhost/validate.d && cat > /etc/gpuhost/validate.d/50-site-check "
            "<<'EOF'\n#!/bin/sh\ndpkg-query -W -f='${Version}' nvidia-smi | grep -q '^535.261' "
            "&& { echo 'jobs fail with 535.261'; exit 1; }; exit 0\nEOF\n"
            "chmod 755 /etc/gpuhost/validate.d/50-site-check")
    assert h3.run(hook).returncode == 0
    job = ctld.run("sbatch --parsable -w h2 -o /dev/null --wrap 'sleep 25'").stdout.strip()
    assert job.isdigit(), job
    time.sleep(3)
    assert _slurm_node(ctld, "h2")["State"] in ("ALLOCATED", "MIXED")

    tmp = fleet["tmp"]
    state_dir = tmp / "state-slurm"
    inventory = _inventory(tmp / "slurm.py", fleet["lab"], [h2, h3], TARGET)
    log = tmp / "slurm-upgrade.log"
    with log.open("w") as out:
        # --force: BASE's driver is named by NVIDIA's security bulletins (refused without it)
        proc = subprocess.Popen(
            [GPUHOST, "upgrade", str(inventory), "--to", BASE, "--drain", "slurm", "--canary",
             "0", "--batch", "2", "--max-failures", "2", "--state-dir", str(state_dir), *ACCEPT,
             "--force"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        seen: dict[str, set[str]] = {"h2": set(), "h3": set()}
        deadline = time.monotonic() + 900  # a hung upgrade fails the test, not the CI run
        while proc.poll() is None and time.monotonic() < deadline:
            for node in seen:  # what Slurm says about the nodes while they are upgraded
                seen[node].add(_slurm_node(ctld, node).get("State", "?"))
            time.sleep(2)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = log.read_text()
    try:
        assert proc.returncode == 1, output[-4000:]
        progress = Journal.open(_journal(state_dir)).progress()
        assert progress["h2"].outcome == "upgraded", output[-4000:]
        assert progress["h3"].outcome == "rolled_back", output[-4000:]
        records = read_records(_journal(state_dir))
        install_h2 = next(r["ts"] for r in records if r.get("host") == "h2"
                          and r.get("step") == "install" and r.get("status") == "started")
        job_info = ctld.run(f"scontrol -o show job {job}").stdout
        assert "JobState=COMPLETED" in job_info, job_info
        end = re.search(r"EndTime=(\S+)", job_info)
        assert end and end.group(1) + "Z" <= install_h2  # the job ended before any change
        assert any("DRAIN" in state for state in seen["h2"]), seen  # drained while changed
        after_h2, after_h3 = _slurm_node(ctld, "h2"), _slurm_node(ctld, "h3")
        assert after_h2["State"] == "IDLE", after_h2
        assert "DRAIN" in after_h3["State"], after_h3
        assert after_h3.get("Reason", "").startswith("gpuhost"), after_h3
        assert _at(_host_state(h2), OLD)
        assert _at(_host_state(h3), NEW)  # rolled back to what it had: 535.309.01
    finally:
        h3.run("rm -f /etc/gpuhost/validate.d/50-site-check")


def test_provision_reboot_reboots_when_the_loaded_module_is_not_the_installed_driver(
    fleet: dict[str, Any],
) -> None:
    """h4's loaded module is made one older than its installed driver (the emulator's
    driver-mismatch knob: the state a package change leaves until the reboot); ``provision
    --reboot`` with the profile h4 is on changes nothing, sees the loaded module differ from the
    installed driver, reboots, waits and finds the installed driver's module loaded."""
    h4 = fleet["hosts"][3]
    installed = _loaded(h4)
    assert installed in (OLD, NEW), installed  # OLD after the rollback above, or as provisioned
    fleet["lab"].manager.gpu_inject(4, "driver-mismatch")
    older = h4.run("cat /proc/driver/nvidia/version").stdout
    major, minor, patch = installed.split(".")
    stale = f"{major}.{int(minor) - 1}.{patch}"
    assert stale in older, older
    before = h4.run("cat /proc/sys/kernel/random/boot_id").stdout.strip()
    profile = json.loads(h4.run("cat /etc/gpuhost/profile").stdout)["profile"]
    inventory = _inventory(fleet["tmp"] / "reboot.py", fleet["lab"], [h4], profile)
    proc = _gpuhost("provision", str(inventory), "--reboot", "--reboot-timeout", "300")
    after = h4.run("cat /proc/sys/kernel/random/boot_id").stdout.strip()
    assert after and after != before, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert (f"h4: rebooted (loaded module {stale} differs from the installed driver "
            f"{installed}); module {installed} loaded") in out, out
    assert _loaded(h4) == installed
