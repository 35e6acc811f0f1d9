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
import fnmatch
import logging
import re
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from gpuhost.errors import ConfigError, GpuhostError

T = TypeVar("T")
SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
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
    # pyinfra logs through "pyinfra"; gpuhost reports hosts itself, so keep its log quiet unless
    # the user configured logging.
    logging.getLogger("pyinfra").addHandler(logging.NullHandler())
    logging.getLogger("pyinfra").propagate = False


def forget_cached_host_keys() -> None:
    """pyinfra memoizes each known_hosts file for the life of the process; a long-lived process
    (a rolling upgrade, a test session) must re-read it so hosts added or re-keyed since are
    checked against the file as it is now, not as it was at the first connection."""
    from pyinfra.connectors.sshuserclient import client

    cache = getattr(client.get_host_keys, "cache", None)
    if isinstance(cache, dict):
        cache.clear()


def parse_shard(text: str) -> tuple[int, int]:
    """``"3/10"`` → (3, 10); ConfigError for anything else (K must be in 1..N)."""
    match = SHARD_RE.match(text or "")
    if not match:
        raise ConfigError(f"--shard {text!r}: expected K/N, e.g. 3/10")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise ConfigError(f"--shard {text}: K must be between 1 and N (found K={index}, N={count})")
    return index, count


def shard_hosts(names: list[str], index: int, count: int) -> list[str]:
    """The K-th of N slices: hosts at positions K-1, K-1+N, ... of the (inventory-ordered) list.

    Every host lands in exactly one shard, and shard sizes differ by at most one.
    """
    return names[index - 1 :: count]


@dataclass(frozen=True)
class HostSelection:
    """The hosts one run covers, in inventory order, with the pyinfra Inventory they live in."""

    inventory_path: str
    inventory: Any  # pyinfra.api.Inventory
    names: list[str]
    shard_label: str | None = None
    state: Any = None  # the pyinfra State the inventory was loaded in (initialised by gather)


def load_inventory(path: str, state: Any = None) -> Any:
    """A pyinfra inventory from a Python inventory file (and its group_data/ beside it)."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{path}: inventory file not found (expected a pyinfra inventory .py)")
    from pyinfra.api import State
    from pyinfra.context import ctx_state
    from pyinfra_cli.exceptions import CliError
    from pyinfra_cli.inventory import make_inventory_from_files

    try:
        with ctx_state.use(state if state is not None else State()):
            inventory = make_inventory_from_files(str(file), cwd=str(file.parent))
    except CliError as exc:
        raise ConfigError(f"{path}: cannot load inventory: {exc}") from exc
    except Exception as exc:  # the inventory is user Python; anything can go wrong in it
        raise ConfigError(f"{path}: cannot load inventory: {_describe(exc)}") from exc
    if len(list(inventory)) == 0:
        raise ConfigError(f"{path}: the inventory has no hosts")
    return inventory


def _describe(exc: BaseException) -> str:
    """``Type: message`` of the user's own exception (pyinfra wraps it as args[0])."""
    inner = exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else exc
    try:
        text = str(inner)
    except Exception:  # some wrappers cannot print themselves
        text = repr(inner.args)
    return f"{type(inner).__name__}: {text}"


def _limit(inventory: Any, names: list[str], limit: str) -> list[str]:
    wanted: set[str] = set()
    for item in (part.strip() for part in limit.split(",")):
        if not item:
            continue
        group = inventory.groups.get(item) if hasattr(inventory, "groups") else None
        if group:
            wanted.update(host.name for host in group)
            continue
        matched = [name for name in names if fnmatch.fnmatchcase(name, item)]
        if not matched:
            groups = ", ".join(sorted(getattr(inventory, "groups", {}) or {})) or "none"
            raise ConfigError(
                f"--limit {item!r}: no host or group of that name in the inventory "
                f"(groups: {groups})"
            )
        wanted.update(matched)
    return [name for name in names if name in wanted]


def select_hosts(path: str, limit: str | None = None, shard: str | None = None) -> HostSelection:
    """Load the inventory and pick the hosts of this run (``--limit`` first, then ``--shard``)."""
    from pyinfra.api import State

    state = State()
    inventory = load_inventory(path, state)
    names = [host.name for host in inventory]
    if limit:
        names = _limit(inventory, names, limit)
    label = None
    if shard:
        index, count = parse_shard(shard)
        names = shard_hosts(names, index, count)
        label = f"{index}/{count}"
    return HostSelection(path, inventory, names, label, state)


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
    state: Any, host: Any, fact_cls: type, kwargs: Mapping[str, Any], timeout: float
) -> HostResult[Any]:
    from pyinfra.api.arguments import CONNECTOR_ARGUMENT_KEYS, pop_global_arguments
    from pyinfra.api.exceptions import ConnectError
    from pyinfra.context import ctx_host, ctx_state

    data = dict(host.data.dict()) if hasattr(host.data, "dict") else {}
    try:
        host.connect(show_errors=False, raise_exceptions=True)
    except ConnectError as exc:
        return HostResult(host.name, False, error=str(exc.args[0] if exc.args else exc), data=data)
    except Exception as exc:  # DNS, sockets, keys: still a host that could not be reached
        return HostResult(host.name, False, error=f"{type(exc).__name__}: {exc}", data=data)
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
        return _run_fact(state, host, fact_cls, kwargs, command_timeout)

    pool = Pool(parallel)
    yield from pool.imap_unordered(one, hosts)
