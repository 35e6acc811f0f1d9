"""Harden SSH and the host firewall without ever locking the operator out.

Deploys (use them from a pyinfra deploy file or through ``gpuhost harden``):

- ``harden()``           both of the below, with every lockout check done before any change
- ``harden_ssh()``       authorized keys, then the sshd drop-in (validated, reloaded, confirmed)
- ``harden_firewall()``  the ``inet gpuhost`` nftables table (atomic, auto-revert, persistent),
  only when asked for (``gpuhost_firewall_enabled``, roles, ports, sources: ``firewall_requested``)

Inventory data (all optional; defaults in ``DEFAULTS``), read and checked by ``read_settings``.
Lockout checks (``lockout_problems``) run on facts before any operation is added, so a host that
would lock its operator out is refused with a ``DeployError`` that says what to add, unchanged;
so is a firewall that would cut a TCP port a service listens on now (``firewall_problems``).
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyinfra import host
from pyinfra.api import deploy

from gpuhost.errors import ConfigError, DeployError
from gpuhost.facts.firewall import RULESET_PATH
from gpuhost.facts.listening import ListeningSockets
from gpuhost.facts.sshd import (
    AuthorizedKeys,
    SshdEffectiveConfig,
    SshSession,
    UserKeysDict,
    parse_authorized_key,
)
from gpuhost.firewall_roles import (
    Accept,
    Role,
    base_accepts,
    firewall_requested,
    load_roles,
    network_problem,
    role_accepts,
    uncovered_listeners,
    unknown_roles_problem,
)
from gpuhost.operations import firewall, packages, sshd
from gpuhost.operations.firewall import RATE_RE, render_ruleset
from gpuhost.operations.sshd import load_policy, render_dropin
from gpuhost.parsers.listening import Listener
from gpuhost.pyinfra_adapter import is_ssh_host

DEFAULTS: dict[str, Any] = {
    "gpuhost_ssh_permit_root_login": "prohibit-password",
    "gpuhost_ssh_max_auth_tries": 3,
    "gpuhost_ssh_login_grace_time": 30,
    "gpuhost_ssh_allow_users": [],
    "gpuhost_ssh_allow_groups": [],
    "gpuhost_ssh_authorized_keys": {},
    "gpuhost_ssh_remove_unlisted_keys": False,
    "gpuhost_ssh_extra_config": [],
    "gpuhost_ssh_rate_limit": None,
    "gpuhost_ssh_revert_seconds": 120,
    "gpuhost_firewall_enabled": None,  # None: on only when roles/ports/sources are given
    "gpuhost_firewall_allow_tcp": [],
    "gpuhost_firewall_allow_udp": [],
    "gpuhost_firewall_ssh_sources": [],
    "gpuhost_firewall_roles": [],
    "gpuhost_firewall_cluster_subnets": [],
    "gpuhost_firewall_closed_tcp": [],
}
ROOT_LOGIN_VALUES = ("prohibit-password", "no")
_USER_RE = re.compile(r"^[A-Za-z0-9_.*?][A-Za-z0-9_.*?@-]*$")
# key types each accepted signature algorithm allows in authorized_keys
_RSA_ALGORITHMS = {"rsa-sha2-256", "rsa-sha2-512"}


@dataclass(frozen=True)
class HardenSettings:
    permit_root_login: str = "prohibit-password"
    max_auth_tries: int = 3
    login_grace_time: int = 30
    allow_users: tuple[str, ...] = ()
    allow_groups: tuple[str, ...] = ()
    authorized_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    remove_unlisted_keys: bool = False
    extra_config: tuple[str, ...] = ()
    rate_limit: str | None = None
    revert_seconds: int = 120
    firewall_enabled: bool = False
    allow_tcp: tuple[int, ...] = ()
    allow_udp: tuple[int, ...] = ()
    ssh_sources: tuple[str, ...] = ()
    roles: tuple[Role, ...] = ()
    cluster_subnets: tuple[str, ...] = ()
    closed_tcp: tuple[int, ...] = ()

    def role_rules(self) -> list[Accept]:
        return role_accepts(self.roles, self.cluster_subnets)


def _str_list(host_name: str, key: str, value: Any, problems: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        problems.append(f"{key}: expected a list of strings, found {value!r}")
        return ()
    return tuple(value)


def _ports(key: str, value: Any, problems: list[str]) -> tuple[int, ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 65535 for v in value
    ):
        problems.append(f"{key}: expected a list of port numbers 1-65535, found {value!r}")
        return ()
    return tuple(value)


def _positive_int(key: str, value: Any, problems: list[str], default: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    problems.append(f"{key}: expected a positive integer, found {value!r}")
    return default


def _networks(key: str, get: Callable[[str], Any], problems: list[str]) -> tuple[str, ...]:
    networks = _str_list("", key, get(key), problems)
    problems += [p for p in (network_problem(key, n) for n in networks) if p]
    return networks


def _roles(value: Any, problems: list[str]) -> tuple[Role, ...]:
    names = _str_list("", "gpuhost_firewall_roles", value, problems)
    table = load_roles()
    unknown = unknown_roles_problem(names)
    if unknown:
        problems.append(unknown)
    return tuple(table[name] for name in dict.fromkeys(names) if name in table)


def _root_login(value: Any, problems: list[str]) -> str:
    if value not in ROOT_LOGIN_VALUES:
        problems.append(
            f"gpuhost_ssh_permit_root_login: expected one of {', '.join(ROOT_LOGIN_VALUES)}, "
            f"found {value!r}"
        )
    return str(value)


def _allow_users(host_name: str, value: Any, problems: list[str]) -> tuple[str, ...]:
    allow_users = _str_list(host_name, "gpuhost_ssh_allow_users", value, problems)
    for name in allow_users:
        if not _USER_RE.match(name):
            problems.append(f"gpuhost_ssh_allow_users: {name!r} is not a user name or pattern")
    return allow_users


def _authorized_keys(host_name: str, value: Any, problems: list[str]) -> dict[str, tuple[str, ...]]:
    keys: dict[str, tuple[str, ...]] = {}
    if not isinstance(value, Mapping):
        problems.append(
            "gpuhost_ssh_authorized_keys: expected a mapping {user: [public key lines]}, "
            f"found {type(value).__name__}"
        )
        return keys
    for user, user_keys in value.items():
        listed = _str_list(host_name, f"gpuhost_ssh_authorized_keys[{user!r}]", user_keys, problems)
        for index, line in enumerate(listed):
            if parse_authorized_key(line) is None:
                problems.append(
                    f"gpuhost_ssh_authorized_keys[{user!r}][{index}]: expected an OpenSSH "
                    f"public key line like 'ssh-ed25519 AAAA... comment', found {line[:50]!r}"
                )
        keys[str(user)] = listed
    return keys


def _rate_limit(value: Any, problems: list[str]) -> str | None:
    if value is not None and not (isinstance(value, str) and RATE_RE.match(value)):
        problems.append(
            f"gpuhost_ssh_rate_limit: expected 'N/second', 'N/minute' or 'N/hour', found {value!r}"
        )
        return None
    return value


def _cluster_roles_problem(roles: tuple[Role, ...], cluster: tuple[str, ...]) -> str | None:
    """A role accepting all traffic from the cluster subnets, and no cluster subnet named."""
    if any(role.all_from_cluster for role in roles) and not cluster:
        return (
            "gpuhost_firewall_cluster_subnets: empty, but role "
            + ", ".join(role.name for role in roles if role.all_from_cluster)
            + " accepts all traffic from the cluster subnets (expected e.g. ['10.20.0.0/16'])"
        )
    return None


def _flags(get: Callable[[str], Any], problems: list[str]) -> dict[str, Any]:
    flags = {}
    for key in ("gpuhost_ssh_remove_unlisted_keys", "gpuhost_firewall_enabled"):
        flags[key] = get(key)
        if not isinstance(flags[key], bool) and not (
            key == "gpuhost_firewall_enabled" and flags[key] is None
        ):
            problems.append(f"{key}: expected true or false, found {flags[key]!r}")
    return flags


def read_settings(host_name: str, data: Mapping[str, Any]) -> HardenSettings:
    """Check the ``gpuhost_ssh_*`` / ``gpuhost_firewall_*`` inventory data of one host.

    Raises ConfigError listing every bad key with what was found and what is expected.
    """

    def get(key: str) -> Any:
        value = data.get(key)
        return DEFAULTS[key] if value is None else value

    # every reader appends its problems in this order (the error lists them as found)
    problems: list[str] = []
    root = _root_login(get("gpuhost_ssh_permit_root_login"), problems)
    allow_users = _allow_users(host_name, get("gpuhost_ssh_allow_users"), problems)
    allow_groups = _str_list(
        host_name, "gpuhost_ssh_allow_groups", get("gpuhost_ssh_allow_groups"), problems
    )
    keys = _authorized_keys(host_name, get("gpuhost_ssh_authorized_keys"), problems)
    extra = _str_list(
        host_name, "gpuhost_ssh_extra_config", get("gpuhost_ssh_extra_config"), problems
    )
    rate = _rate_limit(get("gpuhost_ssh_rate_limit"), problems)
    sources = _networks("gpuhost_firewall_ssh_sources", get, problems)
    cluster = _networks("gpuhost_firewall_cluster_subnets", get, problems)
    roles = _roles(get("gpuhost_firewall_roles"), problems)
    problems += [p for p in [_cluster_roles_problem(roles, cluster)] if p]
    flags = _flags(get, problems)
    settings = HardenSettings(
        permit_root_login=root,
        max_auth_tries=_positive_int(
            "gpuhost_ssh_max_auth_tries", get("gpuhost_ssh_max_auth_tries"), problems, 3
        ),
        login_grace_time=_positive_int(
            "gpuhost_ssh_login_grace_time", get("gpuhost_ssh_login_grace_time"), problems, 30
        ),
        allow_users=allow_users,
        allow_groups=allow_groups,
        authorized_keys=keys,
        remove_unlisted_keys=flags["gpuhost_ssh_remove_unlisted_keys"] is True,
        extra_config=extra,
        rate_limit=rate,
        revert_seconds=_positive_int(
            "gpuhost_ssh_revert_seconds", get("gpuhost_ssh_revert_seconds"), problems, 120
        ),
        firewall_enabled=firewall_requested({key: get(key) for key in DEFAULTS}),
        allow_tcp=_ports("gpuhost_firewall_allow_tcp", get("gpuhost_firewall_allow_tcp"), problems),
        allow_udp=_ports("gpuhost_firewall_allow_udp", get("gpuhost_firewall_allow_udp"), problems),
        ssh_sources=sources,
        roles=roles,
        cluster_subnets=cluster,
        closed_tcp=_ports(
            "gpuhost_firewall_closed_tcp", get("gpuhost_firewall_closed_tcp"), problems
        ),
    )
    if problems:
        raise ConfigError(f"inventory data of host {host_name}: " + "; ".join(problems))
    return settings


# --- lockout checks (pure) ----------------------------------------------------------------------


def key_type_accepted(key_type: str, accepted: Sequence[str]) -> bool:
    """Can a key of ``key_type`` log in when sshd accepts the signature ``accepted``?"""
    if key_type == "ssh-rsa":
        return bool(_RSA_ALGORITHMS & set(accepted))
    if key_type == "ssh-rsa-cert-v01@openssh.com":
        return any(
            a.startswith("rsa-sha2-") and a.endswith("-cert-v01@openssh.com") for a in accepted
        )
    return key_type in accepted


def _user_allowed(user: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(user, pattern.split("@", 1)[0]) for pattern in patterns)


def _login_user_problems(
    login_user: str, settings: HardenSettings, users: Mapping[str, UserKeysDict]
) -> list[str]:
    """Root login, AllowUsers and AllowGroups that would shut out pyinfra's own login."""
    problems: list[str] = []
    if login_user == "root" and settings.permit_root_login == "no":
        problems.append(
            "pyinfra logs in as root but gpuhost_ssh_permit_root_login is 'no': log in as a "
            "user with sudo (ssh_user + _sudo=True) or use 'prohibit-password'"
        )
    if settings.allow_users and not _user_allowed(login_user, settings.allow_users):
        problems.append(
            f"gpuhost_ssh_allow_users does not include {login_user!r}, the user pyinfra logs in "
            f"as: add {login_user!r} to it"
        )
    if settings.allow_groups:
        login_facts = users.get(login_user)
        groups = set(login_facts["groups"] if login_facts else [])
        if not groups & set(settings.allow_groups):
            problems.append(
                f"user {login_user!r} is in none of gpuhost_ssh_allow_groups "
                f"({', '.join(settings.allow_groups)}): add one of its groups "
                f"({', '.join(sorted(groups)) or 'none found'}) or the user to a listed group"
            )
    return problems


