"""What the collective test runs (pure): the setup read from the inventory, and the command lines.

A run is one nccl-tests binary over a set of nodes, started on the launch host (a Slurm
controller or login node the inventory marks with ``gpuhost_collective_launcher: true``, else
this machine) with Slurm's ``srun`` or MPI's ``mpirun``, one rank per GPU::

    srun -N 2 --ntasks-per-node=8 --nodelist=gpu01,gpu02 DIR/all_reduce_perf -b 1G -e 8G -f 2 -g 1
    mpirun -np 16 -H 10.0.0.1:8,10.0.0.2:8 DIR/all_reduce_perf -b 1G -e 8G -f 2 -g 1

nccl-tests must be built with MPI support (``make MPI=1``) for either to join the ranks in one
communicator (``srun`` then needs the cluster's PMI, e.g. ``--launcher-arg=--mpi=pmix``).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from gpuhost.collective.floors import Floor

LAUNCHERS = ("slurm", "mpi")
TESTS = ("all_reduce_perf", "all_gather_perf")
#: the bandwidth test's sizes: large messages only (busbw reaches its plateau above ~1 GB)
TEST_ARGS = ("-b", "1G", "-e", "8G", "-f", "2", "-g", "1")
MISSING_MARK = "gpuhost-collective-missing"
DEFAULT_RUN_TIMEOUT = 900.0


@dataclass(frozen=True)
class Node:
    name: str  # the inventory's
    slurm_name: str  # gpuhost_slurm_node, default the inventory name
    address: str  # ssh_hostname, default the inventory name (mpirun -H)


@dataclass(frozen=True)
class Setup:
    launcher: str
    launch_host: str | None  # an inventory host name, None: this machine
    nodes: tuple[Node, ...]
    gpus_per_node: int
    nccl_tests: str
    floor: Floor
    launcher_args: tuple[str, ...] = ()
    tests: tuple[str, ...] = TESTS
    test_args: tuple[str, ...] = TEST_ARGS
    run_timeout: float = DEFAULT_RUN_TIMEOUT

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def binary(self, test: str) -> str:
        return f"{self.nccl_tests.rstrip('/')}/{test}"


def _launch(setup: Setup, names: Sequence[str], per_node: int) -> list[str]:
    nodes = [setup.node(n) for n in names]
    if setup.launcher == "slurm":
        return [
            "srun",
            f"-N{len(nodes)}",
            f"--ntasks-per-node={per_node}",
            "--nodelist=" + ",".join(n.slurm_name for n in nodes),
            *setup.launcher_args,
        ]
    hosts = ",".join(f"{n.address}:{per_node}" for n in nodes)
    return ["mpirun", "-np", str(len(nodes) * per_node), "-H", hosts, *setup.launcher_args]


def run_command(setup: Setup, test: str, names: Sequence[str]) -> str:
    """The shell command that runs ``test`` over the nodes ``names`` (stderr joined)."""
    argv = [*_launch(setup, names, setup.gpus_per_node), setup.binary(test), *setup.test_args]
    return shlex.join(argv) + " 2>&1"


def preflight_command(setup: Setup) -> str:
    """One task per node checks that the launcher exists and every test binary is there; each
    missing one is a line ``MISSING_MARK NODE PATH`` (the node as its launcher names it)."""
    checks = " ".join(shlex.quote(setup.binary(t)) for t in setup.tests)
    script = (
        f'for b in {checks}; do [ -x "$b" ] || echo "{MISSING_MARK} '
        '${SLURMD_NODENAME:-$(hostname)} $b"; done'
    )
    tool = "srun" if setup.launcher == "slurm" else "mpirun"
    argv = [*_launch(setup, setup.names, 1), "sh", "-c", script]
    return (
        f"command -v {tool} >/dev/null 2>&1 || {{ echo '{MISSING_MARK} launcher {tool}'; "
        f"exit 127; }}; {shlex.join(argv)} 2>&1"
    )


def missing_lines(output: str) -> list[str]:
    """The preflight's findings: 'NODE: PATH' or 'launcher: srun', in order."""
    found = []
    for line in output.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0] == MISSING_MARK:
            found.append(f"{parts[1]}: {parts[2]}")
    return found
