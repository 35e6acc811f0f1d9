"""Helpers shared by the harden lab tests: inventories, running ``gpuhost harden``, probes."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paramiko

REPO = Path(__file__).resolve().parents[2]
GPUHOST = [sys.executable, "-m", "gpuhost"]
CAP_NET_ADMIN_BIT = 12
#: an unhardened host as clouds ship them: a drop-in that turns password login on
UNHARDEN = (
    "sed -i '/^PasswordAuthentication/d' /etc/ssh/sshd_config.d/*.conf; "
    "echo 'PasswordAuthentication yes' > /etc/ssh/sshd_config.d/50-cloud-init.conf; "
    "id tester >/dev/null 2>&1 || useradd -m -s /bin/bash tester; "
    "echo 'tester:Tester-pass-1' | chpasswd; echo 'root:Root-pass-1' | chpasswd; "
    "systemctl reload ssh.service"
)


def wait_for_ssh_port(address: str, timeout: float = 15.0) -> None:
    """sshd re-executes itself on reload; wait until it accepts connections again."""
    deadline = time.monotonic() + timeout
    while tcp_state(address, 22, timeout=1.0) != "open":
        assert time.monotonic() < deadline, f"{address}:22 does not accept connections"
        time.sleep(0.3)


def write_inventory(tmp: Path, lab_inventory: Path, host: str, **data: Any) -> Path:
    """An inventory with one lab host, its lab data overridden by ``data`` (None removes a key)."""
    path = tmp / f"inventory_{host}.py"
    path.write_text(
        "import runpy\n"
        f"_lab = runpy.run_path({str(lab_inventory)!r})\n"
        f"_extra = {data!r}\n"
        "hosts = [\n"
        "    (n, {k: v for k, v in {**d, **_extra}.items() if v is not None})\n"
        f"    for n, d in _lab['lab_hosts'] if n == {host!r}\n"
        "]\n"
    )
    return path


#: a sudo user with a password and no authorized SSH key (hardening must refuse such a host)
KEYLESS_USER = "deployer"
KEYLESS_PASSWORD = "Deployer-pass-1"


def add_keyless_user(host: Any, tmp: Path, lab_inventory: Path, **data: Any) -> Path:
    """Create ``KEYLESS_USER`` on the lab host ``host``; an inventory that logs in as it with
    its password and sudo (plus ``data``)."""
    setup = (
        f"useradd -m -s /bin/bash {KEYLESS_USER} && "
        f"echo '{KEYLESS_USER}:{KEYLESS_PASSWORD}' | chpasswd && "
        f"echo '{KEYLESS_USER} ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/{KEYLESS_USER}"
    )
    assert host.run(setup).returncode == 0
    return write_inventory(
        tmp,
        lab_inventory,
        host.name,
        ssh_user=KEYLESS_USER,
        ssh_key=None,
        ssh_password=KEYLESS_PASSWORD,
        _sudo=True,
        **data,
    )


def run_gpuhost(
    command: str, inventory: Path, *args: str, timeout: float = 600
) -> tuple[int, str, str]:
    """Run ``gpuhost COMMAND INVENTORY ARGS``; (exit code, the host's summary line, stderr)."""
    proc = subprocess.run(
        [*GPUHOST, command, str(inventory), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode, (lines[-1] if lines else ""), proc.stderr


def harden(inventory: Path, *args: str) -> tuple[int, str, str]:
    """Run ``gpuhost harden``; (exit code, the host's summary line, stderr)."""
    return run_gpuhost("harden", inventory, *args)


def changed_count(line: str) -> int:
    match = re.search(r": ok, (\d+) (?:changed|would change), (\d+) unchanged$", line)
    assert match, f"not a success line: {line!r}"
    return int(match.group(1))


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        check=False,
    )


@contextlib.contextmanager
def _ssh(address: str, user: str, **auth: Any) -> Iterator[paramiko.SSHClient]:
    """A new paramiko connection (never a multiplexed one, no agent, no default keys) that
    accepts any host key; closed afterwards. Connection and authentication errors propagate."""
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    try:
        client.connect(
            address, username=user, look_for_keys=False, allow_agent=False, timeout=10, **auth
        )
        yield client
    finally:
        client.close()


def password_login(address: str, user: str, password: str) -> str:
    """'ok', or why the server refused: 'publickey-only' / 'wrong' (never raises)."""
    try:
        with _ssh(address, user, password=password, banner_timeout=10, auth_timeout=10):
            return "ok"
    except paramiko.BadAuthenticationType as exc:
        return (
            "publickey-only" if exc.allowed_types == ["publickey"] else f"only {exc.allowed_types}"
        )
    except paramiko.AuthenticationException:
        return "wrong"


def key_login(address: str, key_path: Path, user: str = "root") -> bool:
    """A new SSH connection (not a multiplexed one) with the lab key runs ``true``."""
    try:
        with _ssh(address, user, key_filename=str(key_path)) as client:
            _in, out, _err = client.exec_command("true")
            return out.channel.recv_exit_status() == 0
    except (paramiko.SSHException, OSError):
        return False


def tcp_state(address: str, port: int, timeout: float = 3.0) -> str:
    """'open', 'refused' (RST: no filter, nothing listening) or 'dropped' (no answer)."""
    sock = socket.socket()
    sock.settimeout(timeout)
    try:
        sock.connect((address, port))
        return "open"
    except ConnectionRefusedError:
        return "refused"
    except TimeoutError:
        return "dropped"
    finally:
        sock.close()


def tree_digest(host: Any, paths: str = "/etc/ssh /etc/nftables.conf") -> str:
    """One hash over every file under ``paths`` on the host (via nsenter, not SSH)."""
    proc = host.exec(f"find {paths} -type f 2>/dev/null | sort | xargs -r md5sum")
    assert proc.returncode == 0, proc.stderr
    return hashlib.sha256(proc.stdout.encode()).hexdigest()


def has_cap_net_admin(host: Any) -> bool:
    proc = host.exec("grep CapBnd /proc/1/status")
    mask = int(proc.stdout.split()[1], 16)
    return bool(mask & (1 << CAP_NET_ADMIN_BIT))


def ssh_audit(address: str) -> dict[str, Any]:
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ssh-audit"), "-j", "-n", "--skip-rate-test", address],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.stdout.strip(), f"ssh-audit printed nothing (rc {proc.returncode}): {proc.stderr}"
    return json.loads(proc.stdout)


def audit_failures(report: dict[str, Any]) -> list[str]:
    failures = []
    for section in ("kex", "key", "enc", "mac"):
        for entry in report.get(section, []):
            for note in entry.get("notes", {}).get("fail", []):
                failures.append(f"{section} {entry['algorithm']}: {note}")
    failures += [f"cve {c}" for c in report.get("cves", [])]
    return failures
