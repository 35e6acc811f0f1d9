"""Pure parts of hardening: parsers, rendering, inventory data checks and lockout checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuhost.deploys.harden import (
    HardenSettings,
    key_type_accepted,
    lockout_problems,
    read_settings,
)
from gpuhost.errors import ConfigError
from gpuhost.facts.firewall import parse_firewall
from gpuhost.facts.sshd import (
    include_precedes_settings,
    parse_authorized_key,
    parse_authorized_keys,
    parse_ssh_session,
    parse_sshd_files,
    parse_user_keys,
)
from gpuhost.operations.firewall import render_ruleset
from gpuhost.operations.sshd import load_policy, render_dropin
from gpuhost.parsers.sshd import (
    parse_sshd_t,
    password_login_allowed,
    permit_root_login,
    sshd_value,
)

DATA = Path(__file__).parent / "data"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKq0bHXJ0bHXJ0bHXJ0bHXJ0bHXJ0bHXJ0bHXJ0bHXJ ops@laptop"
ECDSA = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTY= ops@yubi"
DSA = "ssh-dss AAAAB3NzaC1kc3MAAACBAP= ancient"


# --- sshd -T ------------------------------------------------------------------------------------


def test_sshd_t_of_a_hardened_debian12_host():
    """Captured from a lab host (Debian 12, OpenSSH 9.2p1) after ``gpuhost harden``."""
    config = parse_sshd_t((DATA / "sshd_T_debian12_hardened.txt").read_text().splitlines())
    assert sshd_value(config, "passwordauthentication") == "no"
    assert sshd_value(config, "kbdinteractiveauthentication") == "no"
    assert sshd_value(config, "permitrootlogin") == "without-password"  # sshd's old spelling
    assert permit_root_login(config) == "prohibit-password"
    assert not password_login_allowed(config)
    assert sshd_value(config, "x11forwarding") == "no"
    assert sshd_value(config, "maxauthtries") == "3"
    assert "cbc" not in sshd_value(config, "ciphers")
    assert "sha1" not in sshd_value(config, "macs")
    assert "group14" not in sshd_value(config, "kexalgorithms")


def test_sshd_t_of_a_stock_debian12_host_allows_passwords():
    """Captured from a lab host before hardening: Debian's defaults allow password login."""
    config = parse_sshd_t((DATA / "sshd_T_debian12_stock.txt").read_text().splitlines())
    assert sshd_value(config, "passwordauthentication") == "yes"
    assert password_login_allowed(config)
    assert len(config["hostkey"]) >= 1


def test_sshd_t_keeps_repeated_keywords_and_skips_noise():
    config = parse_sshd_t(["port 22", "port 2222", "", "Warning: something", "usepam yes"])
    assert config["port"] == ["22", "2222"]
    assert sshd_value(config, "usepam") == "yes"
    assert sshd_value(config, "missing", "dflt") == "dflt"
    assert "Warning:" not in config


# --- config files -------------------------------------------------------------------------------


def test_debian12_main_file_includes_dropins_first():
    main = (DATA / "sshd_config_debian12").read_text().splitlines()
    assert include_precedes_settings(main)


@pytest.mark.parametrize(
    "lines, expected",
    [
        (["# c", "", "Include /etc/ssh/sshd_config.d/*.conf", "Port 22"], True),
        (["include sshd_config.d/*.conf"], True),
        (["Port 22", "Include /etc/ssh/sshd_config.d/*.conf"], False),
        (["Include /etc/other/*.conf", "Include /etc/ssh/sshd_config.d/*.conf"], False),
        ([], False),
    ],
)
def test_include_must_come_before_any_setting(lines, expected):
    assert include_precedes_settings(lines) is expected


def test_sshd_files_sections():
    out = [
        "##GPUHOST section main",
        "Include /etc/ssh/sshd_config.d/*.conf",
        "##GPUHOST section dropin",
        "##GPUHOST missing",
    ]
    assert parse_sshd_files(out) == {
        "main_present": True,
        "includes_dropins_first": True,
        "dropin": None,
    }
    out = ["##GPUHOST section main", "##GPUHOST missing", "##GPUHOST section dropin", "A b", ""]
    assert parse_sshd_files(out) == {
        "main_present": False,
        "includes_dropins_first": False,
        "dropin": "A b\n",
    }


# --- authorized keys ----------------------------------------------------------------------------


def test_authorized_key_with_quoted_options():
    key = parse_authorized_key(f'from="10.0.0.1,10.0.0.2",command="echo a b" {KEY}')
    assert key is not None
    assert key["type"] == "ssh-ed25519"
    assert key["comment"] == "ops@laptop"
    assert key["options"] == 'from="10.0.0.1,10.0.0.2",command="echo a b"'


@pytest.mark.parametrize("line", ["", "# comment", "ssh-ed25519", "ssh-ed25519 !!!", "garbage x y"])
def test_unusable_authorized_key_lines(line):
    assert parse_authorized_key(line) is None


