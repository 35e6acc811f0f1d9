"""A real pyinfra deploy on 4 lab hosts: Debian package via the proxy, files, a systemd service.

The second run must change nothing, and testinfra must see the result through real systemd.
"""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab

DEPLOY = '''
from pyinfra.operations import apt, files, systemd

apt.packages(name="Install hello from Debian", packages=["hello"], update=True, cache_time=3600)
files.directory(name="Web root", path="/srv/labweb", mode="755")
files.put(name="Index page", src="index.html", dest="/srv/labweb/index.html", mode="644")
unit = files.put(name="Unit file", src="labwebd.service",
                 dest="/etc/systemd/system/labwebd.service", mode="644")
systemd.daemon_reload(name="Reload systemd", _if=unit.did_change)
systemd.service(name="labwebd running and enabled", service="labwebd.service",
                running=True, enabled=True)
'''

UNIT = """[Unit]
Description=gpuhost lab test web server

[Service]
ExecStart=/usr/bin/python3 -m http.server 8000 --directory /srv/labweb
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""

INDEX = "hello from the gpuhost lab\n"
TOTAL = re.compile(r"Grand total\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)")


def _pyinfra(inventory: Path, workdir: Path) -> tuple[int, int, int, int]:
    """Run the deploy; return (operations, success, error, no change) from pyinfra's summary."""
    exe = Path(sys.executable).with_name("pyinfra")
    try:
        proc = subprocess.run([str(exe), "-y", str(inventory), "deploy.py"], cwd=workdir,
                              capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"pyinfra did not finish in 300 s:\n{str(exc.stdout)[-3000:]}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    match = TOTAL.search(out)
    assert match, out[-3000:]
    return tuple(0 if v == "-" else int(v) for v in match.groups())  # type: ignore[return-value]


@pytest.fixture(scope="module")
def deployed(lab, tmp_path_factory):
    view = lab(4)
    view.reset()  # start from pristine hosts even when the session lab was used before
    work = tmp_path_factory.mktemp("deploy")
    (work / "deploy.py").write_text(DEPLOY)
    (work / "labwebd.service").write_text(UNIT)
    (work / "index.html").write_text(INDEX)
    first = _pyinfra(view.inventory_path, work)
    second = _pyinfra(view.inventory_path, work)
    return view, first, second


def test_first_run_changes_every_host(deployed) -> None:
    _view, (ops, success, error, unchanged), _second = deployed
    assert (ops, success, error, unchanged) == (24, 24, 0, 0)


def test_second_run_changes_nothing(deployed) -> None:
    _view, _first, (ops, success, error, unchanged) = deployed
    assert (ops, success, error, unchanged) == (24, 0, 0, 24)


def test_testinfra_verifies_package_file_and_service(deployed) -> None:
    view, _first, _second = deployed
    for host in view.hosts:
        ti = host.testinfra()
        assert ti.package("hello").is_installed
        assert ti.run("hello").stdout.strip() == "Hello, world!"
        index = ti.file("/srv/labweb/index.html")
        assert index.content_string == INDEX and index.mode == 0o644
        service = ti.service("labwebd")
        assert service.is_running and service.is_enabled
        assert ti.socket("tcp://0.0.0.0:8000").is_listening
        with urllib.request.urlopen(f"http://{host.address}:8000/", timeout=5) as resp:
            assert resp.read().decode() == INDEX


def test_systemctl_is_active_is_real(deployed) -> None:
    view, _first, _second = deployed
    ti = view.hosts[0].testinfra()
    assert ti.run("systemctl is-active labwebd").stdout.strip() == "active"
    ti.run("systemctl stop labwebd")
    try:
        stopped = ti.run("systemctl is-active labwebd")
        assert (stopped.rc, stopped.stdout.strip()) == (3, "inactive")
        assert not ti.service("labwebd").is_running
    finally:
        ti.run("systemctl start labwebd")
    assert ti.service("labwebd").is_running
