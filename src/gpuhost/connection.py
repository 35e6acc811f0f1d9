"""Why a host could not be reached, in one line, and SSH libraries kept off the terminal.

:func:`connect_cause` turns whatever connecting raised (pyinfra's ``ConnectError`` wraps the
paramiko/socket exception as its context) into the real cause: the name does not resolve, the
connection was refused or timed out, the port answers but does not speak SSH, authentication
failed, the host key does not match or is unknown, the private key file is missing. Every fleet
command (audit, provision, harden, upgrade) reports a host that way, as that host's result.
:func:`openssh_cause` gives the same lines for the OpenSSH client's stderr (``gpuhost check``:
testinfra connects with ``ssh``). The wording of every cause is in one table, ``CAUSES``.

:func:`quiet_ssh_logs` stops paramiko's transport thread from printing its tracebacks (it logs
them at ERROR through ``paramiko.transport``, which Python's last-resort handler writes to the
terminal when nobody configured logging) and keeps pyinfra's logger to itself.
"""

from __future__ import annotations

import errno
import logging
import re
import socket
from collections.abc import Iterator, Mapping
from typing import Any

from gpuhost.redaction import redact_secrets

_QUIET = ("paramiko", "pyinfra")


def quiet_ssh_logs(loggers: tuple[str, ...] = _QUIET) -> None:
    """Send ``loggers`` nowhere unless the user configured logging for them."""
    for name in loggers:
        log = logging.getLogger(name)
        if not any(not isinstance(h, logging.NullHandler) for h in log.handlers):
            log.addHandler(logging.NullHandler())
            log.propagate = False


