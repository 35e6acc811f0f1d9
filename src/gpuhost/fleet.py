"""Run one pyinfra fact on many hosts in parallel: inventory, ``--limit``, ``--shard``, results.

Reusable by every fleet command (audit, provision checks, upgrade pre-flight):

.. code:: python

    selection = select_hosts("inventories/lab.py", limit="gpu_nodes", shard="2/4")
    for result in gather(selection, GpuStack, fact_kwargs=lambda data: {}, parallel=64):
        if result.ok:
            use(result.name, result.value, result.data)      # value = fact.process(...)
        else:
            report(result.name, result.reachable, result.error)

Each host costs ONE command (the fact's), over one SSH connection opened for it and closed
after; results are yielded as hosts finish (streaming), at most ``parallel`` hosts at a time.
An unreachable host, a failing command or unreadable output is a result, never an exception.
Inventory problems (missing file, bad Python, unknown ``--limit`` name, bad ``--shard``) raise
ConfigError before any host is contacted.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from gpuhost.connection import connect_cause, quiet_ssh_logs
from gpuhost.errors import ConfigError, GpuhostError
from gpuhost.pyinfra_adapter import forget_cached_host_keys

T = TypeVar("T")
DEFAULT_PARALLEL = 64
DEFAULT_CONNECT_TIMEOUT_S = 10
DEFAULT_COMMAND_TIMEOUT_S = 300


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


def parse_shard(text: str) -> tuple[int, int]:
    """``"3/10"`` -> (3, 10); ConfigError for anything else (``gpuhost.inventory.loader``)."""
    from gpuhost.inventory.loader import parse_shard as _parse_shard

    return _parse_shard(text)


def shard_hosts(names: list[str], index: int, count: int) -> list[str]:
    """The K-th of N slices: hosts at positions K-1, K-1+N, ... of the (inventory-ordered) list.

    Every host lands in exactly one shard, and shard sizes differ by at most one.
    """
    from gpuhost.inventory.loader import shard_names

    return shard_names(names, index, count)


@dataclass(frozen=True)
class HostSelection:
    """The hosts one run covers, in inventory order, with the pyinfra Inventory they live in."""

    inventory_path: str
    inventory: Any  # pyinfra.api.Inventory
    names: list[str]
    shard_label: str | None = None
    state: Any = None  # the pyinfra State the inventory was loaded in (initialised by gather)


def load_inventory(path: str, state: Any = None) -> Any:
    """A pyinfra inventory from a Python inventory file, with every host's data checked against
    the inventory data contract (``gpuhost.inventory.loader``, the one loader)."""
    from gpuhost.inventory.loader import check_hosts
    from gpuhost.inventory.loader import load_inventory as load

    inventory = load(path, state)
    check_hosts(path, inventory, [host.name for host in inventory])
    return inventory


def select_hosts(
    path: str,
    limit: str | Iterable[str] | None = None,
    shard: str | None = None,
    uses_profiles: bool = False,
    profiles: str | None = None,
) -> HostSelection:
    """Load the inventory, pick the hosts of this run (``--limit`` first, then ``--shard``) and
    check their data (``gpuhost.inventory.loader.select``; ``uses_profiles``: profile names
    resolve in ``--profiles``/``gpuhost_profiles_file``/built-ins)."""
    from gpuhost.inventory.loader import select

    selection = select(
        path, limit=limit, shard=shard, uses_profiles=uses_profiles, profiles=profiles
    )
    return HostSelection(
        path, selection.inventory, selection.names, selection.shard_label, selection.state
    )


@dataclass(frozen=True)
class HostResult(Generic[T]):
    """One host's outcome. ``reachable`` False: no connection; ``error`` set: no value."""

    name: str
    reachable: bool
    value: T | None = None
    error: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.reachable and self.error is None


def _close(host: Any) -> None:
    # Closing a dead connection must not fail the run.
    with contextlib.suppress(Exception):
        host.disconnect()
    client = getattr(host.connector, "client", None)
    if client is not None and hasattr(client, "close"):
        with contextlib.suppress(Exception):
            client.close()


def _run_fact(
    state: Any,
    host: Any,
    fact_cls: type,
    kwargs: Mapping[str, Any],
    timeout: float,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> HostResult[Any]:
    from pyinfra.api.arguments import CONNECTOR_ARGUMENT_KEYS, pop_global_arguments
    from pyinfra.context import ctx_host, ctx_state

    data = dict(host.data.dict()) if hasattr(host.data, "dict") else {}
    try:
        host.connect(show_errors=False, raise_exceptions=True)
    except Exception as exc:  # DNS, sockets, keys: a host that could not be reached, and why
        cause = connect_cause(exc, data, host.name, connect_timeout)
        return HostResult(host.name, False, error=cause, data=data)
    try:
        fact = fact_cls()
        command = fact.command(**kwargs)
        with ctx_state.use(state), ctx_host.use(host):
            global_args, _ = pop_global_arguments(state, host, {})
        connector_args = {k: v for k, v in global_args.items() if k in CONNECTOR_ARGUMENT_KEYS}
        connector_args["_timeout"] = timeout
        status, output = host.run_shell_command(command, **connector_args)
        if not status:
            detail = (output.stderr or output.stdout).strip().splitlines()
            shown = detail[-1][:300] if detail else "no output"
            return HostResult(host.name, True, error=f"the command failed: {shown}", data=data)
        return HostResult(host.name, True, value=fact.process(output.stdout_lines), data=data)
    except TimeoutError:
        return HostResult(host.name, True, error=f"no answer within {timeout:.0f} s", data=data)
    except GpuhostError as exc:
        return HostResult(host.name, True, error=str(exc), data=data)
    except Exception as exc:  # connection dropped mid-command, undecodable output, ...
        return HostResult(host.name, True, error=f"{type(exc).__name__}: {exc}", data=data)
    finally:
        _close(host)


def gather(
    selection: HostSelection,
    fact_cls: type,
    *,
    fact_kwargs: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
    parallel: int = DEFAULT_PARALLEL,
    connect_timeout: int = DEFAULT_CONNECT_TIMEOUT_S,
    command_timeout: float = DEFAULT_COMMAND_TIMEOUT_S,
) -> Iterator[HostResult[Any]]:
    """Yield one HostResult per selected host, as each finishes.

    ``fact_kwargs(host_data)`` gives the fact's command arguments for a host (from its inventory
    data). At most ``parallel`` hosts are connected at a time.
    """
    if parallel < 1:
        raise ConfigError(f"--parallel {parallel}: must be at least 1")
    ensure_gevent()
    forget_cached_host_keys()
    from gevent.pool import Pool
    from pyinfra.api import Config, State

    config = Config(CONNECT_TIMEOUT=connect_timeout, PARALLEL=parallel)
    state = selection.state if selection.state is not None else State()
    if not state.initialised:
        state.init(selection.inventory, config)
    hosts = [selection.inventory.get_host(name) for name in selection.names]

    def one(host: Any) -> HostResult[Any]:
        data = dict(host.data.dict()) if hasattr(host.data, "dict") else {}
        try:
            kwargs = dict(fact_kwargs(data)) if fact_kwargs else {}
        except GpuhostError as exc:
            return HostResult(host.name, True, error=str(exc), data=data)
        return _run_fact(state, host, fact_cls, kwargs, command_timeout, connect_timeout)

    pool = Pool(parallel)
    yield from pool.imap_unordered(one, hosts)