def _key_problem(
    user: str,
    login_user: str,
    settings: HardenSettings,
    facts: UserKeysDict | None,
    accepted_key_types: Sequence[str],
) -> str | None:
    """Why ``user`` could not log in with a key once passwords are off; None when it can."""
    if facts is None or not facts["exists"]:
        return (
            f"user {user!r} does not exist on the host (listed in gpuhost_ssh_allow_users)"
            if user != login_user
            else f"user {user!r} (pyinfra's login) was not found on the host"
        )
    listed = [parse_authorized_key(k) for k in settings.authorized_keys.get(user, ())]
    on_host = list(facts["keys"]) + list(facts["keys2"])
    if settings.remove_unlisted_keys and user in settings.authorized_keys:
        on_host = []
    usable = [
        k
        for k in on_host + [k for k in listed if k is not None]
        if key_type_accepted(k["type"], accepted_key_types)
    ]
    if usable:
        return None
    home = facts["home"] or f"~{user}"
    why = (
        "gpuhost_ssh_remove_unlisted_keys would leave it none"
        if settings.remove_unlisted_keys and user in settings.authorized_keys
        else f"{home}/.ssh/authorized_keys has no key sshd will accept"
    )
    return (
        f"user {user!r} has no authorized SSH key ({why}); password login is about to "
        f"be turned off: add the public key you log in with to inventory data "
        f"gpuhost_ssh_authorized_keys: {{'{user}': ['ssh-ed25519 AAAA... you@laptop']}} "
        f"(or to {home}/.ssh/authorized_keys), then run again"
    )


