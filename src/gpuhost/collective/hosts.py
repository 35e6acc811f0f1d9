"""The collective test's setup from the inventory, and the shell it runs its commands in.

``setup_from_inventory(inventory, limit, options)``: the launch host (the one host with
``gpuhost_collective_launcher: true``, else this machine) and the nodes (every other selected
host); nccl-tests' folder, GPUs per node, the floor (``collective.floors``, for the nodes'
fabric as ``gpuhost.fabric.expected`` gives it). Bad or missing
input is one ConfigError (exit 2) naming the key or option to give.

``executor(setup, hosts)`` runs a command on the launch host: ``sh -c`` here, or ``ssh`` with
an ssh_config written from the inventory's connection data (as ``gpuhost check`` does).
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuhost import toolrun
from gpuhost.checks_support.inventory import LOCAL, CheckHost, load_hosts, ssh_config
from gpuhost.collective.floors import Fabric, load_floors, resolve_floor
from gpuhost.collective.plan import DEFAULT_RUN_TIMEOUT, LAUNCHERS, Node, Setup
from gpuhost.collective.run import UNREACHABLE, Execute
from gpuhost.connection import openssh_cause
from gpuhost.errors import ConfigError
from gpuhost.fabric.expected import expectation
from gpuhost.inventory.contract import key_problem, value

SSH_FAILED = 255  # ssh's own exit status when it could not connect


@dataclass(frozen=True)
class Options:
    """What the command line gives (None: take the inventory's)."""

    nccl_tests: str | None = None
    floor: float | None = None
    gpus_per_node: int | None = None
    launcher: str = "slurm"
    launcher_args: tuple[str, ...] = ()
    run_timeout: float = DEFAULT_RUN_TIMEOUT


def _one_value(hosts: Sequence[CheckHost], key: str) -> Any:
    """The value every host that sets ``key`` gives (None when none does); hosts that
    disagree are a ConfigError naming them."""
    values = {h.name: value(h.data, key) for h in hosts if value(h.data, key) is not None}
    distinct = {repr(v) for v in values.values()}
    if len(distinct) > 1:
        shown = ", ".join(f"{name}: {v!r}" for name, v in values.items())
        raise ConfigError(f"collective: inventory data {key} differs between hosts ({shown})")
    return next(iter(values.values()), None)


def _split(hosts: list[CheckHost]) -> tuple[CheckHost | None, list[CheckHost]]:
    launchers = [h for h in hosts if value(h.data, "gpuhost_collective_launcher")]
    if len(launchers) > 1:
        names = ", ".join(h.name for h in launchers)
        raise ConfigError(
            f"collective: more than one host sets gpuhost_collective_launcher ({names}); "
            "expected one (or none: this machine launches)"
        )
    nodes = [h for h in hosts if h not in launchers]
    if len(nodes) < 2:
        raise ConfigError(
            f"collective: found {len(nodes)} node(s) to test, expected at least 2 (every "
            "selected host but the launcher is a node)"
        )
    return (launchers[0] if launchers else None), nodes


def _gpus_per_node(nodes: list[CheckHost], given: int | None) -> int:
    if given is not None:
        return given
    counts = {len(value(h.data, "gpuhost_gpus")) for h in nodes}
    if len(counts) == 1 and 0 not in counts:
        return counts.pop()
    raise ConfigError(
        "collective: GPUs per node unknown: give --gpus-per-node N or the same number of "
        f"GPUs in every node's gpuhost_gpus (found counts {sorted(counts)})"
    )


def _fabric(nodes: list[CheckHost]) -> Fabric | None:
    """The nodes' compute fabric when every node has the same (``gpuhost.fabric``: the node
    class of its gpuhost_gpus, with gpuhost_fabric over it), else None."""
    found = set()
    for host in nodes:
        gpus = [str(g) for g in value(host.data, "gpuhost_gpus")]
        wanted = expectation(gpus, host.data)
        if wanted is None or None in (wanted.ports, wanted.rate_gbps, wanted.link_layer):
            return None
        found.add(
            Fabric(int(wanted.ports or 0), float(wanted.rate_gbps or 0), str(wanted.link_layer))
        )
    return found.pop() if len(found) == 1 else None


NCCL_TESTS_KEY = "gpuhost_nccl_tests"


def setup_from_inventory(inventory: str, limit: str | None, options: Options) -> Setup:
    if options.launcher not in LAUNCHERS:
        raise ConfigError(f"--launcher {options.launcher!r}: expected one of {LAUNCHERS}")
    if inventory == LOCAL:
        raise ConfigError(
            "collective: needs an inventory listing the nodes to test (and, optionally, the "
            "launch host with gpuhost_collective_launcher: true)"
        )
    given = options.nccl_tests and key_problem(NCCL_TESTS_KEY, options.nccl_tests)
    if given:  # the option follows the inventory key's rule (one line, no '"')
        raise ConfigError(f"--nccl-tests{given.removeprefix(NCCL_TESTS_KEY)}")
    launcher, nodes = _split(load_hosts(inventory, limit))
    everyone = ([launcher] if launcher else []) + nodes
    folder = options.nccl_tests or _one_value(everyone, NCCL_TESTS_KEY)
    if not folder:
        raise ConfigError(
            "collective: where is nccl-tests? Give --nccl-tests DIR or inventory data "
            "gpuhost_nccl_tests (the folder of all_reduce_perf on every node); gpuhost "
            "installs nothing"
        )
    gpus = [str(g) for h in nodes for g in value(h.data, "gpuhost_gpus")]
    user_floor = options.floor
    if user_floor is None:
        user_floor = _one_value(everyone, "gpuhost_collective_floor")
    floor = resolve_floor(load_floors(), gpus, _fabric(nodes), user_floor)
    return Setup(
        launcher=options.launcher,
        launch_host=launcher.name if launcher else None,
        nodes=tuple(
            Node(
                h.name,
                value(h.data, "gpuhost_slurm_node") or h.name,
                str(h.data.get("ssh_hostname") or h.name),
            )
            for h in nodes
        ),
        gpus_per_node=_gpus_per_node(nodes, options.gpus_per_node),
        nccl_tests=str(folder),
        floor=floor,
        launcher_args=options.launcher_args,
        run_timeout=options.run_timeout,
    )


def _run(argv: list[str], timeout: float) -> tuple[int, str]:
    """(exit status, output) of ``argv``: the launcher and everything it started in one process
    group, killed whole at ``timeout`` (:mod:`gpuhost.toolrun`: a hung srun holding the output
    pipe cannot keep the run waiting)."""
    try:
        result = toolrun.run(argv, timeout, merge_stderr=True)
    except OSError as exc:
        return 127, f"gpuhost: cannot start {argv[0]}: {exc.strerror or exc}"
    if result.timed_out:
        return 124, result.text() + (
            f"gpuhost: the run took longer than {timeout:g} s and was stopped"
        )
    return result.returncode, result.text()


@contextmanager
def executor(inventory: str, limit: str | None, setup: Setup) -> Iterator[Execute]:
    """``execute(command, timeout)`` on the launch host, for the time of the ``with``."""
    if setup.launch_host in (None, LOCAL):
        yield lambda command, timeout: _run(["sh", "-c", command], timeout)
        return
    host = next(h for h in load_hosts(inventory, limit) if h.name == setup.launch_host)
    folder = tempfile.mkdtemp(prefix="gpuhost-collective-", dir="/tmp")
    try:
        config = Path(folder, "ssh_config")
        config.write_text(ssh_config([host], folder))
        base = ["ssh", "-F", str(config), "-o", "ControlMaster=auto", "-o", "ControlPersist=60"]

        def execute(command: str, timeout: float) -> tuple[int, str]:
            # GNU timeout signals the process group it leads (the launcher and its steps), and
            # KILLs it 10 s later when the TERM is ignored
            remote = f"timeout -k 10 {int(timeout)} sh -c {shlex.quote(command)}"
            rc, output = _run([*base, host.name, remote], timeout + 30)
            cause = openssh_cause(output, host.data, host.name) if rc == SSH_FAILED else None
            if cause:
                return rc, f"{UNREACHABLE}{host.name}: {cause}"
            return rc, output

        yield execute
        with contextlib.suppress(OSError):
            toolrun.run([*base, "-O", "exit", host.name], 30)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
