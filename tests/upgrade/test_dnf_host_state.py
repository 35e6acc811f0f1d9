"""A dnf host's snapshot and package cache (upgrade, rollback): the package manager's commands
come from the seam, the holds are dnf's lock lines (validated by name, restored as lines)."""

from __future__ import annotations

from gpuhost.parsers.marked import MARK
from gpuhost.pkgmgr import DNF
from gpuhost.upgrade import package_cache
from gpuhost.upgrade.host_state import held_name, parse_host_state, state_command

LOCKS = [
    "# Added lock on Sat Nov 28 2026",
    "nvidia-driver-cuda-3:580.178.04-*",
    "kmod-nvidia-open-dkms-3:580.178.04-1.el9.*",
    "nvidia-persistenced-3:580.178.04-1.el9.*",
    "libcudnn9-cuda-13-9.17.0.*-*",
]


def _output() -> str:
    return "\n".join([
        f"{MARK} packages",
        "nvidia-driver-cuda\t3:580.178.04-1.el9\tx86_64\tii",
        "kmod-nvidia-open-dkms\t3:580.178.04-1.el9\tnoarch\tii",
        "bash\t5.1.8-9.el9\tx86_64\tii",
        f"{MARK} holds",
        *LOCKS,
        f"{MARK} end",
    ]) + "\n"


def test_a_dnf_hosts_holds_are_its_lock_lines_read_as_names() -> None:
    state = parse_host_state(_output())
    assert state.holds == sorted(LOCKS[1:])  # the lines, for the rollback; comments left out
    assert state.held_names == [
        "kmod-nvidia-open-dkms", "libcudnn9-cuda-13", "nvidia-driver-cuda", "nvidia-persistenced"
    ]
    assert state.packages["nvidia-driver-cuda"]["version"] == "3:580.178.04-1.el9"


def test_apt_hold_names_are_kept_as_they_are() -> None:
    assert held_name("nvidia-kernel-common-580-server") == "nvidia-kernel-common-580-server"
    assert held_name("nvidia-driver-3:580.95.05-1.el9.*") == "nvidia-driver"


def test_the_snapshot_reads_rpm_and_the_lock_file_on_a_dnf_host() -> None:
    command = state_command(DNF)
    assert "rpm -qa --qf '%{NAME}\\t%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}" in command
    assert "cat /etc/dnf/plugins/versionlock.list" in command
    # no dpkg command (the cuda alternatives group's admin file is read where either
    # update-alternatives keeps it: /var/lib/dpkg/alternatives on Debian, /var/lib/alternatives)
    assert "dpkg" not in command.replace("/var/lib/dpkg/alternatives/", "")


def test_the_package_cache_of_a_dnf_host_uses_dnf_download_and_rpm() -> None:
    fill = package_cache.fill_command(
        "20261128T000000Z",
        {"nvidia-driver-cuda": {"version": "3:580.178.04-1.el9", "arch": "x86_64"}},
        DNF,
    )
    assert "f=nvidia-driver-cuda-580.178.04-1.el9.x86_64.rpm;" in fill
    assert "/var/cache/apt" not in fill
    assert ("dnf -q --disableplugin=versionlock download --destdir . "
            "nvidia-driver-cuda-3:580.178.04-1.el9.x86_64") in fill
    assert "= 'nvidia-driver-cuda 3:580.178.04-1.el9' ]" in fill
    rpm = "nvidia-driver-cuda-580.178.04-1.el9.x86_64.rpm"
    install = package_cache.install_command("20261128T000000Z", {"nvidia-driver-cuda": rpm}, DNF)
    assert install.startswith(
        "dnf -y --setopt=install_weak_deps=False --disableplugin=versionlock '--disablerepo=*' "
        "--allowerasing install"
    )


def test_a_lock_file_that_was_not_read_is_no_snapshot_of_no_locks(tmp_path) -> None:
    """The snapshot's holds come from the seam's lock file read, which prints one
    '##gpuhost-unreadable: PATH why' line for a FIFO (or a device, a folder, a huge file); the
    holds section dropped it as a comment, so the snapshot recorded 'no locks' and a rollback
    would restore none. Now the state cannot be parsed: the host's step fails with that line."""
    import os
    import subprocess

    import pytest

    from gpuhost.errors import ParseError

    dnf = DNF.under(str(tmp_path))
    lock_file = tmp_path / "etc/dnf/plugins/versionlock.list"
    lock_file.parent.mkdir(parents=True)
    os.mkfifo(lock_file)
    read = subprocess.run(["sh", "-c", dnf.holds_command()], capture_output=True, text=True,
                          timeout=20, check=True).stdout  # fmt: skip
    output = _output().replace("\n".join(LOCKS), read.strip())

    with pytest.raises(ParseError) as caught:
        parse_host_state(output)
    assert str(caught.value) == f"host state: holds: {lock_file} is not a regular file"
    assert parse_host_state(_output()).holds == sorted(LOCKS[1:])  # a real comment still is one
