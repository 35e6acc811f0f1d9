"""Run one pyinfra fact on the hosts of a selection in parallel; one result per host.

Reusable by every fleet command (audit, provision checks, upgrade pre-flight); the hosts come from
the one loader (``gpuhost.inventory.loader.select``: inventory, ``--limit``, ``--shard``):

.. code:: python

    selection = select("inventories/lab.py", limit="gpu_nodes", shard="2/4")
    for result in gather(selection, GpuStack, fact_kwargs=lambda data: {}, parallel=64):
        if result.ok:
            use(result.name, result.value, result.data)      # value = fact.process(...)
        else:
            report(result.name, result.reachable, result.error)

Each host costs ONE command (the fact's), over one SSH connection opened for it and closed
after; results are yielded as hosts finish (streaming), at most ``parallel`` hosts at a time.
An unreachable host, a failing command or unreadable output is a result, never an exception.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from gpuhost.connection import connect_cause
from gpuhost.errors import ConfigError, GpuhostError
from gpuhost.inventory.loader import Selection
from gpuhost.pyinfra_adapter import (
    ensure_gevent,
    forget_cached_host_keys,
    host_connector_arguments,
)

T = TypeVar("T")
DEFAULT_PARALLEL = 64
DEFAULT_CONNECT_TIMEOUT_S = 10
DEFAULT_COMMAND_TIMEOUT_S = 300


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
    data = dict(host.data.dict()) if hasattr(host.data, "dict") else {}
    try:
        host.connect(show_errors=False, raise_exceptions=True)
    except Exception as exc:  # DNS, sockets, keys: a host that could not be reached, and why
        cause = connect_cause(exc, data, host.name, connect_timeout)
        return HostResult(host.name, False, error=cause, data=data)
    try:
        fact = fact_cls()
        command = fact.command(**kwargs)
        connector_args = host_connector_arguments(state, host)
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
    selection: Selection,
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
