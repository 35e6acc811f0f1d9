"""The one inventory loader of every gpuhost command, and the one meaning of ``--limit``.

.. code:: python

    selection = select("inventories/fleet.py", limit="gpu_nodes,login-*", shard="1/2")
    for name in selection.names:                 # the selected hosts, in inventory order
        data = selection.data(name)              # merged data, already checked by the contract
    for entry in selection.entries():            # InventoryHost(name, data, groups): the hosts
        ...                                      # as plain values, for one session per host

Loading is pyinfra's (``pyinfra_cli.inventory``: module-level host lists, ``group_data/`` beside
the file and in the current directory, ``override_data`` like ``pyinfra --data``) with gpuhost's
checks around it, all before any host is contacted; each failure is one ConfigError line:

- the file is missing, not Python, raises, or calls ``sys.exit``;
- the inventory has no hosts;
- a host is listed twice in one group, or two groups give it different values for one key;
- ``--limit``: comma-separated items (the option may also be repeated); each item is a group
  name or a glob over host names (case-sensitive); an item that matches nothing is an error;
  the selection keeps inventory order;
- ``--shard K/N``: the K-th of N slices of the selection;
- every selected host's data keeps the contract (``gpuhost.inventory.contract``), and its
  ``gpuhost_profiles_file`` loads;
- for the commands that use profiles (``uses_profiles``: provision, audit, check, upgrade,
  inventory check), every selected host's ``gpuhost_profile`` names a profile of the table that
  host is judged against (``--profiles`` wins over ``gpuhost_profiles_file``, over built-ins).
"""

from __future__ import annotations

import difflib
import fnmatch
import re
import traceback
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from gpuhost.bundle.setting import BUNDLE_KEY, bundle_dir_problem
from gpuhost.errors import ConfigError
from gpuhost.inventory import contract
from gpuhost.pyinfra_adapter import inventory_groups, make_inventory
from gpuhost.redaction import remember_data_secrets
from gpuhost.signals import Stopped, stopped_in

SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class InventoryHost:
    """One selected host as plain values: its name, merged data and groups (the upgrade opens
    one pyinfra session per host from it)."""

    name: str
    data: dict[str, Any]
    groups: tuple[str, ...]


@dataclass(frozen=True)
class Selection:
    """The hosts one run covers (``names``, inventory order) and the pyinfra objects they live
    in: ``inventory`` was loaded in ``state`` (not yet initialised)."""

    path: str
    inventory: Any  # pyinfra.api.Inventory
    names: list[str]
    state: Any  # pyinfra.api.State
    shard_label: str | None = None

    def host(self, name: str) -> Any:
        return self.inventory.get_host(name)

    def hosts(self) -> list[Any]:
        return [self.inventory.get_host(name) for name in self.names]

    def data(self, name: str) -> dict[str, Any]:
        return host_data(self.inventory.get_host(name))

    def groups(self, name: str) -> tuple[str, ...]:
        host = self.inventory.get_host(name)
        return tuple(sorted(g for g, members in self.inventory.groups.items() if host in members))

    def entries(self) -> list[InventoryHost]:
        """The selected hosts, in inventory order, with their data and groups."""
        return [InventoryHost(n, self.data(n), self.groups(n)) for n in self.names]


def host_data(host: Any) -> dict[str, Any]:
    """A pyinfra host's merged data (override, host, groups, all) as a plain dict."""
    return dict(host.data.dict()) if hasattr(host.data, "dict") else dict(host.data)


def _user_error(path: str, exc: BaseException) -> str:
    """``Type: message (line N)`` of the inventory's own exception (pyinfra wraps it)."""
    inner = exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else exc
    try:
        text = str(inner).strip().splitlines()[0] if str(inner).strip() else ""
    except Exception:  # some exceptions cannot print themselves
        text = repr(inner.args)
    where = ""
    resolved = Path(path).resolve()
    group_data = resolved.parent / "group_data"

    def place(filename: str | None, line: int | None) -> str:
        """' (line N)' in the inventory itself, ' (group_data/x.py line N)' in its group data."""
        file = Path(filename or "").resolve()
        if file == resolved:
            return f" (line {line})"
        if file.parent == group_data:
            return f" ({Path(path).parent / 'group_data' / file.name} line {line})"
        return ""

    for frame in traceback.extract_tb(inner.__traceback__):
        where = place(frame.filename, frame.lineno) or where
    if isinstance(inner, SyntaxError) and inner.lineno:
        where = place(inner.filename, inner.lineno) or f" (line {inner.lineno})"
        text = inner.msg
    return f"{type(inner).__name__}{': ' + text if text else ''}{where}"


