"""``gpuhost provision`` composes hardening, on real lab hosts: one run installs the Debian
non-free profile AND hardens SSH and the firewall; a re-run changes nothing; a host whose deploy
user has no authorized key is refused before anything (driver included) is touched."""

from __future__ import annotations

import pytest
from old_profiles import OLD_PROFILES

from tests.integration.harden_support import (
    UNHARDEN,
    add_keyless_user,
    changed_count,
    key_login,
    password_login,
    run_gpuhost,
    tcp_state,
    tree_digest,
    wait_for_ssh_port,
    write_inventory,
)

pytestmark = [pytest.mark.lab, pytest.mark.slow]
DEBIAN = {"gpuhost_profile": "debian12-nonfree-535", "gpuhost_profiles_file": OLD_PROFILES,
          "gpuhost_install_cuda": False}
SOURCES = "/etc/apt/sources.list.d/debian.sources"
UNATTENDED = "/etc/apt/apt.conf.d/51gpuhost-unattended-upgrades"


def provision(inventory) -> tuple[int, str, str]:
    """Run ``gpuhost provision``; (exit code, the host's summary line, stderr)."""
    return run_gpuhost("provision", inventory, timeout=900)


@pytest.fixture
def unhardened(fresh_host, lab):
    """A fresh host that accepts passwords, whose Debian sources list only ``main``."""
    proc = fresh_host.run(f"sed -i 's/^Components: .*/Components: main/' {SOURCES} && {UNHARDEN}")
    assert proc.returncode == 0, proc.stderr
    wait_for_ssh_port(fresh_host.address)
    return fresh_host, lab(lab.count)


def test_one_provision_run_installs_the_profile_and_hardens_ssh(unhardened, tmp_path) -> None:
    host, view = unhardened
    assert password_login(host.address, "tester", "Tester-pass-1") == "ok"
    # a role asks for the firewall (without one provision loads no default-deny table)
    roles = {"gpuhost_firewall_roles": ["node-exporter"]}
    inventory = write_inventory(tmp_path, view.inventory_path, host.name, **DEBIAN, **roles)

    rc, line, err = provision(inventory)

    assert rc == 0, f"{line}\n{err[-4000:]}"
    assert changed_count(line) > 0
    # the profile: sources fixed (backup kept), driver pinned and held, unattended-upgrades told
    sources = host.run(f"cat {SOURCES}").stdout
    assert "Components: main contrib non-free non-free-firmware" in sources
    assert "Components: main\n" in host.run(f"cat {SOURCES}.gpuhost.bak").stdout
    status = host.run("dpkg-query -W -f='${Version} ${db:Status-Abbrev}' nvidia-driver").stdout
    assert status.strip() == "535.261.03-1 hi", status
    assert '"^nvidia-driver$";' in host.run(f"cat {UNATTENDED}").stdout
    assert host.run("test -s /etc/gpuhost/profile").returncode == 0
    # hardening in the same run: passwords refused, keys work, default-deny table loaded
    assert password_login(host.address, "tester", "Tester-pass-1") == "publickey-only"
    assert key_login(host.address, view.key_path)
    assert host.run("nft list chain inet gpuhost input").stdout.count("policy drop") == 1
    assert tcp_state(host.address, 22) == "open"

    rc, line, err = provision(inventory)

    assert rc == 0, f"{line}\n{err[-4000:]}"
    assert changed_count(line) == 0, line


def test_host_without_a_key_for_the_deploy_user_is_refused_before_the_driver(
    unhardened, tmp_path
) -> None:
    host, view = unhardened
    inventory = add_keyless_user(host, tmp_path, view.inventory_path, **DEBIAN)
    paths = "/etc/apt /etc/ssh /etc/nftables.conf /etc/modprobe.d /etc/gpuhost"
    before = tree_digest(host, paths)

    rc, line, err = provision(inventory)

    assert rc == 2, f"{line}\n{err[-3000:]}"
    assert line.startswith(f"{host.name}: failed: refusing to harden, nothing was changed: ")
    assert "user 'deployer' has no authorized SSH key" in line
    assert tree_digest(host, paths) == before
    assert host.exec("dpkg-query -W nvidia-driver").returncode != 0
    assert host.exec("test -e /var/lib/gpuhost").returncode != 0
    assert password_login(host.address, "deployer", "Deployer-pass-1") == "ok"
