"""``gpuhost audit -q``: the error findings and the verdict line, as its help says; no stack
table, no warnings (issue 20). Hosts at a closed port of 127.0.0.1: the connection is refused,
each one is a ``host.unreachable`` error (no address beyond this machine is contacted)."""

from __future__ import annotations

from gpuhost.cli import main


def test_quiet_prints_the_errors_and_the_verdict_only(tmp_path, capsys) -> None:
    inv = tmp_path / "inv.py"
    inv.write_text("gpu = [('q1', {'ssh_hostname': '127.0.0.1', 'ssh_port': 1}), "
                   "('q2', {'ssh_hostname': '127.0.0.1', 'ssh_port': 2})]\n")
    code = main(["audit", str(inv), "-q", "--connect-timeout", "1"])
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert code == 1, out
    assert lines[0].lstrip().startswith("ERROR    host.unreachable on 1 host(s) (q1): ")
    assert lines[1].lstrip().startswith("ERROR    host.unreachable on 1 host(s) (q2): ")
    assert lines[-1].startswith("verdict: unreachable - 2 host(s)")
    assert len(lines) == 3, out  # nothing else: no host table, no stacks, no warnings
