"""Firewall roles (``data/firewall_roles.yaml``) and the accept rules a host's firewall will have.

Pure: the roles table is loaded and checked once; ``base_accepts`` (SSH, listed ports) and
``role_accepts`` (chosen roles, cluster subnets) give the ``Accept`` rules that
``operations.firewall.render_ruleset`` writes; ``uncovered_listeners`` tells which TCP ports a
service listens on now that those rules would cut, with the roles that would admit each;
``firewall_requested`` says whether a host's data asks for the firewall at all.

.. code:: python

    roles = load_roles()
    accepts = base_accepts([22]) + role_accepts([roles["slurm-compute"]], ["10.0.0.0/16"])
    cut = uncovered_listeners(listeners, accepts, roles)   # [] -> safe to apply
"""

from __future__ import annotations

import difflib
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

from gpuhost.datafiles import load_yaml, yaml_problem
from gpuhost.errors import ConfigError
from gpuhost.parsers.listening import Listener

ROLES_FILE = "firewall_roles.yaml"
PortRange = tuple[int, int]


@dataclass(frozen=True)
class Role:
    name: str
    description: str
    tcp: tuple[PortRange, ...] = ()
    udp: tuple[PortRange, ...] = ()
    all_from_cluster: bool = False
    source: str = ""


@dataclass(frozen=True)
class Accept:
    """One accept rule of the input chain: ``proto`` None with no ports = every packet."""

    why: str  # "ssh", "gpuhost_firewall_allow_tcp", "role slurm-compute"
    proto: str | None
    ports: tuple[PortRange, ...] = ()
    sources: tuple[str, ...] = ()  # empty: from anywhere

    def admits(self, proto: str, port: int) -> bool:
        if self.proto is None and not self.ports:
            return True
        return self.proto == proto and any(low <= port <= high for low, high in self.ports)


def _port_range(value: Any) -> PortRange | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, value) if 1 <= value <= 65535 else None
    if isinstance(value, str) and value.count("-") == 1:
        low_text, high_text = value.split("-")
        if low_text.isdigit() and high_text.isdigit():
            low, high = int(low_text), int(high_text)
            if 1 <= low <= high <= 65535:
                return (low, high)
    return None


def parse_roles(text: str, source: str = f"gpuhost/data/{ROLES_FILE}") -> dict[str, Role]:
    """The roles of a roles file; ConfigError naming every bad field (``roles.x.tcp[1]: ...``)."""
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {yaml_problem(exc)}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("roles"), dict):
        raise ConfigError(f"{source}: expected a mapping with 'roles: {{name: {{...}}}}'")
    problems: list[str] = []
    roles: dict[str, Role] = {}
    for name, body in data["roles"].items():
        where = f"roles.{name}"
        if not isinstance(body, dict):
            problems.append(f"{where}: expected a mapping, found {type(body).__name__}")
            continue
        unknown = set(body) - {"description", "tcp", "udp", "all_from_cluster", "source"}
        if unknown:
            problems.append(f"{where}: unknown fields {', '.join(sorted(map(str, unknown)))}")
        ports: dict[str, tuple[PortRange, ...]] = {}
        for proto in ("tcp", "udp"):
            values = body.get(proto) or []
            if not isinstance(values, list):
                problems.append(f"{where}.{proto}: expected a list, found {values!r}")
                values = []
            parsed = []
            for index, value in enumerate(values):
                port = _port_range(value)
                if port is None:
                    problems.append(
                        f"{where}.{proto}[{index}]: expected a port 1-65535 or 'FIRST-LAST', "
                        f"found {value!r}"
                    )
                else:
                    parsed.append(port)
            ports[proto] = tuple(parsed)
        everything = body.get("all_from_cluster", False)
        if not isinstance(everything, bool):
            problems.append(
                f"{where}.all_from_cluster: expected true or false, found {everything!r}"
            )
        if not (ports["tcp"] or ports["udp"] or everything is True):
            problems.append(f"{where}: admits nothing (no tcp, udp or all_from_cluster)")
        roles[str(name)] = Role(
            name=str(name),
            description=str(body.get("description", "")).strip(),
            tcp=ports["tcp"],
            udp=ports["udp"],
            all_from_cluster=everything is True,
            source=str(body.get("source", "")),
        )
    if problems:
        raise ConfigError(f"{source}: " + "; ".join(problems))
    return roles


@cache
def load_roles() -> Mapping[str, Role]:
    """The built-in roles table (checked)."""
    return parse_roles(resources.files("gpuhost.data").joinpath(ROLES_FILE).read_text())


def unknown_roles_problem(names: Sequence[str]) -> str | None:
    """The problem line for role names the built-in table lacks (None: all known)."""
    table = load_roles()
    unknown = [name for name in names if name not in table]
    if not unknown:
        return None
    hints = []
    for name in unknown:
        near = difflib.get_close_matches(name, sorted(table), n=1)
        hints.append(f"{name!r} (did you mean {near[0]!r}?)" if near else repr(name))
    return (
        f"gpuhost_firewall_roles: unknown role {', '.join(hints)} "
        f"(known: {', '.join(sorted(table))})"
    )


