"""``sshd -T``: one parser and one meaning of "password login allowed" for hardening and audit."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.audit.rules import AuditContext, check_sshd
from gpuhost.facts.build import host_facts_from_text
from gpuhost.parsers.sshd import (
    audit_settings,
    keyboard_interactive_password,
    parse_sshd_t,
    password_login_allowed,
    permit_root_login,
)
from tests.audit.probe_text import host_with

STOCK = Path(__file__).parents[1] / "harden" / "data" / "sshd_T_debian12_stock.txt"


@pytest.mark.parametrize(
    ("lines", "allowed"),
    [
        (["passwordauthentication yes", "kbdinteractiveauthentication no", "usepam yes"], True),
        (["passwordauthentication no", "kbdinteractiveauthentication yes", "usepam yes"], True),
        # keyboard-interactive has no backend but PAM on Linux
        (["passwordauthentication no", "kbdinteractiveauthentication yes", "usepam no"], False),
        # OpenSSH before 8.7 prints the old keyword
        (["passwordauthentication no", "challengeresponseauthentication yes", "usepam yes"], True),
        (["passwordauthentication no", "kbdinteractiveauthentication no", "usepam yes"], False),
    ],
)
def test_password_login_allowed_and_the_audit_agree(lines: list[str], allowed: bool) -> None:
    """The hardening check and the audit's ssh rule read the same output the same way."""
    assert password_login_allowed(parse_sshd_t(lines)) is allowed
    facts = host_facts_from_text(host_with(sshd="\n".join(lines) + "\n"))
    ids = {finding.rule for finding in check_sshd(AuditContext(facts)).findings}
    assert bool(ids & {"ssh.password-auth", "ssh.keyboard-interactive"}) is allowed


def test_audit_settings_keep_the_audited_keywords_last_value_wins() -> None:
    config = parse_sshd_t(["port 22", "port 2222", "x11forwarding no", "usepam yes"])
    assert audit_settings(config) == {"port": "2222", "usepam": "yes"}


def test_old_root_login_spelling_is_not_yes() -> None:
    config = parse_sshd_t(["permitrootlogin without-password"])
    assert permit_root_login(config) == "prohibit-password"
    facts = host_with(sshd="permitrootlogin without-password\n")
    assert not check_sshd(AuditContext(host_facts_from_text(facts))).findings


def test_stock_debian_capture() -> None:
    config = parse_sshd_t(STOCK.read_text().splitlines())
    assert password_login_allowed(config)
    assert not keyboard_interactive_password(config)
