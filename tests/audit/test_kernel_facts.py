"""Kernels are read once: the audit probe's uname/kernels code and its parser serve provision's
Kernels fact too (plus one apt-cache line), on real captured outputs and the real shell."""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuhost.facts.kernel import Kernels, kernel_fact_command, parse_kernel_fact
from gpuhost.operations.kernel import headers_to_install
from gpuhost.probe.script import KERNELS_CODE, STATIC_SECTIONS, UNAME_CODE

DATA = Path(__file__).parent / "data" / "kernels"
RUNNING, DEBIAN = "6.18.44-fc-v769", "6.1.0-56-amd64"


def _lines(name: str) -> list[str]:
    return (DATA / name).read_text().splitlines()


def test_the_fact_runs_the_probes_own_kernel_code() -> None:
    codes = {s.name: s.code for s in STATIC_SECTIONS}
    assert codes["uname"] == UNAME_CODE and codes["kernels"] == KERNELS_CODE
    assert Kernels().command().startswith(f"{UNAME_CODE}; {KERNELS_CODE}; ")


def test_image_without_headers_gets_its_headers_installed() -> None:
    info = parse_kernel_fact(_lines("lab-debian12-image-no-headers.txt"))
    assert (info.running, info.arch, info.next_boot, info.next_boot_source) == (
        RUNNING,
        "x86_64",
        DEBIAN,
        "link",
    )
    assert (info.boot, info.installed, info.headers) == ([DEBIAN], [DEBIAN], [])
    assert info.headers_available == [DEBIAN]
    assert headers_to_install(info) == ([f"linux-headers-{DEBIAN}"], [RUNNING])


def test_image_with_headers_needs_nothing_but_names_the_running_kernel() -> None:
    info = parse_kernel_fact(_lines("lab-debian12-image-with-headers.txt"))
    assert info.headers == [DEBIAN] and info.headers_available == [DEBIAN]
    assert headers_to_install(info) == ([], [RUNNING])


@pytest.mark.skipif(shutil.which("sh") is None, reason="no POSIX sh on this machine")
def test_the_real_command_here_reads_the_running_kernel() -> None:
    out = subprocess.run(
        ["sh", "-c", kernel_fact_command()], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    info = parse_kernel_fact(out.stdout.splitlines())
    assert (info.running, info.arch) == (platform.release(), platform.machine())
    boot = sorted(p.name.removeprefix("vmlinuz-") for p in Path("/boot").glob("vmlinuz-*"))
    assert sorted(info.boot) == boot
    built = [p.parent.name for p in Path("/lib/modules").glob("*/build")]
    assert sorted(info.headers) == sorted(built)
