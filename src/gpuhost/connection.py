"""Why a host could not be reached, in one line, and SSH libraries kept off the terminal.

:func:`connect_cause` turns whatever connecting raised (pyinfra's ``ConnectError`` wraps the
paramiko/socket exception as its context) into the real cause: the name does not resolve, the
connection was refused or timed out, the port answers but does not speak SSH, authentication
failed, the host key does not match or is unknown, the private key file is missing. Every fleet
command (audit, provision, harden, upgrade) reports a host that way, as that host's result.

:func:`quiet_ssh_logs` stops paramiko's transport thread from printing its tracebacks (it logs
them at ERROR through ``paramiko.transport``, which Python's last-resort handler writes to the
terminal when nobody configured logging) and keeps pyinfra's logger to itself.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator, Mapping
from typing import Any

_QUIET = ("paramiko", "pyinfra")


def quiet_ssh_logs(loggers: tuple[str, ...] = _QUIET) -> None:
    """Send ``loggers`` nowhere unless the user configured logging for them."""
    for name in loggers:
        log = logging.getLogger(name)
        if not any(not isinstance(h, logging.NullHandler) for h in log.handlers):
            log.addHandler(logging.NullHandler())
            log.propagate = False


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


def connect_cause(exc: BaseException, data: Mapping[str, Any], name: str, timeout: float) -> str:
    """One line naming why ``name`` (with inventory ``data``) could not be connected to."""
    from paramiko.ssh_exception import (
        AuthenticationException,
        BadHostKeyException,
        NoValidConnectionsError,
        SSHException,
    )

    address = str(data.get("ssh_hostname") or name)
    port = data.get("ssh_port") or 22
    where = f"{address}:{port}"
    user = data.get("ssh_user")
    for error in _chain(exc):
        text = _first_line(error)
        if isinstance(error, socket.gaierror):
            return f"name does not resolve: {address} ({error.strerror or text})"
        if isinstance(error, NoValidConnectionsError):
            causes = list(error.errors.values())
            if causes and all(isinstance(c, ConnectionRefusedError) for c in causes):
                return f"connection refused: nothing listens on {where}"
            if causes and all(isinstance(c, (TimeoutError, socket.timeout)) for c in causes):
                return f"connection timed out: no answer from {where} within {timeout:g} s"
            return f"cannot connect to {where}: {text}"
        if isinstance(error, ConnectionRefusedError):
            return f"connection refused: nothing listens on {where}"
        if isinstance(error, (TimeoutError, socket.timeout)):
            return f"connection timed out: no answer from {where} within {timeout:g} s"
        if isinstance(error, BadHostKeyException):
            entry = address if port == 22 else f"[{address}]:{port}"
            return (
                f"host key mismatch: {where} presents another key than known_hosts records "
                f"(if the host was re-installed: ssh-keygen -R '{entry}')"
            )
        if isinstance(error, AuthenticationException):
            key = data.get("ssh_key")
            return (
                f"authentication failed on {where} as {user or 'the default user'}"
                f"{' with key ' + str(key) if key else ''} ({text})"
            )
        if isinstance(error, SSHException):
            if "banner" in text or "No existing session" in text:
                if any(isinstance(e, (EOFError, ConnectionResetError)) for e in _chain(error)):
                    return f"not SSH: {where} closed the connection without an SSH banner"
                return (
                    f"not SSH: {where} accepts TCP connections but sent no SSH banner "
                    f"within {timeout:g} s"
                )
            if "known_hosts" in text or "host key" in text.lower():
                return f"host key of {where} is not known ({text}); add it to known_hosts"
            return f"SSH error on {where}: {text}"
        if isinstance(error, EOFError):
            return f"not SSH: {where} closed the connection during the SSH handshake"
        if "No such private key file" in text or "Invalid key" in text:
            return f"ssh_key: {text}"
        if isinstance(error, OSError) and error.strerror:
            return f"cannot connect to {where}: {error.strerror}"
    text = _first_line(exc)
    return text if text != "No hosts remaining!" else f"could not connect to {where}"