def test_authorized_keys_file_and_user_facts():
    keys = parse_authorized_keys([KEY, "", "# old", ECDSA])
    assert [k["type"] for k in keys] == ["ssh-ed25519", "ecdsa-sha2-nistp256"]
    facts = parse_user_keys(
        [
            "##GPUHOST home /home/ops",
            "##GPUHOST group ops",
            "##GPUHOST groups ops sudo",
            "##GPUHOST keys",
            KEY,
            "",
            "##GPUHOST keys2",
            ECDSA,
        ]
    )
    assert facts["exists"] and facts["home"] == "/home/ops" and facts["groups"] == ["ops", "sudo"]
    assert len(facts["keys"]) == 1 and len(facts["keys2"]) == 1
    assert parse_user_keys([])["exists"] is False


def test_ssh_session():
    assert parse_ssh_session(["ops", "10.123.4.1 51234 10.123.4.11 22"]) == {
        "login_user": "ops",
        "client_address": "10.123.4.1",
    }
    assert parse_ssh_session(["root", ""]) == {"login_user": "root", "client_address": None}


# --- firewall fact ------------------------------------------------------------------------------


def test_firewall_fact_sections():
    out = [
        "##GPUHOST section nft",
        "yes",
        "##GPUHOST section ruleset",
        "##GPUHOST missing",
        "##GPUHOST section live",
        "table inet gpuhost {",
        "}",
        "##GPUHOST section applied",
        "##GPUHOST missing",
        "##GPUHOST section conf",
        "#!/usr/sbin/nft -f",
        'include "/etc/gpuhost/nftables.nft"',
        "##GPUHOST section enabled",
        "disabled",
    ]
    assert parse_firewall(out) == {
        "nft_present": True,
        "ruleset_file": None,
        "live_table": "table inet gpuhost {\n}",
        "applied_listing": None,
        "conf_present": True,
        "conf_includes_ruleset": True,
        "service_enabled": False,
    }


# --- rendering ----------------------------------------------------------------------------------


def test_policy_has_no_weak_algorithms():
    policy = load_policy()
    everything = " ".join(
        ",".join(policy[k])
        for k in (
            "kex_algorithms",
            "ciphers",
            "macs",
            "host_key_algorithms",
            "pubkey_accepted_algorithms",
        )
    )
    for weak in ("cbc", "sha1", "group1-", "group14", "ssh-rsa,", "ssh-dss", "hmac-md5", "3des"):
        assert weak not in everything + ",", weak
    assert policy["settings"]["PasswordAuthentication"] == "no"


def test_policy_loader_names_bad_fields():
    with pytest.raises(ConfigError, match="ciphers: expected a non-empty list"):
        load_policy(
            "kex_algorithms: [a]\nciphers: []\nmacs: [m]\nhost_key_algorithms: [h]\n"
            "pubkey_accepted_algorithms: [p]\nsettings: {}\nrequired_rsa_size: 3072\n"
        )


def test_dropin_rendering():
    text = render_dropin(load_policy(), "no", 4, 20, allow_users=["ops"], extra_lines=["Foo bar"])
    lines = text.splitlines()
    assert lines[0].startswith("# Managed by gpuhost")
    assert "PermitRootLogin no" in lines and "MaxAuthTries 4" in lines
    assert "LoginGraceTime 20" in lines and "AllowUsers ops" in lines
    assert lines[-1] == "Foo bar" and text.endswith("\n")
    assert not any(line.startswith("AllowGroups") for line in lines)


def test_ruleset_rendering_and_nft_check(tmp_path):
    text = render_ruleset([22, 22], ["10.0.0.0/8", "2001:db8::/32"], [9100], [], "6/minute")
    assert "policy drop;" in text
    assert "ip saddr { 10.0.0.0/8 } tcp dport { 22 } accept" in text
    assert "ip6 saddr { 2001:db8::/32 } tcp dport { 22 } accept" in text
    assert "tcp dport { 9100 } accept" in text and "udp dport" not in text
    assert "limit rate over 6/minute" in text
    assert "flush" not in text
    open_ssh = render_ruleset([22])
    assert "        tcp dport { 22 } accept" in open_ssh and "@ssh_rate" not in open_ssh


# --- inventory data -----------------------------------------------------------------------------


def test_defaults_are_valid():
    settings = read_settings("h1", {})
    assert settings == HardenSettings()


def test_every_bad_key_is_named_in_one_error():
    with pytest.raises(ConfigError) as info:
        read_settings(
            "h1",
            {
                "gpuhost_ssh_permit_root_login": "yes",
                "gpuhost_firewall_allow_tcp": [9100, 70000],
                "gpuhost_firewall_ssh_sources": ["10.0.0.0/8", "not-a-net"],
                "gpuhost_ssh_authorized_keys": {"ops": ["nonsense"]},
                "gpuhost_ssh_rate_limit": "fast",
                "gpuhost_ssh_max_auth_tries": 0,
            },
        )
    message = str(info.value)
    assert message.startswith("inventory data of host h1: ")
    for key in (
        "gpuhost_ssh_permit_root_login",
        "gpuhost_firewall_allow_tcp",
        "'not-a-net'",
        "gpuhost_ssh_authorized_keys['ops'][0]",
        "gpuhost_ssh_rate_limit",
        "gpuhost_ssh_max_auth_tries",
    ):
        assert key in message
    assert "\n" not in message


