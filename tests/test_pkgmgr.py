"""The package-manager seam (``gpuhost.pkgmgr``): one interface, apt/dpkg and dnf/rpm, chosen by
the OS. The lock-file commands run here in a real shell against a lock file in a temporary
folder (``Dnf.under``); what dnf itself makes of them: tests/test_pkgmgr_dnf.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpuhost import pkgmgr
from gpuhost.errors import ParseError
from gpuhost.parsers.packages import parse_versionlock, parse_versionlock_entry
from gpuhost.pkgmgr import APT, DNF, PackageManager


def _sh(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, errors="replace",
                          check=False, timeout=20)  # fmt: skip


def test_every_manager_implements_the_whole_interface() -> None:
    for manager in (APT, DNF):
        assert isinstance(manager, PackageManager)
        assert manager.family in ("apt", "dnf") and manager.database in ("dpkg", "rpm")
        for name in ("install", "remove", "refresh", "download", "hold", "unhold",
                     "holds_command", "installed_command", "settle_command"):
            assert callable(getattr(manager, name))


@pytest.mark.parametrize(
    ("manager", "name", "version", "spec"),
    [(APT, "nvidia-driver", "580.95.05-1", "nvidia-driver=580.95.05-1"),
     (DNF, "nvidia-driver", "3:580.95.05", "nvidia-driver-3:580.95.05"),
     (DNF, "nvidia-driver-cuda", "580.95.05-1.el9", "nvidia-driver-cuda-580.95.05-1.el9")],
)
def test_an_exact_version_in_each_managers_form(
    manager: PackageManager, name: str, version: str, spec: str
) -> None:
    assert manager.exact(name, version) == spec


def test_package_file_names() -> None:
    assert APT.package_file("nvidia-smi", "1:535.261.03-1", "amd64") == (
        "nvidia-smi_1%3a535.261.03-1_amd64.deb"
    )
    assert DNF.package_file("nvidia-driver", "3:580.95.05-1.el9", "x86_64") == (
        "nvidia-driver-580.95.05-1.el9.x86_64.rpm"
    )


def test_dnf_locks_are_read_from_the_lock_file_never_from_dnf() -> None:
    assert "cat /etc/dnf/plugins/versionlock.list;" in DNF.holds_command()
    assert "versionlock list" not in DNF.holds_command()


def test_dnf_lock_lines_parse_back_to_name_and_version() -> None:
    assert parse_versionlock_entry(DNF.lock_pattern("nvidia-driver", "580.95.05", "3")) == (
        "nvidia-driver", "580.95.05")
    assert parse_versionlock_entry(DNF.lock_pattern("libcudnn9-cuda-13", "9.10.2.*")) == (
        "libcudnn9-cuda-13", "9.10.2.*")


def test_hold_and_unhold_edit_the_lock_file_idempotently(tmp_path: Path) -> None:
    dnf = DNF.under(str(tmp_path))
    locks = [dnf.lock_pattern(n, "580.95.05", "3") for n in ("nvidia-driver", "libnvidia-ml")]
    lock_file = tmp_path / "etc/dnf/plugins/versionlock.list"
    for _ in range(2):  # twice: the second run adds nothing
        assert _sh(dnf.hold(locks)).returncode == 0
    assert lock_file.read_text().splitlines() == locks
    lock_file.write_text("# Added lock on Fri Nov 28\nnvidia-driver-cuda-3:580.95.05-1.el9.*\n"
                         + lock_file.read_text())
    assert _sh(dnf.unhold(["nvidia-driver", "nvidia-driver-cuda"])).returncode == 0
    assert lock_file.read_text() == (
        "# Added lock on Fri Nov 28\nlibnvidia-ml-3:580.95.05-*\n"
    )
    assert parse_versionlock(_sh(dnf.holds_command()).stdout) == ["libnvidia-ml"]


def test_unhold_without_a_lock_file_changes_nothing(tmp_path: Path) -> None:
    assert _sh(DNF.under(str(tmp_path)).unhold(["nvidia-driver"])).returncode == 0
    assert not (tmp_path / "etc").exists()


def test_apt_keeps_provisions_commands() -> None:
    assert APT.install(["a=1"], downgrades=True) == (
        'DEBIAN_FRONTEND=noninteractive apt-get -y -o Dpkg::Options::="--force-confdef" '
        '-o Dpkg::Options::="--force-confold" install --no-install-recommends '
        "--allow-downgrades a=1"
    )
    assert APT.hold_kept(["a"], "X") == (
        "apt-mark unhold a && { X; rc=$?; apt-mark hold a; exit $rc; }"
    )
    assert APT.unhold(["a", "b"]) == "printf 'a install\\nb install\\n' | dpkg --set-selections"


def test_dnf_changes_locked_packages_only_with_the_plugin_off() -> None:
    assert "--disableplugin=versionlock" in DNF.install(["x"], change_held=True)
    assert "--disableplugin=versionlock" not in DNF.install(["x"])
    assert "--disableplugin=versionlock" in DNF.download(["x-1"], "/tmp/d")
    assert DNF.hold_kept(["x"], "INSTALL") == "INSTALL"


@pytest.mark.parametrize(
    ("os_release", "expected"),
    [("ID=debian\n", "apt"), ('ID="rocky"\n', "dnf"),
     ('ID=linuxmint\nID_LIKE="ubuntu debian"\n', "apt"), ('ID=almalinux\n', "dnf"),
     ("ID=plan9\n", "")],
)
def test_by_os_shell_picks_the_managers_command_on_the_host(
    tmp_path: Path, os_release: str, expected: str
) -> None:
    release = tmp_path / "os-release"
    release.write_text(os_release)
    command = pkgmgr.by_os_shell({"apt": "echo apt", "dnf": "echo dnf"})
    assert _sh(command.replace("/etc/os-release", str(release))).stdout.strip() == expected


# A lock file (or module state file) on a host that is not what dnf writes: a FIFO (cat and
# ">>" waited for a writer for ever: the audit's probe, provision's fact and the upgrade's
# snapshot hung on that host), a link to /dev/zero (endless output), a file of 2 MiB, bytes that
# are not text, odd lines. Before: the reads hung or returned the garbage as locks. Now the
# read says the file was not read and the parser makes that a ParseError (locks unknown, never
# "no locks"); hold and unhold refuse to write with one line.
def _unreadable(kind: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    else:
        path.write_bytes(b"x" * (2 * 1024 * 1024))


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "huge"])
def test_a_lock_file_that_is_no_small_regular_file_is_never_read_nor_written(
    tmp_path: Path, kind: str
) -> None:
    dnf = DNF.under(str(tmp_path))
    lock_file = tmp_path / "etc/dnf/plugins/versionlock.list"
    _unreadable(kind, lock_file)

    read = _sh(dnf.holds_command())
    with pytest.raises(ParseError) as caught:
        parse_versionlock(read.stdout)
    held = _sh(dnf.hold([dnf.lock_pattern("nvidia-driver", "580.95.05", "3")]))
    released = _sh(dnf.unhold(["nvidia-driver"]))

    assert read.returncode == 0 and len(read.stdout) < 400
    assert str(lock_file) in str(caught.value)
    if kind != "huge":
        assert (held.returncode, released.returncode) == (1, 1)
        assert held.stderr.strip() == f"{lock_file}: not a regular file; expected the file or none"
    module = _sh(dnf.module_state_command("nvidia-driver"))
    assert module.returncode == 0 and module.stdout == ""  # none there: nothing, at once


def test_binary_and_odd_lines_of_a_lock_file_are_names_not_crashes(tmp_path: Path) -> None:
    dnf = DNF.under(str(tmp_path))
    lock_file = tmp_path / "etc/dnf/plugins/versionlock.list"
    lock_file.parent.mkdir(parents=True)
    lock_file.write_bytes(
        b"\x00\xff\xfe garbage\n\n   \n!\n#comment\nnvidia-driver-3:580.95.05-1.el9.*\n"
    )

    read = _sh(dnf.holds_command())

    assert "nvidia-driver" in parse_versionlock(read.stdout)


def test_the_audits_probe_says_an_unread_lock_file_is_a_problem_not_no_locks() -> None:
    """The lab's clean probe dressed as a Rocky host whose lock file was not read (the line
    ``small_file_command`` prints): one probe problem, the host still judged."""
    from gpuhost.facts.build import host_facts_from_text

    probe = (Path(__file__).parent / "audit/data/lab-debian12-clean.probe").read_text()
    probe = probe.replace("ID=debian", "ID=rocky").replace('VERSION_ID="12"', 'VERSION_ID="9.4"')
    unread = "##gpuhost-unreadable: /etc/dnf/plugins/versionlock.list is not a regular file"
    probe = probe.replace(
        "##GPUHOST## begin dnf-versionlock\n", f"##GPUHOST## begin dnf-versionlock\n{unread}\n"
    ).replace("##GPUHOST## end rpm 127", "##GPUHOST## end rpm 0")  # rpm there, nothing listed

    facts = host_facts_from_text(probe)

    assert facts.os.key == "rocky-9"
    assert any("versionlock.list is not a regular file" in p for p in facts.problems), facts


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "huge"])
def test_provisions_facts_never_read_an_unread_dnf_file_as_empty(tmp_path: Path, kind: str) -> None:
    """The facts provision and rollback read (the version locks, the module state) were "no
    locks" and "module never enabled" for a lock file or module file that was not read: the
    marker line starts with '#' and went as a comment, so provision re-locked over locks it had
    not seen. Now each is a ParseError naming the file (the host fails with that one line)."""
    from gpuhost.facts.apt_pins import DnfVersionLocks
    from gpuhost.facts.dnf import DnfModuleState

    dnf = DNF.under(str(tmp_path))
    lock_file = tmp_path / "etc/dnf/plugins/versionlock.list"
    module_file = tmp_path / "etc/dnf/modules.d/nvidia-driver.module"
    _unreadable(kind, lock_file)
    _unreadable(kind, module_file)
    locks = _sh(dnf.holds_command()).stdout.splitlines()
    module = _sh(dnf.module_state_command("nvidia-driver")).stdout.splitlines()

    with pytest.raises(ParseError, match=str(lock_file)) as read_locks:
        DnfVersionLocks().process(locks)
    with pytest.raises(ParseError, match=str(module_file)) as read_module:
        DnfModuleState().process(module)
    assert "\n" not in str(read_locks.value) + str(read_module.value)
