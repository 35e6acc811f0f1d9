"""Inventory values never become config syntax (issue 29): what gpuhost check writes into its
ssh_config, and what hardening writes into sshd_config/authorized_keys, is refused by
``inventory check`` (and by the writer itself) when it would add a line or a pattern."""

from __future__ import annotations

import pytest

from gpuhost.checks_support.inventory import CheckHost, ssh_config
from gpuhost.cli import main
from gpuhost.errors import ConfigError

INJECT = "10.0.0.1\nProxyCommand sh -c 'touch /tmp/pwned'"


def _check(tmp_path, capsys, text: str) -> tuple[int, str]:
    inv = tmp_path / "inv.py"
    inv.write_text(text)
    code = main(["inventory", "check", str(inv)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("key", ["ssh_hostname", "ssh_user", "ssh_key", "ssh_known_hosts_file"])
@pytest.mark.parametrize("value", [INJECT, "x\n", "x\rProxyCommand y", "x\x1b]0;t\x07", 'a"b'])
def test_a_value_that_would_add_ssh_config_syntax_is_refused(tmp_path, capsys, key, value):
    code, err = _check(tmp_path, capsys, f"gpu = [('n1', {{{key!r}: {value!r}}})]\n")
    assert code == 2, err
    assert key in err and err.count("\n") == 1
    with pytest.raises(ConfigError, match=f"host n1: {key}: found"):
        ssh_config([CheckHost("n1", {key: value})], "/tmp/ctl")


@pytest.mark.parametrize("name", ["*", "gpu-?", "!gpu", "a,b", "gpu 1", "-oProxyCommand", "h\n"])
def test_a_host_name_that_is_an_ssh_config_pattern_is_refused(tmp_path, capsys, name):
    code, err = _check(
        tmp_path, capsys, f"gpu = [({name!r}, {{'ssh_hostname': '10.0.0.9'}}), 'n2']\n"
    )
    assert code == 2 and "is not a literal name" in err and err.count("\n") == 1
    with pytest.raises(ConfigError, match="is not a literal name"):
        ssh_config([CheckHost(name, {"ssh_hostname": "10.0.0.9"}), CheckHost("n2")], "/c")


def test_plain_values_are_written_as_one_argument_each():
    text = ssh_config(
        [CheckHost("n1", {"ssh_key": "/keys/my key#1", "ssh_known_hosts_file": "/k/%h",
                          "ssh_hostname": "fe80::1%eth0", "ssh_user": "ops"})],
        "/tmp/ctl",
    )
    assert '    IdentityFile "/keys/my key#1"\n' in text
    assert "    UserKnownHostsFile /k/%%h\n" in text
    assert "    HostName fe80::1%%eth0\n" in text


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ("{'gpuhost_ssh_allow_users': ['ops admin']}", "gpuhost_ssh_allow_users"),
        ("{'gpuhost_ssh_allow_users': ['ops\\nPermitRootLogin yes']}", "gpuhost_ssh_allow_users"),
        ("{'gpuhost_ssh_allow_groups': ['a b']}", "gpuhost_ssh_allow_groups"),
        ("{'gpuhost_ssh_authorized_keys': {'ops': ['ssh-ed25519 AAAA a\\nssh-rsa BBBB evil']}}",
         "gpuhost_ssh_authorized_keys"),
        ("{'gpuhost_ssh_authorized_keys': {'ops': ['ssh-ed25519 AAAA a\\r']}}",
         "gpuhost_ssh_authorized_keys"),
        ("{'gpuhost_ssh_extra_config': ['X11Forwarding no\\n']}", "gpuhost_ssh_extra_config"),
    ],
)
def test_sshd_values_hiding_a_second_line_or_word_are_refused(tmp_path, capsys, data, key):
    code, err = _check(tmp_path, capsys, f"gpu = [('n1', {data})]\n")
    assert code == 2 and key in err and err.count("\n") == 1
