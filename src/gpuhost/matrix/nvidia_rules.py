"""Facts the matrix may not state because they contradict NVIDIA's own rules (pure checks, run
by :func:`gpuhost.matrix.load.build_matrix` after the tables are read).

- kernel modules: an architecture of compute capability ``policies.kernel_modules.
  open_only_from_cc`` or newer (Blackwell) that lists the proprietary flavour, or a GPU row whose
  flavours are not among its architecture's (GH200 narrows Hopper's to the open one);
- cuDNN: a package listing a compute capability whose architecture's first CUDA release is newer
  than every CUDA release of the package (the package predates the architecture).
"""

from __future__ import annotations

from gpuhost.matrix.lookup import cuda_supports_arch
from gpuhost.matrix.model import Matrix
from gpuhost.versions import parse_version


def problems(m: Matrix) -> list[tuple[str, str]]:
    """(field path, message) for every fact that contradicts NVIDIA's rules."""
    return _kernel_modules(m) + _cudnn(m)


def _kernel_modules(m: Matrix) -> list[tuple[str, str]]:
    out = []
    policy = m.policies.get("kernel_modules")
    open_from = policy.values.get("open_only_from_cc") if policy else None
    if open_from is not None:
        floor = parse_version(str(open_from), field="policies.kernel_modules.open_only_from_cc")
        for i, arch in enumerate(m.architectures):
            newest = max(parse_version(cc, field="cc") for cc in arch.compute_capabilities)
            if (
                arch.driver_from is None
                and newest >= floor
                and "proprietary" in arch.kernel_modules
            ):
                out.append(
                    (
                        f"architectures[{i}].kernel_modules",
                        f"{arch.name} (compute capability {newest}) supports only the open "
                        f"kernel modules (policies.kernel_modules.open_only_from_cc "
                        f"{open_from}), found proprietary",
                    )
                )
    for i, gpu in enumerate(m.gpus):
        of = m.architecture_of(gpu.compute_capability)
        extra = [k for k in gpu.kernel_modules if of is None or k not in of.kernel_modules]
        if of is not None and extra:
            out.append(
                (
                    f"gpus[{i}].kernel_modules",
                    f"{', '.join(extra)} is not a kernel module flavour of {of.name} "
                    f"({', '.join(of.kernel_modules)}); a GPU row can only narrow them",
                )
            )
    return out


def _cudnn(m: Matrix) -> list[tuple[str, str]]:
    out = []
    for i, rel in enumerate(m.cudnn):
        for j, pkg in enumerate(rel.packages):
            for cc in pkg.compute_capabilities or ():
                arch = m.architecture_of(cc.removesuffix("a").removesuffix("+PTX"))
                if arch is None:
                    continue
                says = [
                    cuda_supports_arch(arch, cc, parse_version(c, field="cuda")) for c in pkg.cuda
                ]
                if says and all(s is False for s in says):
                    out.append(
                        (
                            f"cudnn[{i}].packages[{j}].compute_capabilities",
                            f"cuDNN {rel.version} for CUDA {', '.join(pkg.cuda)} lists {cc}, but "
                            f"{arch.name} needs CUDA {arch.first_cuda_for(cc) or '?'} or newer "
                            "(the package predates the architecture)",
                        )
                    )
    return out
