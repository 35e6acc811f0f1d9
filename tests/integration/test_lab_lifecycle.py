"""Lab lifecycle: down leaves nothing behind, up recovers from a crash, labs run side by side,
a host that cannot boot is reported with its console and journal.

These tests use their own short-lived labs (not the session lab) and look at the machine directly
(/proc, /run/netns, /sys) instead of trusting the lab's own bookkeeping.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from lab import core, registry
from lab.config import LabNames
from lab.core import LabManager
from lab.system import LabError, cgroup_roots

pytestmark = pytest.mark.lab


def _traces(names: LabNames) -> list[str]:
    """Everything on this machine that carries the lab's names, found without the lab's code."""
    found = []
    sd = str(names.state_dir)
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        if sd in line.split()[4]:
            found.append("mount " + line.split()[4])
    if Path("/run/netns").is_dir():
        found += [f"netns {n}" for n in os.listdir("/run/netns")
                  if n.startswith(names.netns_prefix)]
    found += ["link " + n for n in os.listdir("/sys/class/net") if names.tag in n]
    for root in cgroup_roots():
        if (root / names.cgroup).exists():
            found.append(f"cgroup {root / names.cgroup}")
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if sd in cmd or f"gl-{names.name}-h" in cmd:
                found.append(f"process {proc.name}: {cmd[:80]}")
    return found


@pytest.fixture
def scratch_lab(request):
    name = f"t{os.getpid() % 100000}-{request.node.name[5:15].strip('_').replace('_', '-')}"
    mgr = LabManager(name)
    yield mgr
    assert mgr.down() == []
    mgr.names.lock_path.unlink(missing_ok=True)  # a name of this test only: nobody waits on it


def test_down_leaves_nothing_and_is_safe_to_repeat(scratch_lab) -> None:
    state = scratch_lab.up(2)
    names = scratch_lab.names
    before = _traces(names)
    kinds = {t.split()[0] for t in before}
    assert {"mount", "netns", "link", "cgroup", "process"} <= kinds, before
    assert scratch_lab.ssh(state["hosts"][1], "true").returncode == 0  # leaves an ssh master
    assert scratch_lab.down() == []
    assert _traces(names) == []
    assert not names.state_dir.exists()
    assert registry.lookup(scratch_lab.name) is None
    assert scratch_lab.down() == []  # again: nothing to do, no error


def test_up_after_a_crash_cleans_leftovers_first(scratch_lab) -> None:
    state = scratch_lab.up(1)
    old_nspawn = int((scratch_lab.names.host_dir(1) / "nspawn.pid").read_text())
    # the host's overlay upper is on the state directory's disk, not in RAM (a CUDA host writes
    # gigabytes), unless that file system cannot hold one
    upper = scratch_lab.names.host_dir(1) / "upper"
    expected = "disk" if core.fs_type(scratch_lab.sd) in core.OVERLAY_UPPER_FS else "tmpfs"
    assert state["hosts_storage"] == expected
    if expected == "disk":
        assert core.fs_type(upper) == core.fs_type(scratch_lab.sd) != "tmpfs"
    assert scratch_lab.ssh(state["hosts"][0], "echo before > /root/crash-marker").returncode == 0
    assert (upper / "root/crash-marker").read_text() == "before\n"
    # crash: the proxy dies and the state file is lost; hosts, mounts, netns stay behind
    os.kill(state["proxy_pid"], signal.SIGKILL)
    (scratch_lab.sd / "lab.json").unlink()
    state = scratch_lab.up(1)
    assert not Path(f"/proc/{old_nspawn}").exists()
    assert scratch_lab.ssh(state["hosts"][0], "systemctl is-system-running").stdout.strip() \
        == "running"
    netns = [n for n in os.listdir("/run/netns") if n.startswith(scratch_lab.names.netns_prefix)]
    assert netns == [state["hosts"][0]["netns"]]
    # the crashed host's disk is gone with it: the new host starts from the base image
    assert not (upper / "root/crash-marker").exists()


def test_two_labs_run_side_by_side_on_their_own_subnets() -> None:
    prefix = f"t{os.getpid() % 100000}-side"
    a, b = LabManager(f"{prefix}-a"), LabManager(f"{prefix}-b")
    try:
        sa, sb = a.up(1), b.up(1)
        assert sa["subnet_index"] != sb["subnet_index"]
        ha, hb = sa["hosts"][0], sb["hosts"][0]
        assert a.ssh(ha, "hostname").stdout.strip() == b.ssh(hb, "hostname").stdout.strip() == "h1"
        # a host sees only its own lab
        assert a.ssh(ha, f"ping -c1 -W1 {sb['gateway']}").returncode != 0
        assert a.ssh(ha, f"ping -c1 -W1 {sa['gateway']}").returncode == 0
        assert a.down() == []
        # the shared blackhole route stays while a lab is up
        out = core.run(["ip", "-j", "route", "show", "exact", "10.123.0.0/16"]).stdout
        routes = json.loads(out)
        assert any(r.get("type") == "blackhole" for r in routes)
        assert b.ssh(hb, "true").returncode == 0
    finally:
        for mgr in (a, b):
            mgr.down()
            mgr.names.lock_path.unlink(missing_ok=True)


def test_a_host_that_cannot_boot_is_reported_with_its_console(scratch_lab, monkeypatch) -> None:
    original = LabManager._write_host_files

    def break_h2(self, state, h, root):
        original(self, state, h, root)
        if h["name"] == "h2":  # no init system: nspawn cannot boot this host
            for rel in ("usr/lib/systemd/systemd", "usr/sbin/init"):
                (root / rel).unlink()

    monkeypatch.setattr(LabManager, "_write_host_files", break_h2)
    with pytest.raises(LabError) as err:
        scratch_lab.up(2)
    message = str(err.value)
    assert "host h2" in message and "failed to boot" in message
    assert "--- console" in message and "--- journal tail ---" in message
    assert "host h1" not in message


def test_a_name_held_by_another_checkout_is_refused_not_torn_down(
    scratch_lab, monkeypatch, tmp_path
) -> None:
    state = scratch_lab.up(1)
    monkeypatch.setenv("GPUHOST_LAB_STATE", str(tmp_path / "other-checkout" / ".lab"))
    intruder = LabManager(scratch_lab.name)
    assert intruder.sd != scratch_lab.sd
    with pytest.raises(LabError, match="belongs to"):
        intruder.down()
    with pytest.raises(LabError, match="belongs to|in use"):
        intruder.up(1)
    monkeypatch.delenv("GPUHOST_LAB_STATE")
    assert scratch_lab.ssh(state["hosts"][0], "true").returncode == 0
