"""TEST EQUIPMENT: a stand-in for Slurm's ``srun`` (and, called with ``--as-mpirun`` first,
Open MPI's ``mpirun -np N -H host:slots,...``, with Open MPI's rank variables) on this machine,
for the offline collective tests. ``srun -N2 --ntasks-per-node=G --nodelist=a,b [--other] CMD
ARGS`` starts one process per task at once, each with Slurm's variables (SLURMD_NODENAME,
SLURM_PROCID, SLURM_NTASKS) and the fake nccl-tests' knobs: the node's slow file
``$FAKE_SLURM_ROOT/NODE/nccl-slow`` and rank 0 on 127.0.0.1. A node without a folder under
``$FAKE_SLURM_ROOT`` is refused as srun refuses an unknown node. Every command line goes to
``$FAKE_SLURM_ROOT/srun.log``. Output: every task's, in task order; exit status: the worst."""

import os
import subprocess
import sys
from pathlib import Path


def main() -> int:
    args = sys.argv[1:]
    mpi = args[:1] == ["--as-mpirun"]
    args = args[1:] if mpi else args
    nodes: list[str] = []
    per_node = 1
    while args and args[0].startswith("-"):
        arg = args.pop(0)
        if arg.startswith("--nodelist="):
            nodes = arg.split("=", 1)[1].split(",")
        elif arg.startswith("--ntasks-per-node="):
            per_node = int(arg.split("=", 1)[1])
        elif arg == "-H":
            slots = [item.split(":") for item in args.pop(0).split(",")]
            nodes, per_node = [name for name, _ in slots], int(slots[0][1])
        elif arg == "-np":
            args.pop(0)
    root = Path(os.environ["FAKE_SLURM_ROOT"])
    unknown = [n for n in nodes if not (root / n).is_dir()]
    if unknown:
        print(
            f"srun: error: Unable to allocate resources: Invalid node name specified: {unknown[0]}"
        )
        return 1
    with open(root / "srun.log", "a") as log:
        log.write(("mpirun " if mpi else "") + " ".join(sys.argv[1 + mpi :]) + "\n")
    procs = []
    for index, node in enumerate(n for n in nodes for _ in range(per_node)):
        ranks = (
            ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")
            if mpi
            else ("SLURM_PROCID", "SLURM_NTASKS")
        )
        env = {
            **os.environ,
            ranks[0]: str(index),
            ranks[1]: str(len(nodes) * per_node),
            "GPUHOST_LAB_NCCL_SLOW_FILE": str(root / node / "nccl-slow"),
            "GPUHOST_LAB_NCCL_RANK0": "127.0.0.1",
        }
        if not mpi:
            env["SLURMD_NODENAME"] = node
        procs.append(
            subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        )
    worst = 0
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        sys.stdout.write(out.decode())
        worst = max(worst, proc.returncode)
    return worst


if __name__ == "__main__":
    sys.exit(main())
