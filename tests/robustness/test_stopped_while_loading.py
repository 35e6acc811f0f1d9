"""A signal while the inventory file runs stops the command (one line, 143/130), never reported
as a broken inventory: the loader took the signal's ``Stopped`` (a SystemExit) for the file
calling sys.exit ("the inventory file called sys.exit(143)", exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from robustness.conftest import ROOT

INVENTORY = """\
import os, signal, time
os.kill(os.getpid(), signal.{sig})
time.sleep(5)
gpu = [('n1', {{'ssh_hostname': '127.0.0.1', 'ssh_port': 1}})]
"""


@pytest.mark.parametrize(("sig", "code"), [("SIGTERM", 143), ("SIGINT", 130)])
@pytest.mark.parametrize("command", [["inventory", "check"], ["audit"], ["provision", "--dry"]])
def test_a_signal_while_the_inventory_loads_stops_the_command(tmp_path, sig, code, command):
    inventory = tmp_path / "inv.py"
    inventory.write_text(INVENTORY.format(sig=sig))

    run = subprocess.run(
        [sys.executable, "-m", "gpuhost", *command[:1], *command[1:2], str(inventory),
         *command[2:]],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
        env=dict(os.environ, PYTHONWARNINGS="ignore"),
    )  # fmt: skip

    assert run.returncode == code, run.stderr
    assert "inventory" not in run.stderr and "Traceback" not in run.stderr
    assert run.stderr.count("\n") == 1
