"""``gpuhost harden`` on real lab hosts: the nftables side (table ``inet gpuhost``).

nftables needs CAP_NET_ADMIN inside the host. systemd-nspawn keeps it only for its own private
network options; a host booted with --network-namespace-path (as the lab does) has it dropped from
its bounding set and every nft call fails with "Operation not permitted", so the lab passes
--capability=CAP_NET_ADMIN (scoped to the host's own network namespace). A host without it is a
lab regression: the tests fail and say so.
"""

from __future__ import annotations

import time

import pytest

from gpuhost.operations import firewall
from tests.integration.harden_support import (
    changed_count,
    harden,
    has_cap_net_admin,
    key_login,
    run_python,
    tcp_state,
    write_inventory,
)

pytestmark = [pytest.mark.lab, pytest.mark.slow]
LISTENERS = (
    "systemd-run --quiet --unit=probe-8080 python3 -m http.server 8080 && "
    "systemd-run --quiet --unit=probe-9100 python3 -m http.server 9100 && sleep 1 && "
    "python3 -c 'import urllib.request as u; u.urlopen(\"http://127.0.0.1:8080/\")'"
)


@pytest.fixture
def nft_host(fresh_host, lab, tmp_path):
    assert has_cap_net_admin(fresh_host), (
        "the lab host has no CAP_NET_ADMIN: tests/lab/core.py must boot hosts with "
        "systemd-nspawn --capability=CAP_NET_ADMIN (it drops it with --network-namespace-path)"
    )
    view = lab(lab.count)
    inventory = write_inventory(
        tmp_path,
        view.inventory_path,
        fresh_host.name,
        gpuhost_firewall_allow_tcp=[9100],
        gpuhost_firewall_closed_tcp=[8080],  # the probe listener below is cut on purpose
    )
    return fresh_host, view, inventory


def test_firewall_drops_unlisted_port_keeps_ssh_and_reruns_clean(nft_host):
    host, view, inventory = nft_host
    assert host.run(LISTENERS).returncode == 0  # 8080 really listens: a drop is the firewall
    assert tcp_state(host.address, 8080) == "open"

    rc, line, err = harden(inventory)
    assert rc == 0, f"{line}\n{err[-3000:]}"

    assert tcp_state(host.address, 8080) == "dropped"
    assert tcp_state(host.address, 9100) == "open"
    assert key_login(host.address, view.key_path)
    assert "policy drop" in host.run("nft list table inet gpuhost").stdout
    assert host.run("nft -c -f /etc/nftables.conf").returncode == 0
    assert host.run("systemctl is-enabled nftables.service").stdout.strip() == "enabled"
    assert host.run("systemctl list-timers --all --no-legend 'gpuhost-*'").stdout.strip() == ""

    rc, line, err = harden(inventory)
    assert rc == 0, err[-3000:]
    assert changed_count(line) == 0, line


def _blocking_ruleset() -> str:
    return firewall.render_ruleset([22]).replace("        tcp dport { 22 } accept\n", "")


def test_failed_fresh_connection_puts_previous_table_back(nft_host):
    host, view, inventory = nft_host
    rc, line, err = harden(inventory)
    assert rc == 0, f"{line}\n{err[-3000:]}"
    before = host.exec("nft -s -t list table inet gpuhost").stdout
    proc = run_python(
        "from gpuhost.deploy_runner import run_deploy\n"
        "from gpuhost.operations import firewall\n"
        "def deploy():\n"
        f"    firewall.ruleset(name='blocks new SSH', content={_blocking_ruleset()!r})\n"
        f"print(run_deploy({str(inventory)!r}, deploy)[0].line(False))\n"
    )
    assert "failed: operation failed: blocks new SSH" in proc.stdout, proc.stderr[-3000:]
    assert host.exec("nft -s -t list table inet gpuhost").stdout == before
    assert key_login(host.address, view.key_path)


def test_dead_man_timer_restores_the_table_without_the_controller(nft_host):
    """The controller vanishes after the apply: the host loads the saved table by itself."""
    host, view, inventory = nft_host
    rc, line, err = harden(inventory)
    assert rc == 0, f"{line}\n{err[-3000:]}"
    before = host.exec("nft -s -t list table inet gpuhost").stdout
    host.exec(f"cat > {firewall.CANDIDATE} <<'EOF'\n{_blocking_ruleset()}EOF")

    proc = host.exec(firewall.apply_script(revert_seconds=6))  # applied, never confirmed

    assert proc.returncode == 0, proc.stderr
    assert tcp_state(host.address, 22, timeout=2.0) == "dropped"  # locked out now...
    time.sleep(10)
    assert host.exec("nft -s -t list table inet gpuhost").stdout == before
    assert key_login(host.address, view.key_path)  # ...and back without anyone's help
