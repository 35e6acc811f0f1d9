"""sshd settings that let passwords or root in, as the data table ``SSHD_RULES`` (``ssh``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuhost.audit.rules.context import AuditContext, result_with, skip_result
from gpuhost.findings import ERROR, WARNING, Finding, RuleResult
from gpuhost.parsers.sshd import (
    SshdConfig,
    keyboard_interactive_password,
    password_authentication,
    permit_root_login,
    sshd_value,
)


@dataclass(frozen=True)
class SshdRule:
    """An sshd setting the audit flags: does this ``sshd -T`` config have it, and what to say."""

    finding_id: str
    severity: str
    applies: Callable[[SshdConfig], bool]
    message: str
    found: str
    expected: str
    fix: str


# Every one is checked; a host can have several.
SSHD_RULES: tuple[SshdRule, ...] = (
    SshdRule(
        "ssh.password-auth",
        WARNING,
        password_authentication,
        "sshd accepts passwords (PasswordAuthentication yes); expected public keys only",
        "PasswordAuthentication yes",
        "PasswordAuthentication no (public keys only)",
        "gpuhost harden (sets PasswordAuthentication no after checking key access)",
    ),
    SshdRule(
        "ssh.keyboard-interactive",
        WARNING,
        keyboard_interactive_password,
        "sshd accepts keyboard-interactive (PAM password) logins; expected public keys only",
        "KbdInteractiveAuthentication yes with PAM passwords",
        "KbdInteractiveAuthentication no (public keys only)",
        "gpuhost harden (KbdInteractiveAuthentication no)",
    ),
    SshdRule(
        "ssh.root-login",
        WARNING,
        lambda config: permit_root_login(config) == "yes",
        "sshd lets root log in with a password (PermitRootLogin yes); expected "
        "prohibit-password or no",
        "PermitRootLogin yes",
        "PermitRootLogin prohibit-password or no",
        "gpuhost harden",
    ),
    SshdRule(
        "ssh.empty-passwords",
        ERROR,
        lambda config: sshd_value(config, "permitemptypasswords") == "yes",
        "sshd accepts empty passwords (PermitEmptyPasswords yes); expected no",
        "PermitEmptyPasswords yes",
        "PermitEmptyPasswords no",
        "gpuhost harden",
    ),
)


def check_sshd(ctx: AuditContext) -> RuleResult:
    rule = "ssh"
    sshd = ctx.facts.sshd
    if not sshd.available:
        return skip_result(
            rule, "sshd -T could not run (sshd not installed, or the audit is not root)"
        )
    config = sshd.config
    return result_with(
        rule,
        [
            Finding(
                sshd_rule.finding_id,
                sshd_rule.severity,
                sshd_rule.message,
                found=sshd_rule.found,
                expected=sshd_rule.expected,
                fix=sshd_rule.fix,
            )
            for sshd_rule in SSHD_RULES
            if sshd_rule.applies(config)
        ],
    )
