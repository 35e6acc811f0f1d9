"""Sixteen hosts at once answer SSH and a pyinfra fact run over all of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def test_sixteen_hosts_answer_ssh_and_pyinfra(lab) -> None:
    view = lab(16)
    assert [h.name for h in view.hosts] == [f"h{i}" for i in range(1, 17)]
    assert len({h.address for h in view.hosts}) == 16
    exe = Path(sys.executable).with_name("pyinfra")
    proc = subprocess.run([str(exe), "-y", str(view.inventory_path), "fact", "server.Hostname"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout + proc.stderr  # pyinfra prints fact data on stderr
    for host in view.hosts:
        assert f'"{host.name}": "{host.name}"' in out
