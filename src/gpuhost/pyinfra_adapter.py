"""The pyinfra internals gpuhost relies on, in one place (pyinfra 3.x; tests/test_pyinfra_adapter.py
pins each behaviour against the installed pyinfra, so an upgrade that changes one fails there).

Public pyinfra API is used directly elsewhere; only what pyinfra does not offer publicly is here:

- :func:`may_change`: whether a prepared operation would change anything (``OperationMeta.
  _maybe_is_change``, set when ``State(check_for_changes=True)`` evaluates it at prepare time);
- :func:`real_host`: the ``Host`` behind pyinfra's context proxy ``pyinfra.host`` (``_get_module``);
- :func:`forget_cached_host_keys`: the known_hosts files pyinfra memoizes per process;
- :func:`setup_cli_logging`: pyinfra CLI's progress output (``pyinfra_cli.log``);
- :func:`inventory_groups` / :func:`make_inventory`: pyinfra CLI's inventory file loader
  (``pyinfra_cli.inventory``) with its per-process compiled-file cache dropped first;
- :func:`ssh_connector_keys`: the host data keys pyinfra's SSH connector reads
  (``pyinfra.connectors.ssh.connector_data_meta``);
- :func:`ensure_gevent`: the stdlib patched for gevent (pyinfra runs hosts concurrently on it)
  before any connection; :func:`quiet_hub_interrupts`: a Ctrl-C handed on by gevent's hub
  without the hub printing it;
- :func:`connector_arguments`: the connector arguments (``_sudo``, ``_su_user``, ...) of an
  operation's or a host's global arguments (``pyinfra.api.arguments``), for a command run
  outside pyinfra's own operations (a fleet fact, a FunctionCommand);
- :func:`current_host` / :func:`is_preparing`: the host pyinfra is preparing or executing
  (``pyinfra.context.ctx_host``) and whether its state is in the prepare stage (``StateStage``);
- :func:`single_host_state` / :func:`start_prepare`: one host's own pyinfra State, connected by
  hand and then moved to the prepare stage (the upgrade's one session per host);
- :func:`is_ssh_host` / :func:`fresh_ssh_login`: whether a host is reached by pyinfra's SSH
  connector, and a second, new SSH login to it (``SSHConnector`` and its paramiko client);
- :func:`close_connection`: a host disconnected with its SSH client closed (the SSH connector's
  ``disconnect`` leaves the paramiko client, its socket and transport thread, open);
- :func:`quiet_missing_known_hosts`: the warning pyinfra's SSH client logs for a known_hosts
  file that does not exist (``sshuserclient.client.get_host_keys``).
"""

from __future__ import annotations

import gc
import logging
import os
import warnings
from collections.abc import Mapping
from typing import Any
from unittest import mock

from gpuhost.connection import quiet_ssh_logs


