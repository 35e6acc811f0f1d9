"""gpuhost as a user gets it: built as a wheel and installed into a throw-away venv, so a test can
run ``gpuhost`` (e.g. ``gpuhost check``) from outside the checkout. The venv takes gpuhost's
dependencies from the running one through a .pth line; the editable install's finder is not read
from there, so ``import gpuhost`` in it is the wheel's copy."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_wheel_venv(work: Path) -> Path:
    """The venv folder (``<work>/venv``; its ``bin/gpuhost`` runs the installed wheel)."""
    src = work / "src"
    src.mkdir(parents=True)
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", str(src), "-w", str(work)]
    subprocess.run(build, check=True, timeout=300, capture_output=True)
    (wheel,) = work.glob("gpuhost-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = subprocess.run(
        [str(venv / "bin/python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deps = next(p for p in map(Path, sys.path) if p.name == "site-packages" and p.is_dir())
    Path(purelib, "gpuhost-test-deps.pth").write_text(f"{deps}\n")
    install = [*pip, "--python", str(venv / "bin/python"), "install", "--no-deps", str(wheel)]
    subprocess.run(install, check=True, timeout=300, capture_output=True)
    return venv