def network_problem(key: str, network: str) -> str | None:
    """The problem line when ``network`` is not an address or network (None: it is)."""
    try:
        loose = ipaddress.ip_network(network, strict=False)
    except ValueError:
        return (
            f"{key}: {network!r} is not an address or network "
            "(expected e.g. '10.0.0.0/8' or '2001:db8::/32')"
        )
    try:
        ipaddress.ip_network(network)
    except ValueError:  # '10.0.0.1/8': host bits set, the operator meant one or the other
        return (
            f"{key}: {network!r} has host bits set (expected a network such as '{loose}', or "
            "a single address without a prefix)"
        )
    return None


def base_accepts(
    ssh_ports: Sequence[int],
    ssh_sources: Sequence[str] = (),
    allow_tcp: Sequence[int] = (),
    allow_udp: Sequence[int] = (),
) -> list[Accept]:
    """The accept rules for SSH and the listed ports (``gpuhost_firewall_allow_*``)."""
    accepts = [
        Accept("ssh", "tcp", tuple((p, p) for p in sorted(set(ssh_ports))), tuple(ssh_sources))
    ]
    if allow_tcp:
        ports = tuple((p, p) for p in sorted(set(allow_tcp)))
        accepts.append(Accept("gpuhost_firewall_allow_tcp", "tcp", ports))
    if allow_udp:
        ports = tuple((p, p) for p in sorted(set(allow_udp)))
        accepts.append(Accept("gpuhost_firewall_allow_udp", "udp", ports))
    return accepts


def role_accepts(roles: Sequence[Role], cluster: Sequence[str] = ()) -> list[Accept]:
    """The accept rules of ``roles``: their ports from ``cluster`` when given, else from
    anywhere; an ``all_from_cluster`` role needs ``cluster`` (ConfigError otherwise)."""
    accepts = []
    for role in roles:
        why = f"role {role.name}"
        if role.all_from_cluster:
            if not cluster:
                raise ConfigError(
                    f"gpuhost_firewall_roles: {role.name} accepts all traffic from the cluster "
                    "subnets, but gpuhost_firewall_cluster_subnets is empty (expected e.g. "
                    "['10.20.0.0/16'])"
                )
            accepts.append(Accept(why, None, (), tuple(cluster)))
        if role.tcp:
            accepts.append(Accept(why, "tcp", role.tcp, tuple(cluster)))
        if role.udp:
            accepts.append(Accept(why, "udp", role.udp, tuple(cluster)))
    return accepts


def roles_admitting(roles: Mapping[str, Role], proto: str, port: int) -> list[str]:
    """Names of the roles whose own ports include ``proto``/``port`` (not cluster-fabric's)."""
    return [
        role.name
        for role in roles.values()
        if any(low <= port <= high for low, high in (role.tcp if proto == "tcp" else role.udp))
    ]


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def uncovered_listeners(
    listeners: Sequence[Listener],
    accepts: Sequence[Accept],
    roles: Mapping[str, Role],
    closed: Sequence[int] = (),
) -> list[str]:
    """One problem per TCP port a non-loopback listener has that no accept rule admits (ports in
    ``closed`` are cut on purpose).

    UDP sockets are not judged: ``ss -lu`` lists every bound UDP socket, DHCP and mDNS clients
    included, whose replies pass as established traffic or through packet sockets."""
    problems: list[str] = []
    seen: set[int] = set()
    for listener in sorted(listeners, key=lambda item: item.port):
        if listener.proto != "tcp" or listener.port in seen or listener.port in closed:
            continue
        if _loopback(listener.address):
            continue
        if any(accept.admits("tcp", listener.port) for accept in accepts):
            continue
        seen.add(listener.port)
        names = ", ".join(listener.processes) or "a kernel socket (no process)"
        admitting = roles_admitting(roles, "tcp", listener.port)
        fix = (
            f"add role {' or '.join(admitting)} to gpuhost_firewall_roles"
            if admitting
            else f"add {listener.port} to gpuhost_firewall_allow_tcp"
        )
        problems.append(
            f"{names} listens on tcp port {listener.port} ({listener.address}) and the new "
            f"firewall would drop it: {fix} (or {listener.port} to gpuhost_firewall_closed_tcp "
            "to cut it on purpose)"
        )
    return problems


#: inventory data that only means something with a firewall: setting any of it asks for one
FIREWALL_ASKING_KEYS = (
    "gpuhost_firewall_roles",
    "gpuhost_firewall_allow_tcp",
    "gpuhost_firewall_allow_udp",
    "gpuhost_firewall_ssh_sources",
    "gpuhost_ssh_rate_limit",
)


def firewall_requested(data: Mapping[str, Any]) -> bool:
    """Does this host get gpuhost's default-deny firewall? ``gpuhost_firewall_enabled`` true or
    false decides; unset, only when roles, open ports, SSH sources or an SSH rate limit are
    given (a bare provision or harden never starts dropping traffic)."""
    enabled = data.get("gpuhost_firewall_enabled")
    if isinstance(enabled, bool):
        return enabled
    return any(data.get(key) for key in FIREWALL_ASKING_KEYS)