def _source_problem(
    settings: HardenSettings, client_address: str | None, over_ssh: bool
) -> str | None:
    """The firewall's SSH sources would not include this session's own address."""
    if not (settings.firewall_enabled and settings.ssh_sources and over_ssh):
        return None
    if client_address is None:
        return (
            "gpuhost_firewall_ssh_sources is set but the host did not say which address this "
            "SSH session comes from (SSH_CONNECTION is empty)"
        )
    address = ipaddress.ip_address(client_address)
    if any(address in ipaddress.ip_network(s, strict=False) for s in settings.ssh_sources):
        return None
    return (
        f"this SSH session comes from {client_address}, which is not in "
        f"gpuhost_firewall_ssh_sources ({', '.join(settings.ssh_sources)}): add it"
    )


def lockout_problems(
    login_user: str | None,
    settings: HardenSettings,
    users: Mapping[str, UserKeysDict],
    accepted_key_types: Sequence[str],
    client_address: str | None = None,
    over_ssh: bool = True,
) -> list[str]:
    """Why applying ``settings`` could lock someone out; empty when it cannot.

    ``users`` holds the ``AuthorizedKeys`` fact of the login user and of every plain name in
    AllowUsers. Keys listed in inventory data count: they are added before sshd changes.
    """
    if login_user is None:
        return ["cannot tell which user pyinfra logs in as: set ssh_user in the inventory"]
    problems = _login_user_problems(login_user, settings, users)
    names = [login_user] + [
        u for u in settings.allow_users if "@" not in u and "*" not in u and "?" not in u
    ]
    for user in dict.fromkeys(names):
        problem = _key_problem(user, login_user, settings, users.get(user), accepted_key_types)
        if problem:
            problems.append(problem)
    source = _source_problem(settings, client_address, over_ssh)
    return problems + ([source] if source else [])


