"""pyinfra inventory → the hosts testinfra checks, with their inventory data.

SSH hosts become ``ssh://NAME`` with an ssh_config (written by the caller) that carries the
inventory's connection data; ``@local`` (or no inventory) is this machine, ``local://``.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from gpuhost.errors import ConfigError
from gpuhost.inventory.contract import host_name_problem
from gpuhost.inventory.profiles import PROFILES_FILE_KEY
from gpuhost.pyinfra_adapter import quiet_hub_interrupts

LOCAL = "@local"
SSH_KEYS = {
    "ssh_hostname": "HostName",
    "ssh_port": "Port",
    "ssh_user": "User",
    "ssh_key": "IdentityFile",
    "ssh_known_hosts_file": "UserKnownHostsFile",
    "ssh_strict_host_key_checking": "StrictHostKeyChecking",
    "ssh_connect_timeout": "ConnectTimeout",
}
UNSUPPORTED_KEYS = ("ssh_password", "ssh_key_password", "ssh_paramiko_connect_kwargs")


@dataclass(frozen=True)
class CheckHost:
    name: str
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> str:
        """The testinfra host spec."""
        return "local://" if self.name == LOCAL else f"ssh://{self.name}"

    @property
    def test_id(self) -> str:
        """What testinfra puts in test ids for this host (``local`` or ``ssh://NAME``)."""
        return "local" if self.name == LOCAL else f"ssh://{self.name}"


def load_hosts(
    inventory: str | None, limit: str | None = None, profiles: str | None = None
) -> list[CheckHost]:
    """The hosts of a pyinfra inventory file (``--limit`` applied), or this machine for None or
    ``@local``. ``profiles`` (``--profiles FILE``) takes the place of every host's
    ``gpuhost_profiles_file``. ConfigError for a bad inventory or profiles file, an unknown
    --limit name or an unsupported host."""
    override = {PROFILES_FILE_KEY: profiles} if profiles else {}
    if profiles:  # a bad --profiles file is one line naming it, exit 2 (not the inventory key)
        from gpuhost.inventory.profiles import profile_table

        profile_table(profiles, {})
    if inventory is None or inventory == LOCAL:
        if limit:
            raise ConfigError(f"--limit {limit!r}: needs an inventory file (checking this machine)")
        return [CheckHost(LOCAL, dict(override))]
    with warnings.catch_warnings():  # pyinfra_cli patches gevent late; harmless here
        warnings.simplefilter("ignore")
        from gpuhost.inventory.loader import select

        selection = select(
            inventory, limit=limit, override_data=override or None, uses_profiles=True
        )
    quiet_hub_interrupts()  # pyinfra's inventory loader patched gevent into this pytest
    hosts = []
    for name in selection.names:
        host = selection.inventory.get_host(name)
        data = dict(host.data.dict()) if hasattr(host.data, "dict") else {}
        if name.startswith("@") and name != LOCAL:
            raise ConfigError(
                f"{inventory}: host {name}: connector not supported by gpuhost check "
                "(use SSH hosts or @local)"
            )
        for key in UNSUPPORTED_KEYS:
            if data.get(key):
                raise ConfigError(
                    f"{inventory}: host {name}: {key} is not supported by gpuhost check; "
                    "use key-based SSH (ssh_key or an ssh agent)"
                )
        hosts.append(CheckHost(name, data))
    if not hosts:
        raise ConfigError(f"{inventory}: --limit {limit!r} selects no host")
    return hosts


# ssh_config options whose value OpenSSH expands %-tokens in (a literal '%' is written '%%')
TOKEN_OPTIONS = ("HostName", "User", "IdentityFile", "UserKnownHostsFile")
_UNSAFE_VALUE = re.compile(r'[\x00-\x1f\x7f-\x9f"]')


def config_value(host: str, key: str, value: Any) -> str:
    """``value`` of inventory ``key`` as one ssh_config argument that stays data: refused (one
    ConfigError naming the host and key) when it holds a control character or '"' (a newline
    would start a new option such as ProxyCommand), '%' doubled where OpenSSH expands tokens,
    quoted when it holds whitespace, '#' or '='."""
    text = ("yes" if value else "no") if isinstance(value, bool) else str(value)
    if _UNSAFE_VALUE.search(text) or not text.strip():
        raise ConfigError(
            f"host {host}: {key}: found {text!r:.80}, expected one line without control "
            "characters or '\"' (it is written into an ssh_config)"
        )
    if SSH_KEYS[key] in TOKEN_OPTIONS:
        text = text.replace("%", "%%")
    return f'"{text}"' if re.search(r"[\s#=]", text) else text


def ssh_config(hosts: list[CheckHost], control_dir: str) -> str:
    """An ssh_config with one ``Host`` block per SSH host (connection multiplexed). Every host
    name must be literal (``contract.host_name_problem``: a ``Host *`` block would send every
    later host to its address) and every value stays one argument (``config_value``)."""
    lines = ["# written by gpuhost check from the inventory; removed after the run", ""]
    for host in hosts:
        if host.name == LOCAL:
            continue
        problem = host_name_problem(host.name)
        if problem:
            raise ConfigError(problem)
        lines.append(f"Host {host.name}")
        for key, option in SSH_KEYS.items():
            value = host.data.get(key)
            if value is not None and value != "":
                lines.append(f"    {option} {config_value(host.name, key, value)}")
        if host.data.get("ssh_key"):
            lines.append("    IdentitiesOnly yes")
        lines += ["    BatchMode yes", f"    ControlPath {control_dir}/%C", ""]
    return "\n".join(lines)
