"""Parse ``sshd -T`` (the configuration sshd really uses) and answer questions about it.

One parser and one set of predicates for every user: the hardening fact and checks
(:mod:`gpuhost.facts.sshd`, ``checks/test_ssh.py``) and the audit (:mod:`gpuhost.facts.build`,
rule ``ssh``). Keywords are lower case, as ``sshd -T`` prints them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

KEYWORD_RE = re.compile(r"[a-z0-9]+")

#: what the audit keeps of ``sshd -T`` (``HostFacts.sshd.settings``, the report's ``facts.sshd``)
AUDIT_KEYWORDS = (
    "passwordauthentication",
    "kbdinteractiveauthentication",
    "challengeresponseauthentication",
    "permitrootlogin",
    "pubkeyauthentication",
    "permitemptypasswords",
    "ciphers",
    "port",
    "usepam",
)

SshdConfig = Mapping[str, Sequence[str]]


def parse_sshd_t(lines: Iterable[str]) -> dict[str, list[str]]:
    """``sshd -T`` output → {lower-case keyword: [value of each line]}.

    Keywords that sshd prints once give a one-item list (``{"passwordauthentication": ["no"]}``);
    repeated ones (``port``, ``hostkey``, ``listenaddress``, ``subsystem``) keep every line in
    order.
    Lines that are not ``keyword value`` pairs (warnings) are ignored.
    """
    config: dict[str, list[str]] = {}
    for raw in lines:
        line = raw.strip()
        if not line or " " not in line:
            continue
        keyword, value = line.split(" ", 1)
        if not KEYWORD_RE.fullmatch(keyword):
            continue
        config.setdefault(keyword, []).append(value.strip())
    return config


def sshd_value(config: SshdConfig, keyword: str, default: str = "") -> str:
    """The first value of ``keyword`` (lower-case) in a parsed ``sshd -T``, or ``default``."""
    values = config.get(keyword.lower())
    return values[0] if values else default


def audit_settings(config: SshdConfig) -> dict[str, str]:
    """The :data:`AUDIT_KEYWORDS` of a parsed ``sshd -T`` → {keyword: value}; for a keyword
    printed more than once (``port``), the last line."""
    return {key: config[key][-1] for key in AUDIT_KEYWORDS if config.get(key)}


def permit_root_login(config: SshdConfig) -> str:
    """PermitRootLogin of a parsed ``sshd -T``, with sshd's old spelling normalised.

    OpenSSH 9.2's ``sshd -T`` prints ``without-password`` for ``prohibit-password``.
    """
    value = sshd_value(config, "permitrootlogin", "prohibit-password")
    return "prohibit-password" if value == "without-password" else value


def password_authentication(config: SshdConfig) -> bool:
    """PasswordAuthentication is on."""
    return sshd_value(config, "passwordauthentication") == "yes"


def keyboard_interactive_password(config: SshdConfig) -> bool:
    """Keyboard-interactive logins ask for the account password: KbdInteractiveAuthentication
    (ChallengeResponseAuthentication before OpenSSH 8.7) on, with UsePAM on.

    On Linux keyboard-interactive has no other backend than PAM, and Debian's PAM stack asks for
    the account password.
    """
    kbd = sshd_value(config, "kbdinteractiveauthentication") or sshd_value(
        config, "challengeresponseauthentication"
    )
    return kbd == "yes" and sshd_value(config, "usepam") == "yes"


def password_login_allowed(config: SshdConfig) -> bool:
    """Can anyone log in with a password? (PasswordAuthentication, or keyboard-interactive through
    PAM: :func:`keyboard_interactive_password`.)"""
    return password_authentication(config) or keyboard_interactive_password(config)