def firewall_problems(
    settings: HardenSettings,
    ssh_ports: Sequence[int],
    listeners: Sequence[Listener] | None,
) -> list[str]:
    """Why loading the firewall ``settings`` would cut a service listening now; empty when it
    would not (or no firewall is wanted). ``listeners`` None: ``ss`` could not be run."""
    if not settings.firewall_enabled:
        return []
    if listeners is None:
        return ["cannot tell which services listen (ss from iproute2 is missing): install iproute2"]
    accepts = base_accepts(ssh_ports, settings.ssh_sources, settings.allow_tcp, settings.allow_udp)
    return uncovered_listeners(
        listeners, accepts + settings.role_rules(), load_roles(), settings.closed_tcp
    )


# --- deploys (orchestration only) ---------------------------------------------------------------

#: host name -> the ruleset the last run planned for it (``gpuhost harden --dry`` prints these)
planned_rulesets: dict[str, str] = {}


def _settings() -> HardenSettings:
    return read_settings(host.name, {key: host.data.get(key) for key in DEFAULTS})


def _check(settings: HardenSettings, policy: Mapping[str, Any]) -> None:
    """Raise DeployError (naming host, user and what to add) before anything changes."""
    session = host.get_fact(SshSession)
    login_user = host.data.get("ssh_user") or session["login_user"]
    names = [login_user] if login_user else []
    names += [u for u in settings.allow_users if "@" not in u and "*" not in u and "?" not in u]
    users = {name: host.get_fact(AuthorizedKeys, user=name) for name in dict.fromkeys(names)}
    problems = lockout_problems(
        login_user,
        settings,
        users,
        policy["pubkey_accepted_algorithms"],
        client_address=session["client_address"],
        over_ssh=is_ssh_host(host),
    )
    if problems:
        raise DeployError(
            host.name, "refusing to harden, nothing was changed: " + "; ".join(problems)
        )


