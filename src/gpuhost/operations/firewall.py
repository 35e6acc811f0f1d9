"""Operations for gpuhost's host firewall: one nftables table, ``inet gpuhost``, applied safely.

``ruleset`` loads a complete table with one ``nft -f`` (one transaction: all or nothing), after
``nft -c`` checked it, the previous table was saved and a dead-man timer on the host was armed to
load the saved table back. Only when a fresh SSH connection from the controller works is the timer
cancelled and the new table made persistent; if the connection fails the previous table is loaded
again at once. Other tables (Docker's, the distribution's) are never flushed or changed.

``persistence`` makes ``/etc/nftables.conf`` include gpuhost's file and enables nftables.service,
so that the table comes back after a reboot (the service is enabled, not started: starting it now
would run the distribution's ``flush ruleset`` and drop other tools' tables).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Generator, Sequence
from io import StringIO
from typing import Any

from pyinfra import host
from pyinfra.api import FileUploadCommand, operation

from gpuhost.facts.firewall import (
    APPLIED_LISTING,
    INCLUDE_LINE,
    NFTABLES_CONF,
    RULESET_PATH,
    STATE_DIR,
    TABLE_FAMILY,
    TABLE_NAME,
    FirewallState,
)
from gpuhost.firewall_roles import Accept
from gpuhost.operations.sshd import confirm_command, same_text

CANDIDATE = f"{STATE_DIR}/candidate.nft"
REVERT_FILE = f"{STATE_DIR}/revert.nft"
REVERT_UNIT = "gpuhost-firewall-revert"
DEFAULT_REVERT_SECONDS = 120
TABLE = f"{TABLE_FAMILY} {TABLE_NAME}"
RATE_RE = re.compile(r"^([1-9][0-9]*)/(second|minute|hour)$")
LISTING = f"nft -s -t list table {TABLE}"

HEADER = (
    "# Managed by gpuhost (gpuhost harden); local changes are overwritten.\n"
    "# Only the table inet gpuhost is defined here; other tables are left alone.\n"
)


def render_ruleset(
    ssh_ports: Sequence[int],
    ssh_sources: Sequence[str] = (),
    allow_tcp: Sequence[int] = (),
    allow_udp: Sequence[int] = (),
    ssh_rate_limit: str | None = None,
    role_rules: Sequence[Accept] = (),
) -> str:
    """The complete nftables file for gpuhost's table (pure; inputs are already validated).

    Inbound is denied by default; established/related traffic, loopback, the ICMP needed for a
    working network (and all ICMPv6, which IPv6 neighbour discovery needs), SSH (only from
    ``ssh_sources`` when given), the listed ports and the ``role_rules``
    (``firewall_roles.role_accepts``, each with the role as its comment) are accepted. Forwarded
    and outgoing traffic are not touched. The file first creates then deletes the table, so
    loading it replaces the table in one transaction whether or not it existed.
    """
    ports = ", ".join(str(p) for p in sorted(set(ssh_ports)))
    v4 = [s for s in ssh_sources if ipaddress.ip_network(s, strict=False).version == 4]
    v6 = [s for s in ssh_sources if ipaddress.ip_network(s, strict=False).version == 6]
    lines = [
        HEADER.rstrip("\n"),
        f"table {TABLE}",
        f"delete table {TABLE}",
        "",
        f"table {TABLE} {{",
    ]
    if ssh_rate_limit:
        for family, kind in (("v4", "ipv4_addr"), ("v6", "ipv6_addr")):
            lines += [
                f"    set ssh_rate_{family} {{",
                f"        type {kind}",
                "        size 65535",
                "        flags dynamic,timeout",
                "        timeout 1m",
                "    }",
                "",
            ]
    lines += [
        "    chain input {",
        "        type filter hook input priority filter; policy drop;",
        "        ct state established,related accept",
        "        ct state invalid drop",
        '        iifname "lo" accept',
        "        ip protocol icmp icmp type { echo-request, destination-unreachable, "
        "time-exceeded, parameter-problem } accept",
        # ICMPv6 by number: nft resolves names through /etc/protocols, absent without netbase
        "        meta l4proto 58 accept",
    ]
    if ssh_rate_limit:
        lines += [
            f"        tcp dport {{ {ports} }} ct state new "
            f"add @ssh_rate_v4 {{ ip saddr limit rate over {ssh_rate_limit} }} drop",
            f"        tcp dport {{ {ports} }} ct state new "
            f"add @ssh_rate_v6 {{ ip6 saddr limit rate over {ssh_rate_limit} }} drop",
        ]
    if ssh_sources:
        if v4:
            lines.append(f"        ip saddr {{ {', '.join(v4)} }} tcp dport {{ {ports} }} accept")
        if v6:
            lines.append(f"        ip6 saddr {{ {', '.join(v6)} }} tcp dport {{ {ports} }} accept")
    else:
        lines.append(f"        tcp dport {{ {ports} }} accept")
    if allow_tcp:
        tcp = ", ".join(str(p) for p in sorted(set(allow_tcp)))
        lines.append(f"        tcp dport {{ {tcp} }} accept")
    if allow_udp:
        udp = ", ".join(str(p) for p in sorted(set(allow_udp)))
        lines.append(f"        udp dport {{ {udp} }} accept")
    for rule in role_rules:
        lines += _accept_lines(rule)
    lines += ["    }", "}"]
    return "\n".join(lines) + "\n"


def _ports_text(ports: Sequence[tuple[int, int]]) -> str:
    return ", ".join(str(low) if low == high else f"{low}-{high}" for low, high in ports)


def _accept_lines(rule: Accept) -> list[str]:
    """``rule`` as nft lines (one per address family when it has sources)."""
    if rule.proto and rule.ports:
        match = f"{rule.proto} dport {{ {_ports_text(rule.ports)} }} "
    elif rule.proto:
        match = f"meta l4proto {rule.proto} "
    else:
        match = ""
    tail = f'{match}accept comment "{rule.why}"'
    if not rule.sources:
        return [f"        {tail}"]
    lines = []
    for family, version in (("ip", 4), ("ip6", 6)):
        nets = [s for s in rule.sources if ipaddress.ip_network(s, strict=False).version == version]
        if nets:
            lines.append(f"        {family} saddr {{ {', '.join(nets)} }} {tail}")
    return lines


def _stop_timer() -> str:
    return (
        f"systemctl stop {REVERT_UNIT}.timer >/dev/null 2>&1 || true; "
        f"systemctl reset-failed {REVERT_UNIT}.timer {REVERT_UNIT}.service >/dev/null 2>&1 || true"
    )


def apply_script(revert_seconds: int = DEFAULT_REVERT_SECONDS) -> str:
    """Check the uploaded candidate, save the live table, arm the revert timer, load atomically."""
    return "\n".join(
        [
            "set -e",
            f"if ! nft -c -f {CANDIDATE}; then "
            "echo 'gpuhost: nft rejected the new ruleset (see above); nothing was changed' >&2; "
            "exit 1; fi",
            # the revert file removes our table and loads the saved one (if there was one)
            f"{{ echo 'table {TABLE}'; echo 'delete table {TABLE}'; "
            f"{LISTING} 2>/dev/null || true; }} > {REVERT_FILE}",
            f"nft -c -f {REVERT_FILE}",
            _stop_timer(),
            f"systemd-run --quiet --unit={REVERT_UNIT} --timer-property=AccuracySec=1s "
            f"--on-active={int(revert_seconds)} "
            f'"$(command -v nft)" -f {REVERT_FILE}',
            f"if ! nft -f {CANDIDATE}; then {_stop_timer()}; "
            "echo 'gpuhost: loading the new ruleset failed; the previous one is still live' >&2; "
            "exit 1; fi",
        ]
    )


@operation()
def ruleset(
    content: str, revert_seconds: int = DEFAULT_REVERT_SECONDS
) -> Generator[Any, None, None]:
    """
    Make ``content`` (a complete ``table inet gpuhost`` file) the live and persisted table.

    + content: the nftables file, as ``render_ruleset`` makes it
    + revert_seconds: the dead-man timer loads the previous table back after this many seconds
      unless a fresh SSH connection confirmed the new one first

    Changes nothing when the persisted file equals ``content`` and the live table still equals
    the listing saved right after it was applied.

    **Example:**

    .. code:: python

        firewall.ruleset(name="Firewall", content=render_ruleset([22], allow_tcp=[9100]))
    """
    state = host.get_fact(FirewallState)
    live = state["live_table"]
    if (
        same_text(state["ruleset_file"], content)
        and live is not None
        and same_text(live, state["applied_listing"])
    ):
        host.noop(f"nftables table {TABLE} is already up to date")
        return
    yield f"mkdir -p -m 0700 {STATE_DIR} && mkdir -p /etc/gpuhost"
    yield FileUploadCommand(StringIO(content), CANDIDATE)
    yield apply_script(revert_seconds)
    yield confirm_command(
        "firewall",
        f"{_stop_timer()}; install -m 0644 {CANDIDATE} {RULESET_PATH} && "
        f"{LISTING} > {APPLIED_LISTING}",
        f"nft -f {REVERT_FILE}; {_stop_timer()}",
    )


@operation()
def persistence() -> Generator[Any, None, None]:
    """
    Load gpuhost's table at boot: include it from ``/etc/nftables.conf``, enable nftables.service.

    The include line is only added once gpuhost's ruleset file exists, after ``nft -c`` accepted the
    resulting nftables.conf.

    **Example:**

    .. code:: python

        firewall.persistence(name="Firewall survives reboots")
    """
    state = host.get_fact(FirewallState)
    if state["conf_includes_ruleset"] and state["service_enabled"]:
        host.noop(f"{NFTABLES_CONF} includes {RULESET_PATH} and nftables.service is enabled")
        return
    if not state["conf_includes_ruleset"]:
        new = f"{NFTABLES_CONF}.gpuhost-new"
        yield "\n".join(
            [
                "set -e",
                f"if [ ! -f {RULESET_PATH} ]; then echo 'gpuhost: {RULESET_PATH} is missing; "
                "apply the ruleset first' >&2; exit 1; fi",
                f"if [ -f {NFTABLES_CONF} ]; then cp -p {NFTABLES_CONF} {new}; "
                f"else echo '#!/usr/sbin/nft -f' > {new}; fi",
                f"printf '%s\\n' '# gpuhost firewall (gpuhost harden)' '{INCLUDE_LINE}' >> {new}",
                f"if ! nft -c -f {new}; then rm -f {new}; "
                f"echo 'gpuhost: nft rejected {NFTABLES_CONF} with the include; unchanged' >&2; "
                "exit 1; fi",
                f"chmod 0755 {new}; mv -f {new} {NFTABLES_CONF}",
            ]
        )
    if not state["service_enabled"]:
        yield "systemctl enable nftables.service"
