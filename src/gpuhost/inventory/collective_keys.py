"""Inventory data keys of the multi-node collective test (``gpuhost check --tier collective``,
docs/fabric.md); part of ``contract.KEYS``."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import StrictBool, StrictStr

from gpuhost.inventory.value_types import Key, PathText, PositiveNumber, key, matches
from gpuhost.node_tool import SLURM_NODE

_USED_BY = "check --tier collective"
SlurmNodeName = Annotated[StrictStr, matches(SLURM_NODE[0])]
IbDeviceName = Annotated[StrictStr, matches(re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"))]

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
        SlurmNodeName,
        SLURM_NODE[1],
        None,
        "The host's Slurm node name (default: its inventory name).",
        _USED_BY,
    ),
    key(
        "gpuhost_ib_device",
        IbDeviceName,
        "an RDMA device name, e.g. mlx5_0",
        None,
        "The HCA gpuhost accept's pairwise ib_write_bw uses (default: perftest's first).",
        "accept",
    ),
)
