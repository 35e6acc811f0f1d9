"""SSH hardening and firewall checks (what ``gpuhost harden`` sets up), read from the live host.

sshd's effective configuration comes from ``sshd -T`` (after Include and first-match), parsed by
``gpuhost.parsers.sshd.parse_sshd_t``; the algorithm lists come from
``gpuhost/data/ssh_policy.yaml``.
Needs root (``sshd -T`` and ``nft`` read root-only state). Uses only the ``host`` fixture; the
host's inventory data (``inventory_data`` from checks/conftest.py, when present) says whether the
firewall is managed and which ports it opens.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from gpuhost.checks_support.harden import firewall_skip_reason, ssh_skip_reason
from gpuhost.deploys.harden import DEFAULTS
from gpuhost.facts.firewall import INCLUDE_LINE, NFTABLES_CONF, RULESET_PATH
from gpuhost.facts.sshd import SSHD_CONFIG, include_problem
from gpuhost.operations.sshd import load_policy
from gpuhost.parsers.sshd import (
    parse_sshd_t,
    password_login_allowed,
    permit_root_login,
    sshd_value,
)
from gpuhost.probe.script import SSHD_FOUND_CODE, SSHD_T_CODE

POLICY = load_policy()

@contextlib.contextmanager
def _as_root(host: Any) -> Iterator[None]:
    """Root-only reads (``sshd -T``, ``nft``): through sudo unless already connected as root."""
    if host.user().uid == 0:
        yield
    else:
        with host.sudo():
            yield

#: substrings that mark a weak algorithm wherever they appear
WEAK = ("-cbc", "sha1", "md5", "group1-", "group14", "3des", "arcfour", "ssh-dss")


@pytest.fixture(scope="module")
def sshd(host: Any) -> dict[str, list[str]]:
    """The effective sshd config, parsed (``sshd -T``)."""
    with _as_root(host):
        if host.run(SSHD_FOUND_CODE).rc != 0:
            pytest.skip("no SSH daemon here (openssh-server not installed): nothing to harden")
        result = host.run(SSHD_T_CODE)
    if result.rc != 0:
        pytest.fail(f"sshd -T failed (exit {result.rc}): {result.stderr.strip()}", pytrace=False)
    return parse_sshd_t(result.stdout.splitlines())


def _inventory_data(request: pytest.FixtureRequest) -> dict[str, Any]:
    try:
        data: dict[str, Any] = request.getfixturevalue("inventory_data")
    except pytest.FixtureLookupError:
        data = {}
    return data


@pytest.fixture
def harden_data(request: pytest.FixtureRequest) -> dict[str, Any]:
    data = _inventory_data(request)
    return {key: data.get(key, default) for key, default in DEFAULTS.items()}


@pytest.fixture(autouse=True)
def _applies_to_host(request: pytest.FixtureRequest) -> None:
    """Hosts whose inventory data opts out of gpuhost's hardening (or firewall) skip, with why."""
    data = _inventory_data(request)
    is_firewall = request.node.name.startswith("test_firewall")
    reason = firewall_skip_reason(data) if is_firewall else ssh_skip_reason(data)
    if reason is not None:
        pytest.skip(reason)


def test_ssh_password_login_off(sshd: dict[str, list[str]]) -> None:
    """Neither PasswordAuthentication nor keyboard-interactive (PAM password) is on."""
    assert not password_login_allowed(sshd), (
        f"passwordauthentication={sshd_value(sshd, 'passwordauthentication')} "
        f"kbdinteractiveauthentication={sshd_value(sshd, 'kbdinteractiveauthentication')}"
    )


def test_ssh_root_login_never_by_password(
    sshd: dict[str, list[str]], harden_data: dict[str, Any]
) -> None:
    """PermitRootLogin is what inventory data asks: prohibit-password (default) or no."""
    assert permit_root_login(sshd) == harden_data["gpuhost_ssh_permit_root_login"]


@pytest.mark.parametrize(
    "keyword, expected",
    [
        ("pubkeyauthentication", "yes"),
        ("permitemptypasswords", "no"),
        ("hostbasedauthentication", "no"),
        ("x11forwarding", "no"),
        ("permituserenvironment", "no"),
    ],
)
def test_ssh_fixed_setting(sshd: dict[str, list[str]], keyword: str, expected: str) -> None:
    assert sshd_value(sshd, keyword) == expected, f"sshd -T: {keyword} {sshd_value(sshd, keyword)}"


def test_ssh_limits(sshd: dict[str, list[str]], harden_data: dict[str, Any]) -> None:
    """MaxAuthTries and LoginGraceTime are the inventory's (defaults 3 and 30 s)."""
    assert int(sshd_value(sshd, "maxauthtries")) == harden_data["gpuhost_ssh_max_auth_tries"]
    assert int(sshd_value(sshd, "logingracetime")) == harden_data["gpuhost_ssh_login_grace_time"]


@pytest.mark.parametrize(
    "keyword, policy_key",
    [
        ("kexalgorithms", "kex_algorithms"),
        ("ciphers", "ciphers"),
        ("macs", "macs"),
        ("hostkeyalgorithms", "host_key_algorithms"),
        ("pubkeyacceptedalgorithms", "pubkey_accepted_algorithms"),
    ],
)
def test_ssh_algorithms_are_the_policy(
    sshd: dict[str, list[str]], keyword: str, policy_key: str
) -> None:
    """Only the algorithms of ssh_policy.yaml are offered; none of them is weak."""
    offered = sshd_value(sshd, keyword).split(",")
    assert offered == POLICY[policy_key], f"sshd -T {keyword}: {','.join(offered)}"
    assert not [a for a in offered if any(w in a for w in WEAK)]


@pytest.mark.usefixtures("sshd")  # skips, with its reason, where no SSH daemon is installed
def test_ssh_dropins_are_read_first(host: Any) -> None:
    """sshd_config includes the drop-ins before its own settings, so 00-gpuhost.conf wins."""
    with _as_root(host):
        config = host.file(SSHD_CONFIG)
        main = config.content_string.splitlines() if config.exists else None
    problem = include_problem(main)  # an empty or missing file: one line, no traceback
    if problem:
        pytest.fail(problem, pytrace=False)


def test_ssh_no_revert_timer_left(host: Any) -> None:
    """No dead-man timer is still armed (it would undo a confirmed change)."""
    out = host.run("systemctl list-timers --all --no-legend 'gpuhost-*'").stdout
    assert out.strip() == "", out


def test_firewall_default_deny_inbound(host: Any, harden_data: dict[str, Any]) -> None:
    """Table inet gpuhost drops inbound by default, keeps established traffic, opens SSH and
    exactly the ports inventory data lists."""
    with _as_root(host):
        listing = host.check_output("nft -s list table inet gpuhost")
    assert "type filter hook input priority filter; policy drop;" in listing
    assert "ct state established,related accept" in listing
    for port in harden_data["gpuhost_firewall_allow_tcp"]:
        assert f"tcp dport {port} accept" in listing or f" {port}," in listing, listing


def test_firewall_loaded_at_boot(host: Any, harden_data: dict[str, Any]) -> None:
    with _as_root(host):
        conf = host.file(NFTABLES_CONF).content_string
        assert host.file(RULESET_PATH).exists
        assert host.run(f"nft -c -f {NFTABLES_CONF}").rc == 0
    assert INCLUDE_LINE in conf.splitlines()
    assert host.service("nftables").is_enabled