def ensure_gevent() -> None:
    """pyinfra runs hosts concurrently on gevent; the stdlib must be patched before connecting."""
    from gevent import monkey

    if not monkey.is_module_patched("socket"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            monkey.patch_all()
    # pyinfra and paramiko log through their loggers; gpuhost reports hosts itself, so keep them
    # off the terminal unless the user configured logging.
    quiet_ssh_logs()


def quiet_hub_interrupts() -> None:
    """A KeyboardInterrupt that arrives while gevent's hub runs (a process whose SIGINT handler
    is Python's default, patched by importing pyinfra's CLI: ``gpuhost check``'s pytest) is
    printed by the hub ('KeyboardInterrupt' and a timestamp on stderr) before it reaches the
    program, which reports it itself. The hub still hands it on (a system error), unprinted."""
    from gevent import get_hub

    hub = get_hub()
    if KeyboardInterrupt not in hub.NOT_ERROR:
        hub.NOT_ERROR = (*hub.NOT_ERROR, KeyboardInterrupt)


def may_change(operation_meta: Any) -> bool | None:
    """True/False: pyinfra's prepare stage found the operation would (not) yield a command; None:
    not decided (prepared without ``check_for_changes``)."""
    value = getattr(operation_meta, "_maybe_is_change", None)
    return None if value is None else bool(value)


def real_host(host: Any) -> Any:
    """The ``pyinfra.api.Host`` itself for ``pyinfra.host`` (a context proxy) or a Host."""
    get_module = getattr(host, "_get_module", None)
    return get_module() if callable(get_module) else host


def ssh_connector_keys() -> frozenset[str]:
    """The ``ssh_*`` inventory data keys pyinfra's SSH connector knows (``ssh_hostname``,
    ``ssh_user``, ...): any other ``ssh_*`` key is ignored by pyinfra, so it is a typo."""
    from pyinfra.connectors.ssh import connector_data_meta

    return frozenset(connector_data_meta)


def forget_cached_host_keys() -> None:
    """pyinfra memoizes each known_hosts file for the life of the process; a long-lived process
    (a rolling upgrade, a test session) must re-read it so hosts added or re-keyed since are
    checked against the file as it is now, not as it was at the first connection."""
    from pyinfra.connectors.sshuserclient import client

    cache = getattr(client.get_host_keys, "cache", None)
    if isinstance(cache, dict):
        cache.clear()


def setup_cli_logging(level: int) -> None:
    """pyinfra CLI's own progress lines (operations, per-host results) on stderr at ``level``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyinfra_cli patches the stdlib for gevent on import
        from pyinfra_cli.log import setup_logging

    setup_logging(level)


def _cli_inventory() -> tuple[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyinfra_cli patches the stdlib for gevent on import
        from pyinfra_cli import inventory as cli_inventory
        from pyinfra_cli import util as cli_util
    return cli_inventory, cli_util


def inventory_groups(path: str) -> dict[str, Any]:
    """Execute an inventory file as the pyinfra CLI does: {group name: (hosts, data)} of its
    module-level lists (``all`` included). The file is read afresh (pyinfra otherwise keeps each
    file's compiled code for the life of the process). Call inside ``ctx_state.use(state)``."""
    cli_inventory, cli_util = _cli_inventory()
    cli_util.PYTHON_CODES.pop(str(path), None)
    groups: dict[str, Any] = cli_inventory._get_groups_from_filename(str(path))
    return groups


def make_inventory(
    path: str, groups: dict[str, Any], override_data: Mapping[str, Any] | None = None
) -> Any:
    """pyinfra's Inventory for ``path`` built from ``groups`` already read by
    :func:`inventory_groups` (the file is not executed twice), with ``group_data/`` beside it
    and ``override_data`` applied, as the pyinfra CLI builds it; in time linear in the hosts
    (``_LinearInventory``, and the ``all`` group listed here: pyinfra's CLI builds it with a
    list membership test per host), so 20,000 hosts take seconds, not minutes."""
    cli_inventory, _ = _cli_inventory()
    groups = dict(groups)
    if "all" not in groups:  # as pyinfra_cli does, without its quadratic `not in all_hosts`
        names: dict[str, None] = {}
        for hosts in groups.values():
            for host in hosts[0] if isinstance(hosts, tuple) else hosts:
                names.setdefault(host[0] if isinstance(host, tuple) else host)
        groups["all"] = (list(names), {})
    collecting = gc.isenabled()
    gc.disable()  # an allocation burst (a Host per name) that leaves no garbage: no GC passes
    try:
        with (
            mock.patch.object(cli_inventory, "_get_groups_from_filename", lambda _f: groups),
            mock.patch.object(cli_inventory, "Inventory", _linear_inventory()),
        ):
            return cli_inventory.make_inventory_from_files(
                str(path), dict(override_data or {}), os.getcwd()
            )
    finally:
        if collecting:
            gc.enable()


class _Members(list):
    """A group's host list whose membership test is a set lookup (pyinfra asks it per host)."""

    def __init__(self) -> None:
        super().__init__()
        self._ids: set[int] = set()

    def __contains__(self, item: object) -> bool:
        return id(item) in self._ids

    def append(self, item: Any) -> None:
        self._ids.add(id(item))
        super().append(item)


def _linear_inventory() -> type:
    """pyinfra's Inventory whose host/group assignment is linear (its ``host not in group``
    test on a list made building 20,000 hosts quadratic); the groups are plain lists after."""
    from collections import defaultdict

    from pyinfra.api.inventory import Inventory

    class LinearInventory(Inventory):
        def make_hosts_and_groups(self, names: Any, groups: Any) -> None:
            self.groups = defaultdict(_Members)
            super().make_hosts_and_groups(names, groups)
            self.groups = defaultdict(list, {k: list(v) for k, v in self.groups.items()})

    return LinearInventory


def connector_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The connector arguments among an operation's global arguments (``_sudo``, ...)."""
    from pyinfra.api.arguments import CONNECTOR_ARGUMENT_KEYS

    return {key: value for key, value in arguments.items() if key in CONNECTOR_ARGUMENT_KEYS}


def host_connector_arguments(state: Any, host: Any) -> dict[str, Any]:
    """The connector arguments the host's data gives (``_sudo: True`` in group data, ...), as
    pyinfra's own operations pass them to ``run_shell_command``."""
    from pyinfra.api.arguments import pop_global_arguments
    from pyinfra.context import ctx_host, ctx_state

    with ctx_state.use(state), ctx_host.use(host):
        global_args, _ = pop_global_arguments(state, host, {})
    return connector_arguments(global_args)


def current_host() -> Any:
    """The ``Host`` pyinfra is preparing or executing now (None outside a deploy)."""
    from pyinfra.context import ctx_host

    return ctx_host.get()


def is_preparing(host: Any) -> bool:
    """Whether ``host``'s state is in pyinfra's prepare stage (facts read, nothing changes)."""
    from pyinfra.api.state import StateStage

    state = getattr(host, "state", None)
    return state is not None and state.current_stage == StateStage.Prepare


def single_host_state(name: str, data: Mapping[str, Any], connect_timeout: int = 10) -> Any:
    """A pyinfra State of one host (an inventory of it alone, with ``data``), ready to connect
    within ``connect_timeout`` seconds (pyinfra 3's SSH connector reads its config's
    ``CONNECT_TIMEOUT``, not the host's ``ssh_connect_timeout``)."""
    from pyinfra.api import Config, Inventory, State
    from pyinfra.api.state import StateStage

    state = State(Inventory(([(name, dict(data))], {})), Config(CONNECT_TIMEOUT=connect_timeout))
    state.current_stage = StateStage.Connect
    return state


def start_prepare(state: Any, host: Any) -> None:
    """The host connected by hand counts as active and the state moves to the prepare stage, as
    pyinfra's CLI leaves them after connecting (facts and deploys can run)."""
    from pyinfra.api.state import StateStage

    state.activate_host(host)
    state.current_stage = StateStage.Prepare


def is_ssh_host(host: Any) -> bool:
    """Whether pyinfra reaches ``host`` with its SSH connector (not ``@local``, ``@docker``...)."""
    from pyinfra.connectors.ssh import SSHConnector

    return isinstance(host.connector, SSHConnector)


def close_connection(host: Any) -> None:
    """Disconnect ``host`` and close its SSH client, also one still connecting (its socket
    closed, the commands and the handshake waiting on it end). pyinfra's SSH ``disconnect`` only
    forgets its file transfer sessions."""
    client = getattr(host.connector, "client", None)
    if host.connected:
        host.disconnect()
    if client is not None:
        client.close()


def fresh_ssh_login(state: Any, host: Any, command: str = "true", timeout: int = 15) -> str | None:
    """A new SSH connection to ``host`` (new TCP connection, new authentication) that runs
    ``command``; None when it exits 0, else why not."""
    from pyinfra.connectors.ssh import SSHConnector

    fresh = SSHConnector(state, host)
    try:
        fresh.connect()
        client = fresh.client
        if client is None:
            return "no SSH client was created"
        _stdin, stdout, _stderr = client.exec_command(command, timeout=timeout)
        status = stdout.channel.recv_exit_status()
        return None if status == 0 else f"'{command}' exited with {status}"
    except Exception as exc:  # any failure to connect is a failed check
        return f"{type(exc).__name__}: {exc}"
    finally:
        if fresh.client is not None:
            fresh.client.close()


MISSING_KNOWN_HOSTS = "Failed to load host keys from %s: %s"


class _MissingKnownHosts(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        missing = len(args) == 2 and isinstance(args[1], FileNotFoundError)
        return not (record.msg == MISSING_KNOWN_HOSTS and missing)


def quiet_missing_known_hosts() -> None:
    """pyinfra warns once per run that ``~/.ssh/known_hosts`` does not exist (it reads it for
    every host without ``ssh_known_hosts_file``): not a problem by itself (a host whose key
    cannot be checked fails with its own cause), so that line is dropped; other load errors
    (a damaged file) are kept."""
    pyinfra_logger = logging.getLogger("pyinfra")
    if not any(isinstance(f, _MissingKnownHosts) for f in pyinfra_logger.filters):
        pyinfra_logger.addFilter(_MissingKnownHosts())
