"""The lab's hosts are real booted Debian servers, isolated, each with its own identity."""

from __future__ import annotations

import subprocess

import pytest

pytestmark = pytest.mark.lab


@pytest.mark.parametrize("lab_hosts", [2], indirect=True)
def test_hosts_boot_systemd_and_answer_ssh_with_their_own_identity(lab_hosts) -> None:
    seen_ids = set()
    for host in lab_hosts:
        proc = host.run("cat /proc/1/comm; hostname; cat /etc/machine-id; "
                        "systemctl is-system-running")
        assert proc.returncode == 0, proc.stderr
        comm, hostname, machine_id, state = proc.stdout.split()
        assert comm == "systemd"
        assert hostname == host.name
        assert state == "running"
        seen_ids.add(machine_id)
    assert len(seen_ids) == len(lab_hosts)


@pytest.mark.parametrize("lab_hosts", [2], indirect=True)
def test_host_keys_are_distinct_and_strictly_checked(lab, lab_hosts) -> None:
    known = lab(2).known_hosts_path.read_text().splitlines()
    keys = {line.split(maxsplit=1)[1] for line in known}
    assert len(keys) == len(known) >= 2
    # a wrong known_hosts entry must make ssh refuse: strict checking stays on
    h1, h2 = lab_hosts[0], lab_hosts[1]
    bogus = lab(2).known_hosts_path.with_name("known_hosts.bogus")
    bogus.write_text(f"{h1.name},{h1.address} {known[1].split(maxsplit=1)[1]}\n")
    proc = subprocess.run(
        [*h1.ssh_args[:-1], "-o", f"UserKnownHostsFile={bogus}", "-o", "ControlPath=none",
         h1.name, "true"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 255
    assert "host key" in proc.stderr.lower() or "HOST IDENTIFICATION" in proc.stderr
    assert h2.run("true").returncode == 0


def test_hosts_cannot_reach_anything_outside_their_lab(lab_hosts) -> None:
    host = lab_hosts[0]
    routes = host.run("ip -4 route").stdout.strip().splitlines()
    assert routes and all("default" not in r for r in routes)
    assert all(r.split()[0].endswith("/24") for r in routes), routes
    # no route out, asked of the kernel without sending a packet (never traffic outside the lab)
    assert host.run("ip -4 route get 192.0.2.1").returncode != 0


def test_testinfra_sees_real_systemd_units(lab_hosts) -> None:
    ti = lab_hosts[0].testinfra()
    assert ti.service("ssh").is_running
    assert ti.service("ssh").is_enabled
    assert not ti.service("apt-daily.timer").is_running
    assert ti.system_info.codename == "bookworm"
    assert ti.run("systemctl is-active nonexistent-unit.service").rc != 0


def test_a_disconnected_host_is_unreachable_until_reconnected(fresh_host) -> None:
    fresh_host.disconnect()
    try:
        proc = fresh_host.run("true", timeout=30)
        assert proc.returncode == 255
        # the host itself still runs: only its network is cut
        assert fresh_host.exec("systemctl is-system-running").stdout.strip() == "running"
    finally:
        fresh_host.reconnect()
    assert fresh_host.run("true").returncode == 0


def test_stopping_sshd_refuses_connections(fresh_host) -> None:
    fresh_host.stop_sshd()
    proc = fresh_host.run("true", timeout=30)
    assert proc.returncode == 255
    assert "refused" in proc.stderr.lower()
