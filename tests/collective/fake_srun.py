"""TEST EQUIPMENT: a stand-in for Slurm's ``srun`` on this machine, for the offline collective
tests. ``srun -N2 --ntasks-per-node=G --nodelist=a,b [--other] CMD ARGS`` starts one process per
task at once, each with Slurm's variables (SLURMD_NODENAME, SLURM_PROCID, SLURM_NTASKS) and the
fake nccl-tests' knobs: the node's slow file ``$FAKE_SLURM_ROOT/NODE/nccl-slow`` and rank 0 on
127.0.0.1. A node without a folder under ``$FAKE_SLURM_ROOT`` is refused as srun refuses an
unknown node. Output: every task's, in task order; exit status: the worst."""

import os
import subprocess
import sys
from pathlib import Path


def main() -> int:
    args = sys.argv[1:]
    nodes: list[str] = []
    per_node = 1
    while args and args[0].startswith("-"):
        arg = args.pop(0)
        if arg.startswith("--nodelist="):
            nodes = arg.split("=", 1)[1].split(",")
        elif arg.startswith("--ntasks-per-node="):
            per_node = int(arg.split("=", 1)[1])
    root = Path(os.environ["FAKE_SLURM_ROOT"])
    unknown = [n for n in nodes if not (root / n).is_dir()]
    if unknown:
        print(
            f"srun: error: Unable to allocate resources: Invalid node name specified: {unknown[0]}"
        )
        return 1
    with open(root / "srun.log", "a") as log:
        log.write(" ".join(sys.argv[1:]) + "\n")
    procs = []
    for index, node in enumerate(n for n in nodes for _ in range(per_node)):
        env = {
            **os.environ,
            "SLURMD_NODENAME": node,
            "SLURM_PROCID": str(index),
            "SLURM_NTASKS": str(len(nodes) * per_node),
            "GPUHOST_LAB_NCCL_SLOW_FILE": str(root / node / "nccl-slow"),
            "GPUHOST_LAB_NCCL_RANK0": "127.0.0.1",
        }
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
