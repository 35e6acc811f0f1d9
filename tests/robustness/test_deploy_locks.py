"""One writer per host (issue 29): provision and harden lock each host they change, as upgrade,
rollback and snapshot take/prune do (``gpuhost.locks``). Two real processes: the first waits on
a host that accepts TCP and never answers SSH (so it holds its locks), the second is refused at
once with one line naming the holder (pid, command, since), before contacting any host."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.robustness.conftest import Run, a_builtin_profile, gpuhost, start_connecting


def _inventory(tmp_path: Path, port: int) -> Path:
    data = {"ssh_hostname": "127.0.0.1", "ssh_port": port, "ssh_connect_timeout": 60}
    inv = tmp_path / "inv.py"
    inv.write_text(f"gpu = [('s0', {data!r})]\n", encoding="utf-8")
    return inv


def _args(command: str, inv: Path, state: Path) -> list[str]:
    if command == "upgrade":
        return ["upgrade", str(inv), "--to", a_builtin_profile(), "--force", "--state-dir",
                str(state)]
    return [command, str(inv), "--connect-timeout", "60", "--state-dir", str(state)]


def _assert_refused(refused: Run, second: str, first: str, holder: int, inv: Path) -> None:
    assert refused.code == 2 and "Traceback" not in refused.err, refused.err
    assert refused.out == "" and all(x.startswith("warning") for x in refused.lines[:-1])
    line = refused.lines[-1]
    assert line.startswith(f"gpuhost: error: {second}: s0 is in use by pid {holder} "), line
    assert f"'gpuhost {first} {inv}" in line and ", since 20" in line and "(lock " in line, line


@pytest.mark.parametrize(("first", "seconds"), [("provision", ["harden", "upgrade"]),
                                                ("upgrade", ["provision"])])
def test_a_second_writer_of_a_host_is_refused_naming_the_first(
    endpoints, tmp_path, first, seconds
) -> None:
    """And a --dry run is no writer (as upgrade --dry): it runs beside one."""
    ports, folder = endpoints
    inv = _inventory(tmp_path, ports["silent"])
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    holder = start_connecting(folder, *_args(first, inv, state))
    try:
        refused = {second: gpuhost(*_args(second, inv, state)) for second in seconds}
        dry = gpuhost("harden", str(inv), "--dry", "--connect-timeout", "1",
                      "--state-dir", str(state))
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.communicate(timeout=60)
    for second, run in refused.items():
        _assert_refused(run, second, first, holder.pid, inv)
    assert "in use by" not in dry.err and "s0: unreachable" in dry.out, (dry.out, dry.err)
