"""Inventory data keys of the multi-node collective test (``gpuhost check --tier collective``,
docs/fabric.md); part of ``contract.KEYS``."""

from __future__ import annotations

from pydantic import StrictBool

from gpuhost.inventory.value_types import Key, PathText, PositiveNumber, Word, key

_USED_BY = "check --tier collective"

COLLECTIVE_KEYS: tuple[Key, ...] = (
    key(
        "gpuhost_nccl_tests",
        PathText,
        "a folder path (one line, no '\"'), e.g. /opt/nccl-tests/build",
        None,
        "Where nccl-tests' binaries (all_reduce_perf, all_gather_perf) are on every node "
        "(--nccl-tests takes its place); gpuhost installs none.",
        _USED_BY,
    ),
    key(
        "gpuhost_collective_launcher",
        StrictBool,
        "true or false",
        False,
        "This host starts the collective runs (srun/mpirun): a Slurm controller or login "
        "node, not one of the nodes tested. Without one, this machine starts them.",
        _USED_BY,
    ),
    key(
        "gpuhost_collective_floor",
        PositiveNumber,
        "a positive number of GB/s",
        None,
        "Your own all_reduce bus-bandwidth floor (GB/s), in place of the data's "
        "(--floor takes its place).",
        _USED_BY,
    ),
    key(
        "gpuhost_slurm_node",
        Word,
        "a Slurm node name",
        None,
        "The host's Slurm node name (default: its inventory name).",
        _USED_BY,
    ),
)
