"""pytest fixtures for the gpuhost lab (registered by tests/conftest.py).

Fixtures
--------
``lab`` (session scope) - a factory ``lab(n: int = 1) -> Lab``.  The first call boots the session's
    lab with hosts h1..hn; a later call with a bigger n adds hosts, a smaller n returns a view of
    the first n hosts.  All tests of a session share this one lab: a test that changes a host must
    say so by using ``fresh_host`` or by calling ``lab(n).reset(host)``.  The lab goes down at the
    end of the session (not with GPUHOST_LAB_KEEP=1).
``lab_hosts`` (function scope) - ``list[Host]`` of the session lab; the count comes from indirect
    parametrisation: ``@pytest.mark.parametrize("lab_hosts", [4], indirect=True)`` (default 1).
``fresh_host`` (function scope) - the session lab's last host re-created from the base image
    before the test and again after it, for tests that break a host (stop sshd, cut its network,
    install packages, reboot it).

``Lab``: ``.name``, ``.hosts``, ``.host("h2")``, ``.inventory_path``, ``.ssh_config_path``,
``.known_hosts_path``, ``.key_path``, ``.proxy_url``, ``.repo_url`` (debian12's;
``.repo_url_for(host)``: that of the host's OS shape), ``.repo_key_path`` (on this
machine), ``.repo_key_path_on_host``, ``.repo_key_url``, ``.gateway``,
``.reset(*hosts) -> list[Host]`` (all of the view's hosts when none are given).

``Host``: ``.name``, ``.address``, ``.ssh_args`` (argv prefix: ``[*host.ssh_args, "uname -a"]``),
``.run(cmd, timeout=120) -> CompletedProcess[str]`` over SSH, ``.testinfra()`` (a testinfra Host
using the lab's ssh_config with multiplexing), ``.exec(cmd)`` inside the container without SSH
(works when its network is cut), ``.disconnect()`` / ``.reconnect()`` (cut its network: SSH then
times out, like an unreachable server), ``.stop_sshd()``.

The session's lab name is $GPUHOST_LAB when set (pytest-xdist workers after gw0 add their id:
``$GPUHOST_LAB-gw1``), else the first free of pytest, pytest-2, ..., pytest-9 (so concurrent
sessions, e.g. pytest-xdist workers or two engineers, never collide).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from . import registry
from .config import LabConfigError
from .core import LabManager, lab_lock, preflight
from .system import LabError


@dataclass
class Host:
    """One lab host as tests see it."""

    manager: LabManager
    record: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.record["name"])

    @property
    def address(self) -> str:
        return str(self.record["address"])

    @property
    def ssh_args(self) -> list[str]:
        return ["ssh", "-F", str(self.manager.sd / "ssh_config"), self.name]

    def run(self, cmd: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run a shell command on the host over SSH (never raises on a non-zero exit)."""
        return self.manager.ssh(self.record, cmd, timeout=timeout)

    def exec(self, cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run a shell command inside the container through nsenter (no network needed)."""
        leader = self.manager.host_leader(self.record)
        if leader is None:
            raise LabError(f"host {self.name} is not running")
        return subprocess.run(
            ["nsenter", "-t", str(leader), "-m", "-u", "-i", "-n", "-p", "-r", "-w",
             "/bin/sh", "-c", cmd],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
        )

    def testinfra(self) -> Any:
        """A testinfra host made afresh: ``testinfra.get_host`` caches hosts by spec and
        ssh_config path, and a session lab's ``h1`` may be another OS by now (a shaped host booted
        where an earlier module's Debian h1 was), whose cached ``system_info`` would be stale."""
        from testinfra.backend import get_backend
        from testinfra.host import Host

        return Host(get_backend(f"ssh://{self.name}",
                                ssh_config=str(self.manager.sd / "ssh_config")))

    def disconnect(self) -> None:
        self.manager.set_link(self.record, up=False)
        self.manager._ssh_close(self.record)

    def reconnect(self) -> None:
        self.manager.set_link(self.record, up=True)

    def stop_sshd(self) -> None:
        proc = self.exec("systemctl stop ssh.service ssh.socket")
        if proc.returncode != 0:
            raise LabError(f"{self.name}: could not stop sshd: {proc.stderr.strip()}")
        self.manager._ssh_close(self.record)

    def __repr__(self) -> str:
        return f"<lab host {self.name} {self.address}>"


class Lab:
    """A view of the session lab with hosts h1..hn."""

    def __init__(self, manager: LabManager, state: dict[str, Any], count: int) -> None:
        self.manager = manager
        self.state = state
        self.hosts = [Host(manager, h) for h in state["hosts"][:count]]

    name = property(lambda self: self.manager.name)
    inventory_path = property(lambda self: self.manager.sd / "inventory.py")
    ssh_config_path = property(lambda self: self.manager.sd / "ssh_config")
    known_hosts_path = property(lambda self: self.manager.sd / "known_hosts")
    key_path = property(lambda self: self.manager.sd / "id_ed25519")
    proxy_url = property(lambda self: str(self.state["proxy_url"]))
    repo_url = property(lambda self: str(self.state["repo_url"]))
    repo_key_url = property(lambda self: str(self.state["repo_key_url"]))
    repo_key_path = property(lambda self: Path(self.state["repo_key_path"]))
    repo_key_path_on_host = property(lambda self: str(self.state["repo_key_path_on_host"]))
    gateway = property(lambda self: str(self.state["gateway"]))

    def repo_url_for(self, host: Host) -> str:
        """The stand-in NVIDIA repository of the host's OS shape (``lab up --os``)."""
        from .toolfiles import repo_url

        return repo_url(self.manager.load() or self.state, host.record)

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(f"lab {self.name!r} has no host {name!r} in this view")

    def reset(self, *hosts: Host | str) -> list[Host]:
        """Re-create hosts from the base image (fresh overlay, same address and host key);
        all of this view's hosts when none are named."""
        chosen = [self.host(h) if isinstance(h, str) else h for h in hosts] or self.hosts
        records = self.manager.reset(*(int(h.record["index"]) for h in chosen))
        for h, record in zip(chosen, records, strict=True):
            h.record = record
        return chosen


class LabSession:
    """The one lab of a pytest session: named, locked, booted on demand, torn down at the end."""

    def __init__(self) -> None:
        self.stack = contextlib.ExitStack()
        self.manager: LabManager | None = None
        self.count = 0
        self.state: dict[str, Any] | None = None

    def _claim(self) -> LabManager:
        preflight()
        wanted = os.environ.get("GPUHOST_LAB")
        worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
        if wanted and worker != "gw0":  # each pytest-xdist worker has a lab of its own
            wanted = f"{wanted}-{worker}"
        names = [wanted] if wanted else ["pytest"] + [f"pytest-{i}" for i in range(2, 10)]
        errors = []
        for name in names:
            mgr = LabManager(name)
            attempt = contextlib.ExitStack()
            try:
                attempt.enter_context(lab_lock(mgr.names, wait=False))
            except LabError as exc:
                errors.append(str(exc))
                continue
            other = registry.owner(name)
            if other is not None and other != mgr.sd:
                attempt.close()
                errors.append(f"lab {name!r} belongs to {other}")
                continue
            self.stack.enter_context(attempt)
            if not os.environ.get("GPUHOST_LAB_KEEP"):
                self.stack.callback(mgr.down)
            return mgr
        raise LabError("no free lab name for this pytest session: " + "; ".join(errors))

    def get(self, count: int) -> Lab:
        try:
            if self.manager is None:
                self.manager = self._claim()
            if count > self.count or self.state is None:
                self.state = self.manager.up(max(count, self.count))
                self.count = max(count, self.count)
        except (LabError, LabConfigError) as exc:
            pytest.fail(f"lab: {exc}", pytrace=False)
        assert self.state is not None
        return Lab(self.manager, self.state, count)

    def close(self) -> None:
        self.stack.close()


class LabFactory:
    """What the ``lab`` fixture returns: call it with a host count."""

    def __init__(self, session: LabSession) -> None:
        self.session = session

    def __call__(self, n: int = 1) -> Lab:
        return self.session.get(n)

    @property
    def count(self) -> int:
        """Hosts the session lab has now (0 before the first call)."""
        return self.session.count


@pytest.fixture(scope="session")
def lab() -> Iterator[LabFactory]:
    session = LabSession()
    try:
        yield LabFactory(session)
    finally:
        session.close()


@pytest.fixture
def lab_hosts(lab: LabFactory, request: pytest.FixtureRequest) -> list[Host]:
    count = int(getattr(request, "param", 1))
    return lab(count).hosts


@pytest.fixture
def fresh_host(lab: LabFactory) -> Iterator[Host]:
    view = lab(max(1, lab.count))
    host = view.reset(view.hosts[-1])[0]
    try:
        yield host
    finally:
        view.reset(host)
