"""One pyinfra session per host: load the inventory, connect, run commands, run deploys.

Each host gets its own pyinfra ``State`` (an inventory of that one host, with its data), so a
host's steps, reconnects after a reboot and deploys never touch another host's session.
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyinfra.api import Config, State
from pyinfra.api.connect import connect_all
from pyinfra.api.deploy import add_deploy
from pyinfra.api.exceptions import PyinfraError
from pyinfra.api.inventory import Inventory
from pyinfra.api.operations import run_ops
from pyinfra.api.state import StateStage

from gpuhost.errors import HostError
from gpuhost.upgrade.remote import Result

RC_MARK = "##GPUHOST_RC="


@dataclass(frozen=True)
class InventoryHost:
    name: str
    data: dict[str, Any]
    groups: tuple[str, ...]


def load_inventory(path: str) -> list[InventoryHost]:
    """Hosts of a pyinfra inventory file, in file order, with their merged data (loaded with the
    audit's ``gpuhost.fleet.load_inventory``)."""
    from gpuhost.fleet import ensure_gevent
    from gpuhost.fleet import load_inventory as load_fleet_inventory

    ensure_gevent()
    inventory = load_fleet_inventory(path)
    hosts = []
    for host in inventory:
        groups = tuple(sorted(g for g, members in inventory.groups.items() if host in members))
        hosts.append(InventoryHost(host.name, dict(host.data.dict()), groups))
    return hosts


def _run_command_with_rc(command: str) -> str:
    return f"( {command} ); printf '\\n{RC_MARK}%s\\n' $?"


def split_rc(stdout: str) -> tuple[int | None, str]:
    """Strip the exit code marker line that ``PyinfraRemote.run`` appends (pure)."""
    lines = stdout.split("\n")
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].startswith(RC_MARK):
            value = lines[index][len(RC_MARK) :].strip()
            body = "\n".join(lines[:index])
            if body.endswith("\n"):
                body = body[:-1]
            return (int(value) if value.isdigit() else None), body
    return None, stdout


class PyinfraRemote:
    """A ``Remote`` over pyinfra's SSH connector for one inventory host."""

    def __init__(self, entry: InventoryHost, connect_timeout: int = 10) -> None:
        self.host = entry.name
        self.entry = entry
        self.connect_timeout = connect_timeout
        self.state: State | None = None

    def _new_state(self) -> State:
        data = dict(self.entry.data)
        data.setdefault("ssh_connect_timeout", self.connect_timeout)
        inventory = Inventory(([(self.entry.name, data)], {}))
        state = State(inventory, Config())
        state.current_stage = StateStage.Connect
        return state

    def connect(self) -> None:
        logging.getLogger("pyinfra").setLevel(logging.CRITICAL)
        state = self._new_state()
        connect_all(state)
        host = state.inventory.get_host(self.host)
        if not host.connected:
            raise HostError(self.host, "unreachable over SSH")
        state.current_stage = StateStage.Prepare
        self.state = state

    def close(self) -> None:
        if self.state is not None:
            host = self.state.inventory.get_host(self.host)
            if host.connected:
                with contextlib.suppress(Exception):  # a dead connection is closed already
                    host.disconnect()
        self.state = None

    def _host(self) -> Any:
        if self.state is None:
            self.connect()
        assert self.state is not None
        return self.state.inventory.get_host(self.host)

    def run(self, command: str, timeout: float | None = None) -> Result:
        host = self._host()
        try:
            _, output = host.run_shell_command(
                _run_command_with_rc(command), _timeout=int(timeout) if timeout else None
            )
        except (PyinfraError, OSError, EOFError) as exc:
            self.close()
            raise HostError(self.host, f"connection lost while running a command: {exc}") from exc
        except Exception as exc:  # paramiko/gevent timeouts have no common base
            self.close()
            raise HostError(
                self.host, f"command did not finish: {type(exc).__name__} {exc}"
            ) from exc
        rc, stdout = split_rc(output.stdout)
        if rc is None:
            raise HostError(
                self.host, f"connection dropped during: {command[:80]} ({output.stderr[-200:]})"
            )
        return Result(rc, stdout, output.stderr)

    def deploy(self, deploy_func: Callable[..., Any], **kwargs: Any) -> None:
        """Run a packaged pyinfra deploy on this host; HostError naming the failed operation."""
        self.close()  # a fresh state: facts from before a change must not be reused
        state = self._new_state()
        connect_all(state)
        host = state.inventory.get_host(self.host)
        if not host.connected:
            raise HostError(self.host, "unreachable over SSH")
        state.current_stage = StateStage.Prepare
        try:
            add_deploy(state, deploy_func, **kwargs)
            state.current_stage = StateStage.Execute
            run_ops(state)
        except PyinfraError as exc:
            raise HostError(self.host, f"deploy failed: {exc}") from exc
        finally:
            with contextlib.suppress(Exception):
                host.disconnect()
        if host in state.failed_hosts:
            raise HostError(self.host, "deploy failed at an operation (pyinfra output above)")

    def wait_for_ssh(self, timeout_s: float, poll_s: float = 2.0) -> None:
        """Reconnect until SSH answers again (after a reboot)."""
        deadline = time.monotonic() + timeout_s
        last = "never answered"
        while time.monotonic() < deadline:
            self.close()
            try:
                self.connect()
                if self.run("true").ok:
                    return
            except HostError as exc:
                last = str(exc)
            time.sleep(poll_s)
        raise HostError(self.host, f"did not come back over SSH within {timeout_s:g}s ({last})")


def quote(value: str) -> str:
    return shlex.quote(value)
