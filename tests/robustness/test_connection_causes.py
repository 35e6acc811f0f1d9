"""A host that cannot be reached is that host's result with its real cause, never a traceback,
and the other hosts carry on: endpoints on 127.0.0.1 that misbehave (tests/robustness/
endpoints.py), an unresolvable name, a real SSH server refusing authentication, a host key that
does not match known_hosts."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.robustness.conftest import a_builtin_profile, gpuhost


def _inventory(folder: Path, ports: dict[str, int], modes: list[str]) -> Path:
    # a known_hosts entry for the SSH endpoint with ANOTHER key: a host key mismatch
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / "other")],
        check=True,
        input="y\n",
        text=True,
        capture_output=True,
    )
    other = (folder / "other.pub").read_text().split()[:2]
    known = folder / "known_hosts"
    known.write_text(f"[127.0.0.1]:{ports['ssh']} {' '.join(other)}\n")
    client_key = folder / "client"
    if not client_key.exists():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(client_key)], check=True
        )
    hosts = []
    for mode in modes:
        data: dict[str, object] = {"gpuhost_profile": a_builtin_profile()}
        if mode == "dns":
            hosts.append(("nxdomain.invalid", data))
            continue
        port = ports["ssh" if mode in ("auth", "hostkey", "newkey") else mode]
        data |= {"ssh_hostname": "127.0.0.1", "ssh_port": port, "ssh_user": "nobody"}
        data |= {"ssh_key": str(client_key), "ssh_strict_host_key_checking": "no"}
        if mode == "newkey":  # a new key accepted, and the known_hosts folder does not exist
            data |= {"ssh_known_hosts_file": str(folder / "no-such-folder" / "known_hosts"),
                     "ssh_strict_host_key_checking": "accept-new"}
        if mode == "hostkey":
            data |= {"ssh_known_hosts_file": str(known), "ssh_strict_host_key_checking": "yes"}
        hosts.append((mode, data))
    path = folder / "inv.py"
    path.write_text(f"hosts = {hosts!r}\n", encoding="utf-8")
    return path


CAUSES = {
    "garbage": "not SSH: 127.0.0.1:{garbage} closed the connection without an SSH banner",
    "close": "not SSH: 127.0.0.1:{close} closed the connection without an SSH banner",
    "silent": "not SSH: 127.0.0.1:{silent} accepts TCP connections but sent no SSH banner",
    "closed": "connection refused: nothing listens on 127.0.0.1:{closed}",
    "dns": "name does not resolve: nxdomain.invalid",
    "auth": "authentication failed on 127.0.0.1:{ssh} as nobody",
    "hostkey": "host key mismatch: 127.0.0.1:{ssh}",
    "newkey": "cannot save the host key of 127.0.0.1:{ssh} to ",
}


def test_audit_names_each_hosts_cause(endpoints) -> None:
    ports, folder = endpoints
    modes = list(CAUSES)
    inv = _inventory(folder, ports, modes)
    run = gpuhost("audit", str(inv), "--json", "-", "--connect-timeout", "2", "-q")
    assert "Traceback" not in run.err and "Exception" not in run.err, run.err
    assert run.code == 1
    report = json.loads(run.out)
    found = {h["name"]: h["findings"][0]["message"] for h in report["hosts"]}
    for mode, cause in CAUSES.items():
        name = "nxdomain.invalid" if mode == "dns" else mode
        assert cause.format(**ports) in found[name], (mode, found[name])
    assert "No hosts remaining" not in run.out


def test_provision_names_each_hosts_cause(endpoints) -> None:
    ports, folder = endpoints
    modes = [m for m in CAUSES if m != "silent"]  # provision waits 10 s for a silent port
    inv = _inventory(folder, ports, modes)
    run = gpuhost("provision", str(inv), "--dry")
    assert "Traceback" not in run.err + run.out, run.err
    assert run.code == 1
    lines = {line.split(":")[0]: line for line in run.out.splitlines() if ": unreachable" in line}
    for mode in modes:
        name = "nxdomain.invalid" if mode == "dns" else mode
        assert CAUSES[mode].format(**ports) in lines[name], (mode, lines.get(name))


def test_upgrades_host_sessions_name_the_cause(endpoints) -> None:
    """``gpuhost upgrade``/``rollback``/``snapshot`` reach hosts through PyinfraRemote: the same
    causes, never pyinfra's 'No hosts remaining!'."""
    from gpuhost.errors import HostError
    from gpuhost.inventory.loader import InventoryHost
    from gpuhost.pyinfra_adapter import ensure_gevent
    from gpuhost.upgrade.connect import PyinfraRemote

    ensure_gevent()
    ports, _ = endpoints
    local = {"ssh_hostname": "127.0.0.1"}
    cases = [
        ("nxdomain.invalid", {}, "name does not resolve: nxdomain.invalid"),
        ("closed", {**local, "ssh_port": ports["closed"]}, "connection refused"),
        ("garbage", {**local, "ssh_port": ports["garbage"]}, "not SSH: 127.0.0.1:"),
    ]
    for name, data, cause in cases:
        with pytest.raises(HostError) as err:
            PyinfraRemote(InventoryHost(name, data, ()), connect_timeout=3).connect()
        assert f"{name}: unreachable over SSH: {cause}" in str(err.value)
        assert "No hosts remaining" not in str(err.value)


@pytest.mark.parametrize("command", ["provision", "harden"])
def test_connect_timeout_bounds_the_wait_for_a_silent_host(endpoints, command) -> None:
    """``--connect-timeout`` means for provision and harden what it means for audit: a host that
    accepts TCP and never speaks SSH is unreachable after that many seconds (default 10), named
    with its cause, and the others are not held up."""
    ports, folder = endpoints
    inv = _inventory(folder, ports, ["silent", "closed"])
    before = _held_silent(folder)
    run = gpuhost(command, str(inv), "--dry", "--connect-timeout", "2")
    assert "Traceback" not in run.err + run.out, run.err
    assert run.code == 1, run
    lines = {line.split(":")[0]: line for line in run.out.splitlines() if ": unreachable" in line}
    assert "sent no SSH banner" in lines["silent"], lines
    assert CAUSES["closed"].format(**ports) in lines["closed"], lines
    # how long the silent endpoint saw gpuhost's connection open (not the run's start-up, which
    # a loaded machine stretches): bounded by --connect-timeout 2, far below the default 10 s
    deadline = time.monotonic() + 10
    while len(_held_silent(folder)) == len(before) and time.monotonic() < deadline:
        time.sleep(0.1)
    held = _held_silent(folder)[len(before):]
    assert held and max(held) < 7, f"{command} held a silent host's connection {held} s"


def _held_silent(folder: Path) -> list[float]:
    path = folder / "held-silent"
    return [float(x) for x in path.read_text().split()] if path.exists() else []


def test_connect_timeout_refuses_zero() -> None:
    for command in ("audit", "provision", "harden"):
        run = gpuhost(command, "inv.py", "--connect-timeout", "0")
        assert run.code == 2 and "--connect-timeout" in run.err and "Traceback" not in run.err
