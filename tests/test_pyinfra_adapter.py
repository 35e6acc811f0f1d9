"""Pins the pyinfra internals gpuhost relies on (gpuhost.pyinfra_adapter) against the installed
pyinfra: real States, a real @local host, real inventory files."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.operation import add_op
from pyinfra.api.state import StateStage
from pyinfra.context import ctx_host, ctx_state
from pyinfra.operations import files, server

from gpuhost import pyinfra_adapter as adapter


@pytest.fixture
def local_state() -> State:
    state = State(Inventory((["@local"], {})), Config(), check_for_changes=True)
    connect_all(state)
    return state


def test_prepare_tells_whether_an_operation_would_change(local_state, tmp_path: Path) -> None:
    existing = add_op(local_state, files.directory, path=str(tmp_path))
    missing = add_op(local_state, files.directory, path=str(tmp_path / "new"))
    shell = add_op(local_state, server.shell, commands=["true"])
    host = local_state.inventory.get_host("@local")
    by_op = {"existing": existing[host], "missing": missing[host], "shell": shell[host]}
    assert adapter.may_change(by_op["existing"]) is False
    assert adapter.may_change(by_op["missing"]) is True
    assert adapter.may_change(by_op["shell"]) is True
    assert not (tmp_path / "new").exists()  # prepared, not executed


def test_undecided_without_check_for_changes() -> None:
    class Meta:
        _maybe_is_change = None

    assert adapter.may_change(Meta()) is None


def test_real_host_unwraps_the_context_proxy(local_state) -> None:
    from pyinfra import host as proxy
    from pyinfra.api import Host

    target = local_state.inventory.get_host("@local")
    with ctx_state.use(local_state), ctx_host.use(target):
        assert not isinstance(proxy, Host)
        assert adapter.real_host(proxy) is target
    assert adapter.real_host(target) is target


def test_known_hosts_cache_is_forgotten(tmp_path: Path) -> None:
    from pyinfra.connectors.sshuserclient import client

    known = tmp_path / "known_hosts"
    known.write_text("")
    client.get_host_keys(str(known))
    assert client.get_host_keys.cache  # pyinfra memoizes the file
    adapter.forget_cached_host_keys()
    assert not client.get_host_keys.cache


def test_cli_logging_installs_pyinfra_handlers() -> None:
    logger = logging.getLogger("pyinfra")
    before = list(logger.handlers)
    try:
        adapter.setup_cli_logging(logging.INFO)
        assert logger.level == logging.INFO and len(logger.handlers) > len(before)
    finally:
        logger.handlers[:] = before


def test_inventory_file_is_read_afresh_and_built_once(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.py"
    inventory.write_text("gpus = [('g1', {'x': 1})]\n")
    (tmp_path / "group_data").mkdir()
    (tmp_path / "group_data" / "gpus.py").write_text("from_group = 'yes'\n")
    state = State()
    with ctx_state.use(state):
        groups = adapter.inventory_groups(str(inventory))
        assert set(groups) >= {"gpus"}
        inventory.write_text("gpus = [('g1', {'x': 1}), 'g2']\n")
        groups = adapter.inventory_groups(str(inventory))  # not the cached first version
        built = adapter.make_inventory(str(inventory), groups, {"y": 2})
    names = sorted(h.name for h in built)
    assert names == ["g1", "g2"]
    g1 = built.get_host("g1")
    assert g1.data.x == 1 and g1.data.y == 2 and g1.data.from_group == "yes"


def test_building_an_inventory_is_linear_in_its_hosts(tmp_path: Path) -> None:
    """pyinfra tests each host's group membership on a list and its CLI builds 'all' the same
    way: 'inventory check' of 20,000 hosts took over a minute (issue 29)."""
    import time

    def build(count: int) -> float:
        path = tmp_path / f"inv{count}.py"
        hosts = ", ".join(f"'n{i}'" for i in range(count))
        path.write_text(f"gpu = [{hosts}]\nrack = ['n0', 'n1']\n")
        with ctx_state.use(State()):
            groups = adapter.inventory_groups(str(path))
            start = time.process_time()
            built = adapter.make_inventory(str(path), groups)
            took = time.process_time() - start
        assert len(built) == count
        assert [h.name for h in built.get_group("rack")] == ["n0", "n1"]
        assert len(built.get_group("gpu")) == count
        return took

    build(500)  # warm up
    small, large = build(1250), build(10000)
    assert large < 20 * max(small, 0.01), (small, large)  # 8x the hosts: linear, not 64x
    assert large < 10


def test_ssh_connector_keys_are_the_ones_pyinfra_reads() -> None:
    """The list the inventory contract judges ``ssh_*`` typos against: pyinfra's SSH connector
    still reads these keys (a pyinfra that renames one fails here, not in a user's fleet)."""
    keys = adapter.ssh_connector_keys()
    assert {"ssh_hostname", "ssh_port", "ssh_user", "ssh_key", "ssh_password"} <= keys
    assert {"ssh_known_hosts_file", "ssh_strict_host_key_checking", "ssh_connect_retries"} <= keys
    assert all(k.startswith("ssh_") for k in keys)
    assert "ssh_hostnme" not in keys


def test_a_missing_known_hosts_file_is_not_warned_about_a_damaged_one_is(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """pyinfra's SSH client warns when it cannot load a known_hosts file; gpuhost drops the
    warning for a file that does not exist (HQA: 'Failed to load host keys from
    /root/.ssh/known_hosts: [Errno 2] ...' on harden's stderr) and keeps it for a damaged one."""
    from pyinfra.connectors.sshuserclient.client import get_host_keys

    adapter.quiet_missing_known_hosts()
    damaged = tmp_path / "known_hosts"
    damaged.write_text("h1 ssh-ed25519 not-base64!!\n")
    with caplog.at_level(logging.WARNING, logger="pyinfra"):
        get_host_keys.cache.clear()  # type: ignore[attr-defined]
        get_host_keys((str(tmp_path / "absent"),))
        get_host_keys((str(damaged),))
    lines = [r.getMessage() for r in caplog.records if r.name == "pyinfra"]
    assert not any("absent" in line for line in lines)
    assert any(line.startswith(f"Failed to load host keys from {damaged}") for line in lines)


def test_connector_arguments_are_the_sudo_and_su_settings() -> None:
    found = adapter.connector_arguments({"_sudo": True, "_su_user": "ops", "_serial": True})
    assert found == {"_sudo": True, "_su_user": "ops"}


def test_host_connector_arguments_come_from_the_host_data() -> None:
    state = State(Inventory(([("@local", {"_sudo": True})], {})), Config())
    target = state.inventory.get_host("@local")
    assert adapter.host_connector_arguments(state, target)["_sudo"] is True


def test_current_host_and_the_prepare_stage(local_state) -> None:
    target = local_state.inventory.get_host("@local")
    assert adapter.current_host() is None
    with ctx_state.use(local_state), ctx_host.use(target):
        assert adapter.current_host() is target
    local_state.current_stage = StateStage.Prepare
    assert adapter.is_preparing(target)
    local_state.current_stage = StateStage.Execute
    assert not adapter.is_preparing(target)


def test_a_single_host_state_connects_and_prepares() -> None:
    state = adapter.single_host_state("@local", {"x": 1})
    target = state.inventory.get_host("@local")
    assert [h.name for h in state.inventory] == ["@local"] and target.data.x == 1
    target.connect(raise_exceptions=True)
    adapter.start_prepare(state, target)
    assert adapter.is_preparing(target) and target in state.activated_hosts
    assert not adapter.is_ssh_host(target)  # @local: pyinfra's local connector


def test_a_fresh_ssh_login_that_cannot_connect_says_why(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port of this machine nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    data = {"ssh_hostname": "127.0.0.1", "ssh_port": port, "ssh_connect_timeout": 3}
    state = State(Inventory(([("closed", data)], {})), Config())
    target = state.inventory.get_host("closed")
    assert adapter.is_ssh_host(target)
    why = adapter.fresh_ssh_login(state, target)
    assert why is not None and why


def test_the_connect_timeout_is_the_states_not_the_hosts_data() -> None:
    """pyinfra 3's SSH connector times out after its config's CONNECT_TIMEOUT, whatever the
    host's ssh_connect_timeout says: single_host_state sets the one the caller gives."""
    data = {"ssh_hostname": "127.0.0.1", "ssh_connect_timeout": 60}
    state = adapter.single_host_state("h", data, 7)
    target = state.inventory.get_host("h")
    assert target.connector.make_paramiko_kwargs()["timeout"] == 7


def test_close_connection_closes_the_ssh_client() -> None:
    """pyinfra's SSH disconnect leaves the paramiko client (socket, transport thread) open;
    close_connection closes it, also while it is still connecting."""
    state = State(Inventory(([("h", {"ssh_hostname": "127.0.0.1"})], {})), Config())
    target = state.inventory.get_host("h")
    closed: list[bool] = []

    class Client:
        def close(self) -> None:
            closed.append(True)

    target.connector.client = Client()
    target.connected = True
    target.disconnect()
    assert not closed  # pyinfra's own disconnect
    target.connected = True
    adapter.close_connection(target)
    assert closed == [True] and not target.connected
    adapter.close_connection(target)  # not connected, still a client: closed again, harmless
    assert closed == [True, True]


def test_the_hub_hands_on_a_keyboard_interrupt_without_printing_it() -> None:
    from gevent import get_hub

    adapter.quiet_hub_interrupts()
    adapter.quiet_hub_interrupts()
    not_error = get_hub().NOT_ERROR
    assert not_error.count(KeyboardInterrupt) == 1 and SystemExit in not_error
    assert KeyboardInterrupt in get_hub().SYSTEM_ERROR  # still handed to the main greenlet