def _names(hosts: Any) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(hosts, tuple):
        hosts = hosts[0]
    out = []
    for item in hosts:
        if isinstance(item, tuple):
            name = item[0]
            data = item[1] if len(item) > 1 and isinstance(item[1], dict) else {}
        else:
            name, data = item, {}
        out.append((str(name), data))
    return out


_ENTRY = "a host name (a non-empty string) or a (name, {data}) pair"


def _check_entries(path: str, groups: Mapping[str, Any]) -> None:
    """Every group is a list of host entries, or a (list, {group data}) pair, and every entry a
    name or a (name, {data}) pair: anything else made pyinfra fail with a bare IndexError or
    TypeError (``('h1',)``, ``('h1', None)``, ``''``)."""
    for group, value in groups.items():
        hosts = value
        if isinstance(value, tuple):
            if len(value) != 2 or not isinstance(value[1], dict):
                raise ConfigError(
                    f"{path}: group {group!r} is {contract.shown(value)}: expected a list of "
                    "hosts, or a (list of hosts, {group data}) pair"
                )
            hosts = value[0]
        if not isinstance(hosts, (list, tuple)):
            raise ConfigError(f"{path}: group {group!r}: expected a list of hosts")
        for index, item in enumerate(hosts):
            name = item[0] if isinstance(item, tuple) and len(item) == 2 else item
            if not (
                isinstance(name, str)
                and name.strip()
                and (isinstance(item, str) or isinstance(item[1], dict))
            ):
                raise ConfigError(
                    f"{path}: group {group!r} entry {index}: found {contract.shown(item)}, "
                    f"expected {_ENTRY}"
                )
            problem = contract.host_name_problem(name)
            if problem:
                raise ConfigError(f"{path}: group {group!r} entry {index}: {problem}")


def _check_duplicates(path: str, groups: Mapping[str, Any]) -> None:
    _check_entries(path, groups)
    seen: dict[str, dict[str, tuple[str, Any]]] = {}
    for group, hosts in groups.items():
        counts = Counter(name for name, _ in _names(hosts))  # linear: 20,000 hosts in ms
        for name, count in counts.items():
            if count > 1:
                raise ConfigError(
                    f"{path}: host {name} is listed {count} times in group "
                    f"{group!r}: expected each host once per group (pyinfra keeps the last entry)"
                )
        for name, data in _names(hosts):
            values = seen.setdefault(name, {})
            for key, val in data.items():
                if key in values and values[key][1] != val:
                    first = values[key][0]
                    raise ConfigError(
                        f"{path}: host {name}: {key} is {contract.shown(values[key][1])} in "
                        f"group {first!r} but {contract.shown(val)} in group {group!r}: expected "
                        "one value (set it once, or in group_data/)"
                    )
                values.setdefault(key, (group, val))


def load_inventory(
    path: str, state: Any = None, override_data: Mapping[str, Any] | None = None
) -> Any:
    """A pyinfra Inventory from an inventory file, loaded as the pyinfra CLI does (in ``state``,
    a new pyinfra State when None). Host data is not checked here: :func:`select` does that."""
    return _load(path, state, override_data)[0]


