"""Connection failures against a real OpenSSH server (a lab host, shared and left unchanged):
authentication refused, a host key that does not match known_hosts, a port nothing listens on,
next to the same host reached normally. Each is that host's audit result with its cause."""

from __future__ import annotations

import json
import subprocess

import pytest

from gpuhost.inventory.loader import select
from tests.robustness.conftest import gpuhost

pytestmark = pytest.mark.lab


def test_audit_of_a_real_sshd_names_each_cause(lab, tmp_path) -> None:
    view = lab(1)
    selection = select(str(view.inventory_path))
    name = selection.names[0]
    data = {k: v for k, v in selection.data(name).items() if k.startswith("ssh_")}
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True
    )
    other = " ".join((tmp_path / "other.pub").read_text().split()[:2])
    address, port = data.get("ssh_hostname", name), data.get("ssh_port", 22)
    entry = address if port == 22 else f"[{address}]:{port}"
    known = tmp_path / "known_hosts"
    known.write_text(f"{entry} {other}\n")
    hosts = [
        ("ok", data),
        ("auth", {**data, "ssh_user": "nobody"}),
        ("hostkey", {**data, "ssh_known_hosts_file": str(known)}),
        ("refused", {**data, "ssh_port": 2}),
    ]
    hosts[2][1]["ssh_strict_host_key_checking"] = "yes"
    inv = tmp_path / "inv.py"
    inv.write_text(f"hosts = {hosts!r}\n", encoding="utf-8")
    run = gpuhost("audit", str(inv), "--json", "-", "-q", "--connect-timeout", "10")
    assert "Traceback" not in run.err, run.err
    report = {h["name"]: h for h in json.loads(run.out)["hosts"]}
    assert report["ok"]["reachable"] is True
    messages = {n: h["findings"][0]["message"] for n, h in report.items() if n != "ok"}
    assert f"authentication failed on {address}:{port} as nobody" in messages["auth"]
    assert f"host key mismatch: {address}:{port}" in messages["hostkey"]
    assert f"connection refused: nothing listens on {address}:2" in messages["refused"]
