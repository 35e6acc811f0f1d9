"""Firewall roles, the listening-ports parser and the guard that refuses cutting a listener."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.deploys.harden import HardenSettings, firewall_problems, read_settings
from gpuhost.errors import ConfigError, ParseError
from gpuhost.firewall_roles import (
    base_accepts,
    firewall_requested,
    load_roles,
    parse_roles,
    role_accepts,
    roles_admitting,
    uncovered_listeners,
)
from gpuhost.operations.firewall import render_ruleset
from gpuhost.parsers.listening import Listener, parse_ss_listening

SS = Path(__file__).parents[1] / "fixtures" / "parsers" / "ss" / "debian12-slurm-lab.txt"
ROLES = load_roles()
CLUSTER = ("10.123.5.0/24", "fd00:5::/64")


def _listeners() -> list[Listener]:
    return parse_ss_listening(SS.read_text())


# --- roles data ---------------------------------------------------------------------------------


def test_builtin_roles_are_the_documented_ones_each_with_a_source():
    assert set(ROLES) >= {
        "slurm-compute",
        "slurm-controller",
        "k8s-node",
        "node-exporter",
        "dcgm-exporter",
        "cluster-fabric",
    }
    assert all(role.source and role.description for role in ROLES.values())
    assert ROLES["slurm-compute"].tcp == ((6818, 6818),)
    assert ROLES["cluster-fabric"].all_from_cluster
    assert (30000, 32767) in ROLES["k8s-node"].tcp


def test_bad_roles_file_names_every_bad_field():
    text = """
roles:
  a: {tcp: [0, "10-5", 80]}
  b: {udp: "53"}
  c: {description: nothing}
  d: {tcp: [1], colour: red}