def _load(
    path: str, state: Any = None, override_data: Mapping[str, Any] | None = None
) -> tuple[Any, dict[str, Any], Any]:
    """(inventory, the groups the file gave, the State it was built in): :func:`load_inventory`."""
    file = Path(path)
    if not path.strip():
        raise ConfigError("the inventory argument is empty (expected a pyinfra inventory .py)")
    if not file.is_file():
        what = (
            "is a directory"
            if file.is_dir()
            else "is not a regular file"
            if file.exists()
            else "not found"
        )
        hint = ""
        if not file.exists() and file.suffix != ".py" and "/" not in path:
            # pyinfra's CLI takes host names here; gpuhost reads inventories from files only
            names = [n.strip() for n in path.split(",") if n.strip()]
            hint = f"; to name hosts directly, write them in one: hosts = {names!r}"
        raise ConfigError(f"{path}: inventory file {what} (expected a pyinfra inventory .py{hint})")
    if file.suffix != ".py":
        raise ConfigError(
            f"{path}: not a pyinfra inventory (expected a Python file ending in .py that defines "
            f"host lists, e.g. gpu_nodes = ['n1', 'n2']; found a {file.suffix or 'suffix-less'} "
            "file)"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyinfra_cli patches the stdlib for gevent on import
        from pyinfra.api import State
        from pyinfra.context import ctx_state

    if state is None:
        state = State()
    try:
        with ctx_state.use(state):
            groups = inventory_groups(str(path))  # read afresh, not pyinfra's cached code
            _check_duplicates(path, groups)
            # the file is executed once: pyinfra builds the inventory from the groups read above
            inventory = make_inventory(str(path), groups, override_data)
    except (ConfigError, Stopped):  # Stopped: a signal while the file ran, not the file's fault
        raise
    except SystemExit as exc:
        if (stopped := stopped_in(exc)) is not None:
            raise stopped from None
        raise ConfigError(
            f"{path}: the inventory file called sys.exit({exc.code!r}) while loading: "
            "expected it to define host lists"
        ) from None
    except Exception as exc:  # the inventory is user Python; anything can go wrong in it
        if (stopped := stopped_in(exc)) is not None:  # a signal inside a lock's release
            raise stopped from None
        raise ConfigError(f"{path}: cannot load inventory: {_user_error(path, exc)}") from None
    for host in inventory:  # its secrets never reach a log record or an error line
        remember_data_secrets(host_data(host))
    if len(inventory) == 0:
        raise ConfigError(
            f"{path}: the inventory has no hosts (expected module-level lists of host names, "
            "e.g. gpu_nodes = ['n1', 'n2'])"
        )
    return inventory, groups, state


def _only(
    path: str, groups: Mapping[str, Any], names: Sequence[str], loaded: tuple[Any, Any]
) -> Any:
    """The inventory of just ``names`` (each group and its data as the file gave them, the
    other hosts left out), built in the same State: what a run over a few hosts of a large
    inventory initialises and connects (pyinfra's ``State.init`` costs the square of the
    inventory's hosts: 20,000 hosts, minutes for a ``--limit`` of three)."""
    from pyinfra.context import ctx_state

    state, override_data = loaded
    keep = set(names)

    def kept(hosts: Any) -> list[Any]:
        return [h for h in hosts if (h[0] if isinstance(h, tuple) else h) in keep]

    narrowed = {
        group: (kept(value[0]), value[1]) if isinstance(value, tuple) else kept(value)
        for group, value in groups.items()
    }
    with ctx_state.use(state):
        return make_inventory(str(path), narrowed, override_data)


def limit_items(limit: str | Iterable[str] | None) -> list[str]:
    """``--limit`` values (a string or the repeated option's values), split at commas."""
    if limit is None:
        return []
    values = [limit] if isinstance(limit, str) else list(limit)
    if any(not value.strip(" ,") for value in values):  # '--limit ""' selected every host
        raise ConfigError(
            "--limit: an empty value; expected group names or host name globs, comma-separated"
        )
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def limit_names(
    inventory: Any, names: Sequence[str], limit: str | Iterable[str] | None
) -> list[str]:
    """The hosts of ``names`` that ``--limit`` selects, in inventory order (see the module doc);
    ConfigError naming the first item that matches nothing."""
    items = limit_items(limit)
    if not items:
        return list(names)
    groups = getattr(inventory, "groups", {}) or {}
    wanted: set[str] = set()
    for item in items:
        if item in groups:
            matched = [host.name for host in groups[item]]
        else:
            matched = [name for name in names if fnmatch.fnmatchcase(name, item)]
        if not matched:
            known = ", ".join(sorted(g for g in groups if groups[g])) or "none"
            hosts = ", ".join(list(names)[:10]) + (", ..." if len(names) > 10 else "")
            raise ConfigError(
                f"--limit {item}: matches no host or group of the inventory "
                f"(groups: {known}; hosts: {hosts})"
            )
        wanted.update(matched)
    return [name for name in names if name in wanted]


def parse_shard(text: str) -> tuple[int, int]:
    """``"3/10"`` -> (3, 10); ConfigError for anything else (K must be in 1..N)."""
    match = SHARD_RE.match(text or "")
    if not match:
        raise ConfigError(f"--shard {text!r}: expected K/N, e.g. 3/10")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise ConfigError(f"--shard {text}: K must be between 1 and N (found K={index}, N={count})")
    return index, count


def shard_names(names: list[str], index: int, count: int) -> list[str]:
    """The K-th of N slices: hosts at positions K-1, K-1+N, ... (sizes differ by at most one)."""
    return names[index - 1 :: count]


def profile_name_problem(
    name: str, data: Mapping[str, Any], profiles: str | None = None
) -> str | None:
    """Why host ``name``'s ``gpuhost_profile`` is not in the profile table it would use
    (``profiles`` = the ``--profiles`` option, which wins over its ``gpuhost_profiles_file``);
    None when it is, or when the host names no profile (the marker decides then)."""
    from gpuhost.inventory.profiles import profile_table, profiles_file

    wanted = data.get("gpuhost_profile")
    if not isinstance(wanted, str) or not wanted:
        return None
    table = profile_table(profiles, data)
    if wanted in table:
        return None
    source = profiles_file(profiles, data)
    near = difflib.get_close_matches(wanted, list(table), n=1)
    return (
        f"host {name}: gpuhost_profile: {wanted!r} is not a known profile (profiles: built-in"
        + (f" + {source}" if source else "")
        + f"); expected one of: {', '.join(sorted(table)) or 'none'}"
        + (f"; did you mean {near[0]}?" if near else "")
    )


def _origin(path: str, inventory: Any, name: str, key: str) -> str:
    """Where host ``name``'s value of ``key`` was set, as a suffix for a problem line: "" when
    on the host's own line in the inventory file (the message names that file already), else
    the group_data file (or group) whose data gave it."""
    if key in inventory.host_data.get(name, {}):
        return ""
    folder = Path(path).parent / "group_data"
    groups = [g for g in inventory.get_host(name).groups if key in inventory.group_data.get(g, {})]
    if groups:
        file = folder / f"{groups[0]}.py"
        return f" (set in {file})" if file.is_file() else f" (set for group {groups[0]!r})"
    if key in (inventory.data or {}):
        file = folder / "all.py"
        return f" (set in {file})" if file.is_file() else " (set for all hosts)"
    return ""


def check_hosts(
    path: str,
    inventory: Any,
    names: Iterable[str],
    uses_profiles: bool = False,
    profiles: str | None = None,
    installs: bool = False,
) -> None:
    """Every named host's data against the contract, and each profiles file it names loads;
    with ``uses_profiles`` also that its ``gpuhost_profile`` is known (see
    :func:`profile_name_problem`); with ``installs`` also that the data has what installing that
    profile needs (``profiles.install_data_problem``). ConfigError with the first host's problem
    otherwise."""
    from gpuhost.inventory.profiles import install_data_problem, profile_table

    for name in names:
        data = host_data(inventory.get_host(name))
        try:
            contract.check_host_data(name, data, partial(_origin, path, inventory, name))
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        except RecursionError:  # d = {}; d["a"] = d
            raise ConfigError(
                f"{path}: host {name}: its data contains itself or is nested too deeply "
                "(expected plain values, lists and mappings)"
            ) from None
        if data.get("gpuhost_profiles_file"):
            try:
                profile_table(None, data)
            except ConfigError as exc:
                raise ConfigError(f"{path}: host {name}: gpuhost_profiles_file: {exc}") from None
        problem = profile_name_problem(name, data, profiles) if uses_profiles else None
        if problem:
            raise ConfigError(f"{path}: {problem}")
        wanted = data.get("gpuhost_profile")
        if installs and isinstance(wanted, str) and wanted:
            problem = install_data_problem(profile_table(profiles, data)[wanted], data)
            if problem:
                raise ConfigError(f"{path}: host {name}: {problem}")
        bundle = data.get(BUNDLE_KEY) if installs else None
        problem = bundle_dir_problem(bundle["path"]) if bundle and bundle.get("path") else None
        if problem:  # a bundle on this machine is judged here, not once per host it reaches
            raise ConfigError(f"{path}: host {name}: {BUNDLE_KEY}: {problem}")


def select(
    path: str,
    limit: str | Iterable[str] | None = None,
    shard: str | None = None,
    override_data: Mapping[str, Any] | None = None,
    state: Any = None,
    uses_profiles: bool = False,
    profiles: str | None = None,
    installs: bool = False,
) -> Selection:
    """Load the inventory, pick this run's hosts (``--limit``, then ``--shard``) and check their
    data: everything a command needs before it contacts any host. A command that judges or
    installs profiles passes ``uses_profiles`` (and its ``--profiles`` option as ``profiles``
    unless it put it in ``override_data``): every selected host's profile name is resolved. A
    command that installs the hosts' profiles (provision, ``inventory check``) passes
    ``installs``: the data installing each needs is there too."""
    if state is None:
        from pyinfra.api import State

        state = State()
    inventory, groups, state = _load(path, state, override_data)
    names = limit_names(inventory, [host.name for host in inventory], limit)
    label = None
    if shard:
        index, count = parse_shard(shard)
        selected = len(names)
        names = shard_names(names, index, count)
        label = f"{index}/{count}"
        if not names:  # its report would list no host: report merge refuses such a report
            raise ConfigError(
                f"--shard {label}: selects no host ({selected} host(s) selected, fewer than "
                f"{count} shards); expected at most {selected} shards"
            )
    check_hosts(path, inventory, names, uses_profiles, profiles, installs)
    if len(names) < len(inventory):  # a run costs what it selects (pyinfra's State.init)
        inventory = _only(path, groups, names, (state, override_data))
    return Selection(path, inventory, names, state, label)
