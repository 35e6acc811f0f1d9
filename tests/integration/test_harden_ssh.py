"""``gpuhost harden`` on real lab hosts (Debian 12, OpenSSH 9.2, systemd): the SSH side.

The firewall is switched off here (``gpuhost_firewall_enabled: false``) so that these tests do not
depend on the lab granting CAP_NET_ADMIN; test_harden_firewall.py covers it.
"""

from __future__ import annotations

import pytest

from tests.integration.harden_support import (
    UNHARDEN,
    add_keyless_user,
    audit_failures,
    changed_count,
    harden,
    key_login,
    password_login,
    run_python,
    ssh_audit,
    tree_digest,
    wait_for_ssh_port,
    write_inventory,
)

pytestmark = [pytest.mark.lab, pytest.mark.slow]
NO_FIREWALL = {"gpuhost_firewall_enabled": False}


@pytest.fixture
def unhardened(fresh_host, lab, tmp_path):
    """A fresh host that accepts passwords (as cloud images do), with an inventory for it."""
    proc = fresh_host.run(UNHARDEN)
    assert proc.returncode == 0, proc.stderr
    wait_for_ssh_port(fresh_host.address)
    view = lab(lab.count)
    inventory = write_inventory(tmp_path, view.inventory_path, fresh_host.name, **NO_FIREWALL)
    return fresh_host, view, inventory


def test_hardening_refuses_passwords_keeps_keys_and_reruns_clean(unhardened):
    host, view, inventory = unhardened
    # the probe can see a password login succeed, so its "refused" below means something
    assert password_login(host.address, "tester", "Tester-pass-1") == "ok"

    rc, line, err = harden(inventory)
    assert rc == 0, f"{line}\n{err[-3000:]}"
    assert changed_count(line) >= 1

    assert key_login(host.address, view.key_path)
    assert password_login(host.address, "tester", "Tester-pass-1") == "publickey-only"
    assert password_login(host.address, "root", "Root-pass-1") == "publickey-only"
    effective = host.run("sshd -T").stdout
    assert "passwordauthentication no" in effective
    assert "kbdinteractiveauthentication no" in effective
    assert "x11forwarding no" in effective
    assert host.run("systemctl list-timers --all --no-legend 'gpuhost-*'").stdout.strip() == ""

    rc, line, err = harden(inventory)
    assert rc == 0, err[-3000:]
    assert changed_count(line) == 0, line


def test_ssh_audit_reports_no_failure(unhardened):
    host, _view, inventory = unhardened
    before = audit_failures(ssh_audit(host.address))
    assert before, "ssh-audit found no failure on stock Debian 12; the check would prove nothing"
    rc, line, err = harden(inventory)
    assert rc == 0, f"{line}\n{err[-3000:]}"
    assert audit_failures(ssh_audit(host.address)) == []


def test_host_without_a_key_for_the_deploy_user_is_left_unchanged(unhardened, tmp_path):
    host, view, _inventory = unhardened
    inventory = add_keyless_user(host, tmp_path, view.inventory_path, **NO_FIREWALL)
    before = tree_digest(host)

    rc, line, _err = harden(inventory)

    assert rc == 1
    assert line.startswith(f"{host.name}: failed: refusing to harden, nothing was changed: ")
    assert "user 'deployer' has no authorized SSH key" in line
    assert "gpuhost_ssh_authorized_keys" in line and "/home/deployer/.ssh/authorized_keys" in line
    assert tree_digest(host) == before
    assert host.exec("test -e /var/lib/gpuhost").returncode != 0
    assert password_login(host.address, "deployer", "Deployer-pass-1") == "ok"


def test_broken_dropin_is_rejected_and_previous_config_stays(unhardened, tmp_path):
    host, view, inventory = unhardened
    rc, line, err = harden(inventory)
    assert rc == 0, f"{line}\n{err[-3000:]}"
    before = tree_digest(host)
    broken = write_inventory(
        tmp_path,
        view.inventory_path,
        host.name,
        gpuhost_ssh_extra_config=["NoSuchDirective yes"],
        **NO_FIREWALL,
    )

    rc, line, err = harden(broken)

    assert rc == 1
    assert line.startswith(f"{host.name}: failed: operation failed: ")
    assert "Bad configuration option: NoSuchDirective" in err
    assert "sshd -t rejected the new SSH config" in err
    assert tree_digest(host) == before
    assert key_login(host.address, view.key_path)
    assert "passwordauthentication no" in host.run("sshd -T").stdout


def test_failed_fresh_connection_puts_previous_sshd_config_back(unhardened):
    """A drop-in that sshd -t accepts but that refuses every login is rolled back at once."""
    host, view, inventory = unhardened
    rc, line, err = harden(inventory)
    assert rc == 0, f"{line}\n{err[-3000:]}"
    before = tree_digest(host)
    proc = run_python(
        "from gpuhost.deploy_runner import run_deploy\n"
        "from gpuhost.operations import sshd\n"
        "def deploy():\n"
        "    sshd.dropin(name='locks everyone out', content='AllowUsers nobody-at-all\\n')\n"
        f"print(run_deploy({str(inventory)!r}, deploy)[0].line(False))\n"
    )
    assert "failed: operation failed: locks everyone out" in proc.stdout, proc.stderr[-3000:]
    assert "a fresh SSH connection failed after the change" in proc.stderr
    assert tree_digest(host) == before
    assert key_login(host.address, view.key_path)
    assert host.run("systemctl list-timers --all --no-legend 'gpuhost-*'").stdout.strip() == ""