"""
    with pytest.raises(ConfigError) as info:
        parse_roles(text, source="roles.yaml")
    message = str(info.value)
    for part in (
        "roles.yaml: ",
        "roles.a.tcp[0]: expected a port 1-65535 or 'FIRST-LAST', found 0",
        "roles.a.tcp[1]",
        "roles.b.udp: expected a list",
        "roles.c: admits nothing",
        "roles.d: unknown fields colour",
    ):
        assert part in message
    with pytest.raises(ConfigError, match="not valid YAML"):
        parse_roles("roles: [", source="roles.yaml")


# --- when is the firewall on --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "wanted"),
    [
        ({}, False),
        ({"gpuhost_firewall_roles": []}, False),
        ({"gpuhost_firewall_roles": ["node-exporter"]}, True),
        ({"gpuhost_firewall_allow_tcp": [9100]}, True),
        ({"gpuhost_firewall_ssh_sources": ["10.0.0.0/8"]}, True),
        ({"gpuhost_ssh_rate_limit": "10/minute"}, True),
        ({"gpuhost_firewall_enabled": True}, True),
        ({"gpuhost_firewall_enabled": False, "gpuhost_firewall_roles": ["k8s-node"]}, False),
    ],
)
def test_firewall_only_when_asked(data, wanted):
    assert firewall_requested(data) is wanted
    assert read_settings("h1", data).firewall_enabled is wanted


def test_role_data_errors_are_one_line_naming_the_key():
    with pytest.raises(ConfigError) as info:
        read_settings(
            "n1",
            {
                "gpuhost_firewall_roles": ["slurm-compute", "slurmd", "cluster-fabric"],
                "gpuhost_firewall_closed_tcp": ["x"],
            },
        )
    message = str(info.value)
    assert message.startswith("inventory data of host n1: ")
    assert "gpuhost_firewall_roles: unknown role 'slurmd' (known: cluster-fabric, " in message
    assert "gpuhost_firewall_cluster_subnets: empty, but role cluster-fabric" in message
    assert "gpuhost_firewall_closed_tcp: expected a list of port numbers" in message
    assert "\n" not in message
    with pytest.raises(ConfigError, match="'10.0.0.300/8' is not an address or network"):
        read_settings("n1", {"gpuhost_firewall_cluster_subnets": ["10.0.0.300/8"]})


def test_role_accepts_need_cluster_subnets_for_cluster_fabric():
    with pytest.raises(ConfigError, match="cluster-fabric accepts all traffic"):
        role_accepts([ROLES["cluster-fabric"]])
    (rule,) = role_accepts([ROLES["node-exporter"]])
    assert rule.sources == () and rule.admits("tcp", 9100) and not rule.admits("udp", 9100)


# --- the ruleset --------------------------------------------------------------------------------


def test_ruleset_with_roles_accepts_their_ports_from_the_cluster_only():
    settings = read_settings(
        "n1",
        {
            "gpuhost_firewall_roles": ["slurm-compute", "cluster-fabric", "k8s-node"],
            "gpuhost_firewall_cluster_subnets": list(CLUSTER),
        },
    )
    text = render_ruleset([22], role_rules=settings.role_rules())
    rules = [line.strip() for line in text.splitlines() if "comment" in line]
    assert rules == [
        'ip saddr { 10.123.5.0/24 } tcp dport { 6818 } accept comment "role slurm-compute"',
        'ip6 saddr { fd00:5::/64 } tcp dport { 6818 } accept comment "role slurm-compute"',
        'ip saddr { 10.123.5.0/24 } accept comment "role cluster-fabric"',
        'ip6 saddr { fd00:5::/64 } accept comment "role cluster-fabric"',
        'ip saddr { 10.123.5.0/24 } tcp dport { 10250, 10256, 30000-32767 } accept comment "role '
        'k8s-node"',
        'ip6 saddr { fd00:5::/64 } tcp dport { 10250, 10256, 30000-32767 } accept comment "role '
        'k8s-node"',
        'ip saddr { 10.123.5.0/24 } udp dport { 30000-32767 } accept comment "role k8s-node"',
        'ip6 saddr { fd00:5::/64 } udp dport { 30000-32767 } accept comment "role k8s-node"',
    ]
    assert "policy drop;" in text
    assert text.index("tcp dport { 22 } accept") < text.index("role slurm-compute")


def test_roles_without_cluster_subnets_accept_from_anywhere():
    text = render_ruleset([22], role_rules=role_accepts([ROLES["dcgm-exporter"]]))
    assert '        tcp dport { 9400 } accept comment "role dcgm-exporter"\n' in text


# --- ss parser ----------------------------------------------------------------------------------


def test_ss_capture_parsed():
    listeners = _listeners()
    assert Listener("tcp", "0.0.0.0", 6818, ("slurmd",)) in listeners
    assert Listener("tcp", "0.0.0.0", 6817, ("slurmctld",)) in listeners
    assert Listener("tcp", "*", 9100, ("prometheus-node",)) in listeners
    assert Listener("tcp", "::", 22, ("sshd",)) in listeners
    assert Listener("tcp", "::1", 9999, ("python3",)) in listeners
    assert Listener("udp", "127.0.0.53", 53, ("python3",)) in listeners
    assert len(listeners) == 8


def test_ss_odd_forms():
    text = (
        'udp UNCONN 0 0 127.0.0.53%lo:53 0.0.0.0:* users:(("systemd-resolve",pid=5,fd=12))\n'
        "tcp LISTEN 0 64 0.0.0.0:2049 0.0.0.0:*\n"
        'tcp LISTEN 0 4096 [fe80::1%eth0]:8080 [::]:* users:(("a",pid=1,fd=3),("a",pid=2,fd=3))\n'
    )
    assert parse_ss_listening(text) == [
        Listener("udp", "127.0.0.53", 53, ("systemd-resolve",), "lo"),
        Listener("tcp", "0.0.0.0", 2049, ()),
        Listener("tcp", "fe80::1", 8080, ("a",), "eth0"),
    ]
    assert parse_ss_listening("") == []


@pytest.mark.parametrize(
    "text",
    [
        "State Recv-Q Send-Q Local Address:Port Peer Address:Port\n",
        "LISTEN 0 128 0.0.0.0:22 0.0.0.0:*\n",  # ss -lt without the NETID column
        "tcp LISTEN 0 128 nonsense 0.0.0.0:*\n",
        b"\x00\x01binary",
    ],
)
def test_ss_malformed_input_names_what_was_expected(text):
    with pytest.raises(ParseError, match=r"expected the output of 'ss -Hltnup'"):
        parse_ss_listening(text)


# --- the listening-ports guard ------------------------------------------------------------------


def test_guard_names_each_cut_service_and_the_role_admitting_it():
    settings = HardenSettings(firewall_enabled=True)
    problems = firewall_problems(settings, [22], _listeners())
    assert problems == [
        "slurmctld listens on tcp port 6817 (0.0.0.0) and the new firewall would drop it: add "
        "role slurm-controller to gpuhost_firewall_roles (or 6817 to gpuhost_firewall_closed_tcp "
        "to cut it on purpose)",
        "slurmd listens on tcp port 6818 (0.0.0.0) and the new firewall would drop it: add role "
        "slurm-compute to gpuhost_firewall_roles (or 6818 to gpuhost_firewall_closed_tcp to cut "
        "it on purpose)",
        "python3 listens on tcp port 8080 (0.0.0.0) and the new firewall would drop it: add 8080 "
        "to gpuhost_firewall_allow_tcp (or 8080 to gpuhost_firewall_closed_tcp to cut it on "
        "purpose)",
        "prometheus-node listens on tcp port 9100 (*) and the new firewall would drop it: add "
        "role node-exporter to gpuhost_firewall_roles (or 9100 to gpuhost_firewall_closed_tcp to "
        "cut it on purpose)",
    ]


def test_guard_passes_when_roles_ports_or_closed_cover_every_listener():
    data = {
        "gpuhost_firewall_roles": ["slurm-compute", "slurm-controller", "node-exporter"],
        "gpuhost_firewall_closed_tcp": [8080],
    }
    assert firewall_problems(read_settings("h1", data), [22], _listeners()) == []
    fabric = {
        "gpuhost_firewall_roles": ["cluster-fabric"],
        "gpuhost_firewall_cluster_subnets": ["10.0.0.0/8"],
    }
    assert firewall_problems(read_settings("h1", fabric), [22], _listeners()) == []


def test_guard_only_when_a_firewall_is_wanted_and_needs_ss():
    assert firewall_problems(HardenSettings(), [22], _listeners()) == []
    assert firewall_problems(HardenSettings(firewall_enabled=True), [22], None) == [
        "cannot tell which services listen (ss from iproute2 is missing): install iproute2"
    ]


def test_udp_and_loopback_listeners_are_not_judged():
    listeners = [Listener("udp", "0.0.0.0", 68, ("dhclient",)), Listener("tcp", "127.0.0.1", 25)]
    assert uncovered_listeners(listeners, base_accepts([22]), ROLES) == []
    assert roles_admitting(ROLES, "udp", 31000) == ["k8s-node"]
