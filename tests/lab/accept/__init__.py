"""Test equipment for `gpuhost accept` on GPU-shaped lab hosts (never part of the package).

``install(root)`` puts on a lab host (``root``: this machine's view of its overlay, as
``tests.lab.gpu.attach`` has it): ``host/standin.py`` as ``dcgmi``, ``nvbandwidth``,
``all_reduce_perf`` and ``ib_write_bw`` (each replays its tool's real capture, captures/ with
SOURCES.json), and the PyTorch stand-in of the GEMM soak (``host/python/torch``) on the path of
``/usr/local/bin/gpuhost-lab-python3`` only: inventory data ``gpuhost_pythons:
["/usr/local/bin/gpuhost-lab-python3"]`` makes the soak use it; the host's own python3 keeps
seeing no PyTorch (the smoke checks' lab tests rely on that). docs/testing.md, "Acceptance".
"""

from __future__ import annotations

import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
ON_HOST = "/usr/lib/gpuhost-lab-accept"
PYTHON = "/usr/local/bin/gpuhost-lab-python3"
TOOLS = {
    "dcgmi": "/usr/bin/dcgmi",
    "nvbandwidth": "/usr/local/bin/nvbandwidth",
    "all_reduce_perf": "/usr/local/bin/all_reduce_perf",
    "ib_write_bw": "/usr/local/bin/ib_write_bw",
}
PYTHON_WRAPPER = f'#!/bin/sh\nPYTHONPATH={ON_HOST}/python exec /usr/bin/python3 "$@"\n'


def _under(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def install(root: Path) -> None:
    """The stand-ins on the host whose root is ``root`` (safe to repeat)."""
    lib = _under(root, ON_HOST)
    if lib.exists():
        shutil.rmtree(lib)
    shutil.copytree(HERE / "captures", lib / "captures")
    shutil.copytree(
        HERE / "host" / "python", lib / "python", ignore=shutil.ignore_patterns("__pycache__")
    )
    code = (HERE / "host" / "standin.py").read_text()
    for path in TOOLS.values():
        target = _under(root, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)  # never write through a link another test left
        target.write_text(
            code.replace(
                "HERE = Path(__file__).resolve().parent",
                f'HERE = Path(os.environ.get("GPUEMU_ROOT", "") + "{ON_HOST}")',
            )
        )
        target.chmod(0o755)
    wrapper = _under(root, PYTHON)
    wrapper.unlink(missing_ok=True)
    wrapper.write_text(PYTHON_WRAPPER)
    wrapper.chmod(0o755)