class RedactSecrets(logging.Filter):
    """A handler filter: a record whose message holds a secret (a secret pair, or a value
    ``gpuhost.redaction`` was given) is written with it hidden."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            try:
                message = record.getMessage()
            except (TypeError, ValueError):  # a malformed record: leave it to the handler
                return True
            redacted = redact_secrets(message)
            if redacted != message:
                record.msg, record.args = redacted, None
        return True


def redact_secret_logs(loggers: tuple[str, ...] = (*_QUIET, "")) -> None:
    """Every handler of ``loggers`` (and the root logger) hides secrets (``RedactSecrets``):
    ``-v`` shows pyinfra's debug lines, never the inventory's ssh_password."""
    for name in loggers:
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, RedactSecrets) for f in handler.filters):
                handler.addFilter(RedactSecrets())


# Every cause a connection can fail with, as one line; filled in by _Target.say.
CAUSES = {
    "dns": "name does not resolve: {address} ({reason})",
    "refused": "connection refused: nothing listens on {where}",
    "timeout": "connection timed out: no answer from {where} within {timeout}",
    "no-route": (
        "no route to {where}: {reason} (is the host up, the address right, and no blackhole, "
        "prohibit or firewall rule in the way?)"
    ),
    "closed": "not SSH: {where} closed the connection without an SSH banner",
    "silent": "not SSH: {where} accepts TCP connections but sent no SSH banner within {timeout}",
    "handshake": "not SSH: {where} closed the connection during the SSH handshake",
    "host-key-mismatch": (
        "host key mismatch: {where} presents another key than known_hosts records "
        "(if the host was re-installed: ssh-keygen -R '{entry}')"
    ),
    "host-key-unknown": "host key of {where} is not known ({reason}); add it to known_hosts",
    "host-key-save": (
        "cannot save the host key of {where} to {reason}: create the folder "
        "(mkdir -m 700 ~/.ssh) or set ssh_known_hosts_file"
    ),
    "auth": "authentication failed on {where} as {user}{key} ({reason})",
    "key-file": "ssh_key: {reason}",
    "ssh": "SSH error on {where}: {reason}",
    "other": "cannot connect to {where}: {reason}",
}

# OpenSSH client stderr -> cause, first match wins (a host key mismatch also says "Host key
# verification failed"; a silent port says "Connection timed out during banner exchange").
OPENSSH_MESSAGES = (
    ("Could not resolve hostname", "dns"),
    ("REMOTE HOST IDENTIFICATION HAS CHANGED", "host-key-mismatch"),
    ("Host key verification failed", "host-key-unknown"),
    ("Permission denied (", "auth"),
    ("Too many authentication failures", "auth"),
    ("Connection refused", "refused"),
    ("No route to host", "no-route"),
    ("Network is unreachable", "no-route"),
    ("timed out during banner exchange", "silent"),
    ("Connection timed out", "timeout"),
    ("Operation timed out", "timeout"),
    ("kex_exchange_identification", "closed"),
    ("Connection closed by", "closed"),
    ("Connection reset by", "closed"),
)


class _Target:
    """Where a connection went (from inventory data), to fill in ``CAUSES``."""

    def __init__(self, data: Mapping[str, Any], name: str, timeout: str) -> None:
        self.address = str(data.get("ssh_hostname") or name)
        self.port = data.get("ssh_port") or 22
        self.user = data.get("ssh_user")
        self.key = data.get("ssh_key")
        self.timeout = timeout

    def say(self, cause: str, reason: str = "") -> str:
        where = f"{self.address}:{self.port}"
        return CAUSES[cause].format(
            address=self.address,
            where=where,
            entry=self.address if self.port == 22 else f"[{self.address}]:{self.port}",
            user=self.user or "the default user",
            key=f" with key {self.key}" if self.key else "",
            timeout=self.timeout,
            reason=reason,
        )


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


#: what connect() fails with when the kernel has no way to the address: EHOSTUNREACH (no ARP
#: answer on the local network, an ICMP host unreachable, an 'unreachable' route), ENETUNREACH
#: (no route at all), EINVAL (a 'blackhole' route), EACCES (a 'prohibit' route)
NO_ROUTE_ERRNOS = (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EINVAL, errno.EACCES)
# OpenSSH's line for those: 'ssh: connect to host H port P: Invalid argument'
_OPENSSH_CONNECT_RE = re.compile(
    r"connect to host \S+ port \d+: (No route to host|Network is unreachable|Invalid argument"
    r"|Permission denied)$"
)


def _no_route(error: BaseException) -> bool:
    """The kernel found no way to the address (``NO_ROUTE_ERRNOS``)."""
    return isinstance(error, OSError) and error.errno in NO_ROUTE_ERRNOS


def connect_cause(exc: BaseException, data: Mapping[str, Any], name: str, timeout: float) -> str:
    """One line naming why ``name`` (with inventory ``data``) could not be connected to."""
    from paramiko.ssh_exception import (
        AuthenticationException,
        BadHostKeyException,
        NoValidConnectionsError,
        SSHException,
    )

    target = _Target(data, name, f"{timeout:g} s")
    for error in _chain(exc):
        text = _first_line(error)
        if isinstance(error, socket.gaierror):
            return target.say("dns", error.strerror or text)
        if isinstance(error, NoValidConnectionsError):
            causes = list(error.errors.values())
            if causes and all(isinstance(c, ConnectionRefusedError) for c in causes):
                return target.say("refused")
            if causes and all(isinstance(c, (TimeoutError, socket.timeout)) for c in causes):
                return target.say("timeout")
            if causes and all(_no_route(c) for c in causes):
                return target.say("no-route", str(getattr(causes[0], "strerror", "")))
            known = [c.strerror for c in causes if isinstance(c, OSError) and c.strerror]
            return target.say("other", known[0] if known else text)  # not '[Errno None] ...'
        if isinstance(error, ConnectionRefusedError):
            return target.say("refused")
        if isinstance(error, (TimeoutError, socket.timeout)):
            return target.say("timeout")
        if _no_route(error):
            return target.say("no-route", str(getattr(error, "strerror", "")))
        if isinstance(error, BadHostKeyException):
            return target.say("host-key-mismatch")
        if isinstance(error, AuthenticationException):
            return target.say("auth", text)
        if isinstance(error, SSHException):
            if "banner" in text or "No existing session" in text:
                if any(isinstance(e, (EOFError, ConnectionResetError)) for e in _chain(error)):
                    return target.say("closed")
                return target.say("silent")
            if "known_hosts" in text or "host key" in text.lower():
                return target.say("host-key-unknown", text)
            return target.say("ssh", text)
        if isinstance(error, EOFError):
            return target.say("handshake")
        if "No such private key file" in text or "Invalid key" in text:
            return target.say("key-file", text)
        if isinstance(error, OSError) and "known_hosts" in str(error.filename or ""):
            # pyinfra accepted a new host key and could not append it (no ~/.ssh folder)
            return target.say("host-key-save", f"{error.filename} ({error.strerror})")
        if isinstance(error, OSError) and error.strerror:
            return target.say("other", error.strerror)
    text = _first_line(exc)
    return (
        text
        if text != "No hosts remaining!"
        else f"could not connect to {target.address}:{target.port}"
    )


def _openssh_lines(stderr: str) -> list[str]:
    lines = [line.strip().strip("@").strip() for line in stderr.splitlines()]
    return [line for line in lines if line and not line.startswith("Warning: Permanently added")]


def openssh_cause(stderr: str, data: Mapping[str, Any], name: str) -> str | None:
    """The cause in ``CAUSES`` for the OpenSSH client's ``stderr`` after it failed to connect to
    ``name`` (with inventory ``data``); None when the message is none of ``OPENSSH_MESSAGES``."""
    connect_timeout = data.get("ssh_connect_timeout")
    timeout = f"{float(connect_timeout):g} s" if connect_timeout else "the TCP connect timeout"
    target = _Target(data, name, timeout)
    lines = _openssh_lines(stderr)
    for line in lines:
        routed = _OPENSSH_CONNECT_RE.search(line)
        if routed:  # before the table: 'Permission denied' here is a prohibit route, not auth
            return target.say("no-route", routed.group(1))
    for needle, cause in OPENSSH_MESSAGES:
        hit = next((line for line in lines if needle in line), None)
        if hit is None:
            continue
        if cause == "dns":  # ssh: Could not resolve hostname NAME: Name or service not known
            return target.say(cause, hit.rsplit(": ", 1)[-1].rstrip("."))
        if cause == "auth":  # USER@HOST: Permission denied (publickey,password).
            found = re.search(r"Permission denied \([^)]*\)|Too many authentication failures", hit)
            return target.say(cause, found.group(0) if found else hit)
        if cause == "no-route":  # ssh: connect to host H port P: No route to host
            return target.say(cause, hit.rsplit(": ", 1)[-1])
        if cause == "host-key-unknown":  # the line before: No ED25519 host key is known for ...
            others = [line for line in lines if needle not in line]
            return target.say(cause, others[0] if others else hit)
        return target.say(cause)
    return None
