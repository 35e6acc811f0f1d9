"""``gpuhost check`` names an unreachable host's cause in one line, the same words the other
commands use (gpuhost.connection), from the OpenSSH client's stderr (testinfra connects with
``ssh``): endpoints on 127.0.0.1 that misbehave (tests/robustness/endpoints.py), an
unresolvable name, a real SSH server refusing authentication, a known_hosts with another key."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.robustness.conftest import gpuhost
from tests.robustness.test_connection_causes import CAUSES
from tests.robustness.test_connection_causes import _inventory as audit_inventory

# OpenSSH, unlike paramiko, goes on when it cannot save a new host key (it warns "Failed to add
# the host to the list of known hosts"): that host then meets the server's authentication
CHECK_CAUSES = {**CAUSES, "newkey": "authentication failed on 127.0.0.1:{ssh} as nobody"}


def _inventory(folder: Path, ports: dict[str, int]) -> Path:
    """The audit test's hosts, each with its own known_hosts file (ssh never writes the user's)
    and a 3 s ConnectTimeout (OpenSSH waits for a silent port's banner that long)."""
    audit = audit_inventory(folder, ports, list(CHECK_CAUSES))
    hosts = ast.literal_eval(audit.read_text(encoding="utf-8").split("=", 1)[1].strip())
    for name, data in hosts:
        if name != "nxdomain.invalid":
            data["ssh_connect_timeout"] = 3
            data.setdefault("ssh_known_hosts_file", str(folder / f"known_{name}"))
    path = folder / "inv-check.py"
    path.write_text(f"hosts = {hosts!r}\n", encoding="utf-8")
    return path


def test_check_names_each_hosts_cause(endpoints) -> None:
    ports, folder = endpoints
    inv = _inventory(folder, ports)
    run = gpuhost("check", str(inv), "--tier", "static", "--", "-q", "-p", "no:cacheprovider")
    assert "Traceback" not in run.err, run.err
    assert run.code == 1
    found: dict[str, set[str]] = {}
    for match in re.finditer(r"ssh://([\w.]+): host unreachable: (.*)", run.out):
        found.setdefault(match[1], set()).add(match[2].strip())
    for mode, cause in CHECK_CAUSES.items():
        name = "nxdomain.invalid" if mode == "dns" else mode
        lines = found.get(name, set())
        assert len(lines) == 1, (mode, lines)  # the same one line on every check of the host
        assert cause.format(**ports) in next(iter(lines)), (mode, lines)
    assert "kex_exchange_identification" not in run.out and "@@@" not in run.out


def test_openssh_timeout_and_unknown_host_key_lines() -> None:
    """Two causes the endpoints cannot produce fast: OpenSSH's words for a connect timeout
    (``ssh: connect to host %s port %s: %s`` with strerror) and for a host key not in
    known_hosts under StrictHostKeyChecking yes."""
    from gpuhost.connection import openssh_cause

    data = {"ssh_hostname": "10.123.255.9", "ssh_connect_timeout": 5}
    stderr = "ssh: connect to host 10.123.255.9 port 22: Connection timed out\r\n"
    assert openssh_cause(stderr, data, "gpu9") == (
        "connection timed out: no answer from 10.123.255.9:22 within 5 s"
    )
    stderr = (
        "No ED25519 host key is known for [10.123.255.9]:2222 and you have requested strict "
        "checking.\r\nHost key verification failed.\r\n"
    )
    cause = openssh_cause(stderr, {**data, "ssh_port": 2222}, "gpu9")
    assert cause is not None and cause.startswith("host key of 10.123.255.9:2222 is not known (No")
    assert cause.endswith("add it to known_hosts")
    assert openssh_cause("bash: line 1: true: command not found", data, "gpu9") is None


def test_no_route_to_host_is_named_for_paramiko_and_openssh() -> None:
    """A lab address with no host behind it (10.123.184.99 beside a 2-host lab): the kernel
    answers EHOSTUNREACH after its ARP tries. paramiko raises NoValidConnectionsError, whose
    own text was '[Errno None] Unable to connect to port 22 on ...' in upgrade's refusal line;
    OpenSSH's stderr below is what gpuhost check got from that address."""
    import errno

    from paramiko.ssh_exception import NoValidConnectionsError

    from gpuhost.connection import connect_cause, openssh_cause

    data = {"ssh_hostname": "10.123.184.99"}
    hint = (
        "(is the host up, the address right, and no blackhole, prohibit or firewall rule in the "
        "way?)"
    )
    said = f"no route to 10.123.184.99:22: No route to host {hint}"
    unreachable = OSError(errno.EHOSTUNREACH, "No route to host")
    assert (
        connect_cause(
            NoValidConnectionsError({("10.123.184.99", 22): unreachable}), data, "gpu-dead", 10
        )
        == said
    )
    stderr = "ssh: connect to host 10.123.184.99 port 22: No route to host\r\n"
    assert openssh_cause(stderr, data, "gpu-dead") == said
    # a 'prohibit' route (EACCES) and a 'blackhole' route (EINVAL: what this machine's blackhole
    # route for 10.123.0.0/16 answers; OpenSSH's line below was captured from it) are no route
    # either: they read 'cannot connect ...: Invalid argument' before
    for code, text in ((errno.EACCES, "Permission denied"), (errno.EINVAL, "Invalid argument")):
        refused = NoValidConnectionsError({("10.123.184.99", 22): OSError(code, text)})
        expected = f"no route to 10.123.184.99:22: {text} {hint}"
        assert connect_cause(refused, data, "gpu-dead", 10) == expected
        stderr = f"ssh: connect to host 10.123.184.99 port 22: {text}\r\n"
        assert openssh_cause(stderr, data, "gpu-dead") == expected
    # 'Permission denied (publickey)' stays an authentication failure
    denied = "nobody@10.123.184.99: Permission denied (publickey,password).\r\n"
    assert openssh_cause(denied, data, "gpu-dead").startswith("authentication failed")
