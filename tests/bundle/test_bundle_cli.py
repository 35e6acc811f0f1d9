"""``gpuhost bundle``: bad input is one line and exit 2 before any host is contacted; an
unreachable reference host is one line naming it (exit 1) and leaves no output folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PROFILE = "nvidia-repo-580-cuda13.0"


def _bundle(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    inventory = tmp_path / "inventory.py"
    inventory.write_text('hosts = [("ref1", {"ssh_hostname": "127.0.0.1", "ssh_port": 9})]\n')
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", "bundle", *args, "-i", str(inventory)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )


@pytest.mark.parametrize(("args", "line"), [
    (["--from-host", "nope", "-o", "out"],
     "gpuhost: error: --from-host nope: not a host of {inv} (hosts: ref1)"),
    (["--from-host", "ref1", "-o", "out", "--os", "windows"],
     "gpuhost: error: --os 'windows': expected an OS key such as debian-12"),
    (["--from-host", "ref1", "-o", "out", "--with", "Bad Name"],
     "gpuhost: error: --with 'Bad Name': not a package name (letters, digits, + . _ -)"),
    (["--from-host", "ref1", "-o", "out", "--with", "-oDir=/"],
     "gpuhost: error: --with '-oDir=/': not a package name (letters, digits, + . _ -)"),
    (["--from-host", "ref1", "-o", "full"],
     "gpuhost: error: -o full: exists and is not an empty folder; expected a new folder"),
    # found after the whole package set was downloaded, before
    (["--from-host", "ref1", "-o", "full/x/out"],
     "gpuhost: error: -o full/x/out: cannot make this folder (Not a directory); expected a new "
     "folder in a writable place"),
])
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], line: str) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    proc = _bundle(tmp_path, PROFILE, *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == line.format(inv=tmp_path / "inventory.py")
    assert not (tmp_path / "out").exists()


def test_an_unreachable_reference_host_is_one_line(tmp_path: Path) -> None:
    proc = _bundle(tmp_path, PROFILE, "--from-host", "ref1", "-o", "out")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("gpuhost: error: ref1: unreachable over SSH: "), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_provision_s_own_extra_packages_follow_the_host_data() -> None:
    from gpuhost.bundle_make import extra_packages

    assert extra_packages({}) == ["nftables"]
    assert extra_packages({"gpuhost_harden": False}) == []
    assert extra_packages({"gpuhost_harden": False,
                           "gpuhost_module_signing_key": "/root/mok.key"}) == ["mokutil"]
    assert extra_packages({"gpuhost_mok_password": "x"}) == ["nftables", "mokutil"]


def test_the_reference_host_command_runs_in_sh(tmp_path: Path) -> None:
    """resolve_command under dash/sh with stand-in apt tools: the private configuration is
    written (pins, the CUDA source and its key) and apt's answer comes back whole."""
    from gpuhost.bundle.printuris import parse_print_uris
    from gpuhost.bundle_make import Request, resolve_command

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "apt-get").write_text(
        '#!/bin/sh\ncase "$*" in *" install "*) echo "args: $*" >&2; '
        "echo \"'http://r/pool/nvidia-smi_580.178.04-1_amd64.deb' "
        'nvidia-smi_580.178.04-1_amd64.deb 12 MD5Sum:00";; esac\n'
    )
    (bin_dir / "apt-cache").write_text("#!/bin/sh\nexit 100\n")  # no headers package offered
    for tool in ("apt-get", "apt-cache"):
        (bin_dir / tool).chmod(0o755)
    folder = tmp_path / "work"
    request = Request(["nvidia-smi", "nvidia-persistenced=1:580.178.04-1"], {},
                      "Package: nvidia-smi\n", ("http://repo/x/", b"\x99binary key"))
    proc = subprocess.run(["sh", "-c", f'PATH="{bin_dir}:$PATH"\n'
                           + resolve_command(str(folder), request)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    (found,) = parse_print_uris(proc.stdout)
    assert found.package == "nvidia-smi"
    assert "nvidia-smi nvidia-persistenced=1:580.178.04-1" in proc.stderr
    assert (folder / "prefs" / "gpuhost-nvidia").read_text() == "Package: nvidia-smi\n"
    assert (folder / "cuda-key.gpg").read_bytes() == b"\x99binary key"
    assert (folder / "parts" / "gpuhost-cuda.list").read_text() == (
        f"deb [signed-by={folder}/cuda-key.gpg] http://repo/x/ /\n"
    )


class _Remote:
    """A reference host answering every command with its os-release (what make_bundle reads
    first), for the checks that need its OS."""

    os_release = ""

    def __init__(self, entry: object) -> None:
        self.host = "ref1"

    def run(self, command: str, timeout: float | None = None) -> object:
        from types import SimpleNamespace

        return SimpleNamespace(ok=True, stdout=self.os_release, stderr="", rc=0)

    def close(self) -> None:
        pass


@pytest.mark.parametrize(("os_release", "outcome"), [
    ('ID=debian\nVERSION_ID="12"\n', "--with 'NetworkManager-tui': host ref1 runs debian-12, "
                                       "whose package names are lower-case"),
    ('ID="rocky"\nVERSION_ID="9.4"\n', "rpm bundle with NetworkManager-tui"),
])
def test_an_rpm_package_name_is_taken_for_a_rocky_host_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, os_release: str, outcome: str
) -> None:
    """--with was checked against Debian's name rule before the OS was known: a Rocky reference
    host's --with NetworkManager-tui was refused as 'not a Debian package name'."""
    from gpuhost import bundle_make
    from gpuhost.errors import ConfigError

    inventory = tmp_path / "inventory.py"
    inventory.write_text('hosts = [("ref1", {"ssh_hostname": "127.0.0.1", "ssh_port": 9})]\n')
    monkeypatch.setattr(_Remote, "os_release", os_release)
    monkeypatch.setattr(bundle_make, "PyinfraRemote", _Remote)
    monkeypatch.setattr(bundle_make, "make_rpm_bundle",
                        lambda *args: f"rpm bundle with {' '.join(args[-1])}")
    try:
        got = str(bundle_make.make_bundle(PROFILE, str(inventory), "ref1", tmp_path / "out",
                                          extra=("NetworkManager-tui",)))
    except ConfigError as exc:
        got = str(exc)
    assert got.startswith(outcome), got
