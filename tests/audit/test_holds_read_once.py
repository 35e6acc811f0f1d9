"""Holds (and os-release, the marker) are read once: the audit probe's apt-holds code is
provision's AptHolds fact and the checks' holds command, parsed by one parser, and it lists what
apt-mark showhold lists; the checks read os-release and the marker with the probe's commands."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpuhost.checks_support.packages import HOLDS_COMMAND
from gpuhost.facts.apt_pins import AptHolds
from gpuhost.parsers.packages import parse_apt_mark_showhold
from gpuhost.probe.script import APT_HOLDS_CODE, STATIC_SECTIONS

DATA = Path(__file__).parent / "data" / "holds"


def test_probe_fact_and_checks_run_one_command() -> None:
    codes = {s.name: s.code for s in STATIC_SECTIONS}
    assert codes["apt-holds"].endswith(APT_HOLDS_CODE)
    assert AptHolds().command() == APT_HOLDS_CODE == HOLDS_COMMAND


def test_lab_capture_lists_what_apt_mark_lists() -> None:
    ours = (DATA / "lab-debian12-dpkg-query-holds.txt").read_text(encoding="utf-8")
    apt_mark = (DATA / "lab-debian12-apt-mark-showhold.txt").read_text(encoding="utf-8")
    assert parse_apt_mark_showhold(ours) == parse_apt_mark_showhold(apt_mark)
    assert AptHolds().process(ours.splitlines()) == ["bash", "hello", "nano"]


@pytest.mark.skipif(
    not (shutil.which("dpkg-query") and shutil.which("apt-mark")), reason="not a Debian host"
)
def test_here_the_command_agrees_with_apt_mark() -> None:
    ours = subprocess.run(["sh", "-c", APT_HOLDS_CODE], capture_output=True, text=True, timeout=60)
    theirs = subprocess.run(["apt-mark", "showhold"], capture_output=True, text=True, timeout=60)
    assert ours.returncode == 0, ours.stderr
    assert parse_apt_mark_showhold(ours.stdout) == parse_apt_mark_showhold(theirs.stdout)


def test_checks_read_os_release_and_marker_with_the_probes_commands(tmp_path: Path) -> None:
    from gpuhost.checks_support import expected
    from gpuhost.probe.script import MARKER_CODE, OS_RELEASE_CODE

    codes = {s.name: s.code for s in STATIC_SECTIONS}
    assert codes["os-release"] == OS_RELEASE_CODE == expected.OS_RELEASE_COMMAND
    assert codes["profile-marker"] == MARKER_CODE == expected.MARKER_COMMAND
    # no marker on this machine (or any): empty output, read as "no marker"
    absent = MARKER_CODE.replace("/etc/gpuhost/profile", str(tmp_path / "profile"))
    out = subprocess.run(["sh", "-c", absent], capture_output=True, text=True, timeout=60)
    assert out.stdout == "" and expected.parse_marker(out.stdout) == expected.Marker(False)
