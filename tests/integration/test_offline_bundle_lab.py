"""The offline bundle on lab hosts (issue 27): a host with no route to any repository provisions
the built-in nvidia-repo-580-cuda13.0 (the lab's stand-in NVIDIA repository, which is what the
lab can install in seconds; Debian's own driver would be 1.2 GB) from a bundle made on another lab
host, ends with exactly the manifest's versions and audits clean; the same bundle missing a
package is refused with its name before anything is installed.

h1 is the reference host (a fresh host: the targets' image); h2, GPU-shaped (t4:1), is made
offline: its apt proxy is pointed at a closed port, so neither Debian's archive (the lab reaches
it only through the proxy, the hosts have no default route) nor the stand-in repository answers.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.provision_support import repo_data, ssh_data, write_inventory

pytestmark = pytest.mark.lab

PROFILE = "nvidia-repo-580-cuda13.0"
OFFLINE = "Acquire::http::Proxy \"http://127.0.0.1:9\";\nAcquire::Retries \"0\";\n"


def _gpuhost(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuhost", *args], capture_output=True,
                          text=True, timeout=900, cwd=cwd, check=False)


def _sh(host, cmd: str) -> str:
    proc = host.run(cmd, timeout=300)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}"
    return proc.stdout


def _installed(host) -> dict[str, str]:
    out = _sh(host, "dpkg-query -W -f='${Package} ${Version} ${db:Status-Status}\\n'")
    return {n: v for n, v, s in (line.split() for line in out.splitlines()) if s == "installed"}


@pytest.fixture(scope="module")
def bundle_lab(lab, tmp_path_factory):
    """(reference host, offline GPU-shaped target, inventory, bundle folder)."""
    view = lab(2)
    tmp = tmp_path_factory.mktemp("bundle")
    view.reset()
    reference, target = view.host("h1"), view.host("h2")
    view.manager.set_shape(2, ("t4", 1), None)
    try:
        _sh(target, f"printf '{OFFLINE}' > /etc/apt/apt.conf.d/01lab-proxy")
        base = {"gpuhost_profile": PROFILE, "gpuhost_harden": False}
        hosts = [
            (reference.name, dict(ssh_data(view, reference), **repo_data(view), **base)),
            (target.name, dict(ssh_data(view, target), **base,
                               gpuhost_bundle={"path": str(tmp / "bundle")},
                               gpuhost_proxy=view.proxy_url)),
        ]
        inventory = write_inventory(tmp / "inventory.py", hosts)
        made = _gpuhost("bundle", PROFILE, "-i", str(inventory), "--from-host", reference.name,
                        "--os", "debian12", "-o", str(tmp / "bundle"), cwd=tmp)
        assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
        yield reference, target, inventory, tmp / "bundle"
    finally:
        view.manager.set_shape(2, None, None)
        view.reset()


def test_the_target_has_no_repository(bundle_lab) -> None:
    _, target, _, bundle = bundle_lab
    proc = target.run("apt-get update", timeout=120)
    assert proc.returncode != 0 or "Err:" in proc.stdout, proc.stdout[-1500:]
    manifest = json.loads((bundle / "manifest.json").read_text())
    names = {p["package"] for p in manifest["packages"]}
    assert {"nvidia-driver", "nvidia-smi", "cuda-toolkit-13-0", "libcudnn9-cuda-13",
            "nvidia-container-toolkit"} <= names, sorted(names)
    for name in ("InRelease", "Release.gpg", "Packages.gz", "bundle-key.gpg"):
        assert (bundle / name).is_file(), name


def test_a_bundle_missing_a_package_is_refused_before_anything_is_installed(
    bundle_lab, tmp_path
) -> None:
    _, target, inventory, bundle = bundle_lab
    broken = tmp_path / "broken"
    shutil.copytree(bundle, broken)
    doc = json.loads((broken / "manifest.json").read_text())
    gone = next(p for p in doc["packages"] if p["package"] == "nvidia-smi")
    doc["packages"].remove(gone)
    (broken / gone["filename"]).unlink()
    (broken / "manifest.json").write_text(json.dumps(doc))
    text = inventory.read_text().replace(str(bundle), str(broken))
    broken_inventory = tmp_path / "inventory.py"
    broken_inventory.write_text(text)
    before = _installed(target)
    proc = _gpuhost("provision", str(broken_inventory), "--limit", target.name, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-2000:]
    assert "lacks packages profile nvidia-repo-580-cuda13.0 installs: nvidia-smi (missing" \
        in out, out[-2000:]
    assert _installed(target) == before
    assert target.run("test -e /etc/apt/apt.conf.d/00gpuhost-bundle").returncode == 1


@pytest.fixture(scope="module")
def converged(bundle_lab) -> tuple[subprocess.CompletedProcess[str], ...]:
    """The offline host provisioned from the bundle (with --reboot), then again: after the
    reboot the module is loaded, so clocks and persistence are applied by the second run, from
    the bundle again (the previous one restored the host's sources). (first, second): a module
    fixture, so each test that needs a converged host passes alone too."""
    _, target, inventory, bundle = bundle_lab
    cwd = bundle.parent
    first = _gpuhost("provision", str(inventory), "--limit", target.name, "--reboot", cwd=cwd)
    again = _gpuhost("provision", str(inventory), "--limit", target.name, cwd=cwd)
    return first, again


def test_the_offline_host_gets_exactly_the_manifest_and_audits_clean(
    bundle_lab, lab, converged
) -> None:
    _, target, inventory, bundle = bundle_lab
    cwd = bundle.parent
    first, again = converged
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-3000:]
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    manifest = json.loads((bundle / "manifest.json").read_text())
    installed = _installed(target)
    wrong = {p["package"]: (installed.get(p["package"]), p["version"])
             for p in manifest["packages"] if installed.get(p["package"]) != p["version"]}
    assert not wrong, wrong
    # the host's own sources are back; apt used none of them during the run
    assert target.run("test -e /etc/apt/apt.conf.d/00gpuhost-bundle").returncode == 1
    assert "127.0.0.1:9" in _sh(target, "cat /etc/apt/apt.conf.d/01lab-proxy")
    # gpuhost_proxy's drop-in (the lab's own 01lab-proxy, read after it, keeps the host offline)
    assert f'Acquire::https::Proxy "{lab(2).proxy_url}";' in _sh(
        target, "cat /etc/apt/apt.conf.d/00gpuhost-proxy")
    report = cwd / "audit.json"
    audit = _gpuhost("audit", str(inventory), "--limit", target.name, "--json", str(report),
                     cwd=cwd)
    assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-2000:]
    (entry,) = json.loads(report.read_text())["hosts"]
    bad = [f for f in entry["findings"] if f["severity"] in ("error", "warning")]
    assert not bad, bad
    assert entry["facts"]["driver"]["loaded_module"]["version"] == "580.178.04"


@pytest.mark.usefixtures("converged")
def test_a_served_bundle_is_reached_directly_past_the_sites_proxy(bundle_lab, tmp_path) -> None:
    """The same bundle served over HTTP by h1 (a host the operator names): its key checked by
    SHA-256 on this machine, h2's apt reaches h1 DIRECT although every other request goes to
    the (closed) proxy; the converged host stays as it is, the sources are restored."""
    reference, target, inventory, bundle = bundle_lab
    copy = subprocess.run(
        f"tar -C {bundle} -cf - . | {' '.join(reference.ssh_args)} "
        "'mkdir -p /srv/bundle && tar -C /srv/bundle -xf -'",
        shell=True, capture_output=True, text=True, timeout=120, check=False)
    assert copy.returncode == 0, copy.stderr
    _sh(reference, "systemd-run --unit gpuhost-bundle-http python3 -m http.server 8081 "
                   "--bind 0.0.0.0 --directory /srv/bundle && sleep 1")
    key = hashlib.sha256((bundle / "bundle-key.gpg").read_bytes()).hexdigest()
    url = f"http://{reference.address}:8081"
    served = tmp_path / "inventory.py"
    served.write_text(inventory.read_text().replace(
        repr({"path": str(bundle)}), repr({"url": url, "key_sha256": key})))
    before = _installed(target)
    run = _gpuhost("provision", str(served), "--limit", target.name, cwd=tmp_path)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert _installed(target) == before
    assert target.run("test -e /etc/apt/apt.conf.d/00gpuhost-bundle").returncode == 1
    assert "file:" not in _sh(target, "cat /etc/gpuhost/bundle/sources.list")
    log = _sh(reference, "journalctl -u gpuhost-bundle-http --no-pager")
    assert re.search(r'"GET /(\./)?InRelease HTTP/1\.1" 200', log), log[-1500:]