# --- lockout checks -----------------------------------------------------------------------------

ACCEPTED = load_policy()["pubkey_accepted_algorithms"]


def _user(*keys: str, groups=("ops",), exists=True):
    return parse_user_keys(
        [
            "##GPUHOST home /home/x",
            "##GPUHOST group ops",
            "##GPUHOST groups " + " ".join(groups),
            "##GPUHOST keys",
            *keys,
        ]
        if exists
        else []
    )


def test_user_with_a_key_passes():
    assert lockout_problems("ops", HardenSettings(), {"ops": _user(KEY)}, ACCEPTED) == []


def test_user_without_a_key_is_refused_with_what_to_add():
    problems = lockout_problems("ops", HardenSettings(), {"ops": _user()}, ACCEPTED)
    assert len(problems) == 1
    assert "user 'ops' has no authorized SSH key" in problems[0]
    assert "gpuhost_ssh_authorized_keys" in problems[0]


def test_keys_from_inventory_count():
    settings = HardenSettings(authorized_keys={"ops": (KEY,)})
    assert lockout_problems("ops", settings, {"ops": _user()}, ACCEPTED) == []


def test_only_keys_sshd_will_accept_count():
    assert lockout_problems("ops", HardenSettings(), {"ops": _user(DSA)}, ACCEPTED)
    assert lockout_problems("ops", HardenSettings(), {"ops": _user(ECDSA)}, ACCEPTED) == []
    assert key_type_accepted("ssh-rsa", ["rsa-sha2-512"])
    assert not key_type_accepted("ssh-rsa", ["ssh-ed25519"])


def test_allow_users_must_include_the_login_and_have_keys():
    settings = HardenSettings(allow_users=("alice",))
    problems = lockout_problems("ops", settings, {"ops": _user(KEY), "alice": _user()}, ACCEPTED)
    assert any("does not include 'ops'" in p for p in problems)
    assert any("user 'alice' has no authorized SSH key" in p for p in problems)
    settings = HardenSettings(allow_users=("ops", "adm*"))
    assert lockout_problems("ops", settings, {"ops": _user(KEY)}, ACCEPTED) == []


def test_allow_groups_must_include_a_group_of_the_login():
    settings = HardenSettings(allow_groups=("admins",))
    assert lockout_problems("ops", settings, {"ops": _user(KEY, groups=("ops", "sudo"))}, ACCEPTED)
    settings = HardenSettings(allow_groups=("sudo",))
    assert (
        lockout_problems("ops", settings, {"ops": _user(KEY, groups=("ops", "sudo"))}, ACCEPTED)
        == []
    )


def test_root_login_with_permit_root_login_no_is_refused():
    settings = HardenSettings(permit_root_login="no")
    problems = lockout_problems("root", settings, {"root": _user(KEY)}, ACCEPTED)
    assert any("logs in as root" in p for p in problems)


def test_removing_unlisted_keys_of_the_login_needs_a_listed_key():
    settings = HardenSettings(remove_unlisted_keys=True, authorized_keys={"ops": ()})
    problems = lockout_problems("ops", settings, {"ops": _user(KEY)}, ACCEPTED)
    assert any("remove_unlisted_keys would leave it none" in p for p in problems)


def test_ssh_sources_must_contain_this_session():
    settings = HardenSettings(firewall_enabled=True, ssh_sources=("10.1.0.0/16",))
    users = {"ops": _user(KEY)}
    problems = lockout_problems("ops", settings, users, ACCEPTED, client_address="10.123.4.1")
    assert any("comes from 10.123.4.1" in p for p in problems)
    assert lockout_problems("ops", settings, users, ACCEPTED, client_address="10.1.2.3") == []
    assert (
        lockout_problems("ops", settings, users, ACCEPTED, client_address=None, over_ssh=False)
        == []
    )


def test_unknown_user_is_refused():
    assert lockout_problems(None, HardenSettings(), {}, ACCEPTED)
    assert lockout_problems("ops", HardenSettings(), {"ops": _user(exists=False)}, ACCEPTED)


# --- CLI ----------------------------------------------------------------------------------------


def test_cli_missing_inventory_is_one_line_exit_2():
    proc = subprocess.run(
        [sys.executable, "-m", "gpuhost", "harden", "no/such/inventory.py"],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).parents[2],
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "gpuhost: error: no/such/inventory.py: inventory file not found "
        "(expected a pyinfra inventory .py)"
    ]


def test_cli_limit_matching_nothing_is_one_line_exit_2(tmp_path):
    inventory = tmp_path / "inventory.py"
    inventory.write_text('hosts = ["10.123.250.10"]\n')
    proc = subprocess.run(
        [sys.executable, "-m", "gpuhost", "harden", str(inventory), "--limit", "nope"],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).parents[2],
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "--limit nope: matches no host" in proc.stderr