def _ssh_operations(settings: HardenSettings, policy: Mapping[str, Any]) -> None:
    for user, keys in settings.authorized_keys.items():
        sshd.authorized_keys(
            name=f"Authorized SSH keys of {user}",
            user=user,
            keys=list(keys),
            remove_unlisted=settings.remove_unlisted_keys,
        )
    sshd.dropin(
        name="sshd drop-in 00-gpuhost.conf (validated, reloaded, confirmed)",
        content=render_dropin(
            policy,
            permit_root_login=settings.permit_root_login,
            max_auth_tries=settings.max_auth_tries,
            login_grace_time=settings.login_grace_time,
            allow_users=settings.allow_users,
            allow_groups=settings.allow_groups,
            extra_lines=settings.extra_config,
        ),
        revert_seconds=settings.revert_seconds,
    )


def _ssh_ports() -> list[int]:
    effective = host.get_fact(SshdEffectiveConfig)
    ports = {int(p) for p in effective.get("port", []) if p.isdigit()}
    if host.data.get("ssh_port"):
        ports.add(int(host.data.get("ssh_port")))
    return sorted(ports or {22})


def _ruleset(settings: HardenSettings) -> str:
    return render_ruleset(
        ssh_ports=_ssh_ports(),
        ssh_sources=settings.ssh_sources,
        allow_tcp=settings.allow_tcp,
        allow_udp=settings.allow_udp,
        ssh_rate_limit=settings.rate_limit,
        role_rules=settings.role_rules(),
    )


def _check_firewall(settings: HardenSettings) -> None:
    """Refuse (DeployError, nothing changed) a ruleset that would cut a listening service."""
    problems = firewall_problems(settings, _ssh_ports(), host.get_fact(ListeningSockets))
    if problems:
        raise DeployError(
            host.name, "refusing to load the firewall, nothing was changed: " + "; ".join(problems)
        )


def _firewall_operations(settings: HardenSettings) -> None:
    if not settings.firewall_enabled:
        return
    content = _ruleset(settings)
    planned_rulesets[host.name] = content
    # the host's package manager (apt or dnf, by its OS); metadata refreshed only to install
    packages.present(name="nftables installed", packages=["nftables"], refresh=True)
    firewall.ruleset(
        name="nftables table inet gpuhost (atomic, auto-revert, confirmed)",
        content=content,
        revert_seconds=settings.revert_seconds,
    )
    firewall.persistence(name="nftables table loaded at boot")


@deploy("Harden SSH", data_defaults=DEFAULTS)
def harden_ssh() -> None:
    """Authorized keys and the sshd drop-in; refuses (unchanged) when it could lock anyone out."""
    settings, policy = _settings(), load_policy()
    _check(settings, policy)
    _ssh_operations(settings, policy)


@deploy("Harden firewall", data_defaults=DEFAULTS)
def harden_firewall() -> None:
    """The nftables table ``inet gpuhost``; refuses (unchanged) if SSH sources exclude us."""
    settings, policy = _settings(), load_policy()
    _check(settings, policy)
    _check_firewall(settings)
    _firewall_operations(settings)


@deploy("Harden SSH and firewall", data_defaults=DEFAULTS)
def harden() -> None:
    """SSH then firewall, after every lockout check passed for this host."""
    settings, policy = _settings(), load_policy()
    _check(settings, policy)
    _check_firewall(settings)
    _ssh_operations(settings, policy)
    _firewall_operations(settings)


def ruleset_text(name: str, ruleset: str | None) -> str:
    """What ``--dry`` prints per host: the exact nftables file, after a comment naming the host
    (so one host's part is itself a valid ``nft -f`` file), or why there is none."""
    if ruleset is None:
        return (
            f"# {name}: no gpuhost firewall (not asked for: set gpuhost_firewall_roles, "
            "gpuhost_firewall_allow_tcp or gpuhost_firewall_enabled: true)\n"
        )
    return f"# {name}: {RULESET_PATH} would be:\n{ruleset}"
