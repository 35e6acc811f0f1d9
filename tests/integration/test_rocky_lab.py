"""Rocky-shaped lab hosts (``lab up --os rocky-9``, tests/lab/shape_rhel.py), issue 33 parts 7-9.

h1 is GPU-shaped with 1 x T4, h2 with 1 x L4; both are Rocky 9 on the Debian base: Debian's real dnf
4.14 with versionlock, rpm with its database in /var/lib/rpm, RHEL 9's dnf.conf, and the lab's
signed stand-in RPM repositories (tests/lab/rpmrepo.py: NVIDIA's rhel9 modular layout and its
rhel10 layout, Rocky's and EPEL's stand-ins).

1. The lab's own mechanics, by the commands NVIDIA documents for RHEL 8/9 and 10:
   ``dnf module enable nvidia-driver:580-dkms``, an exact install, ``dnf versionlock add`` on the
   coupled set, ``dnf upgrade`` keeps it (within the stream it would move to 580.178.04, never
   590); a partial lock makes ``dnf upgrade`` fail under ``best=True``; the stream cannot be
   switched without a reset; the RHEL 10 layout has no modules and versionlock alone pins; the
   GPU emulator answers as NVIDIA's nvidia-smi after a reboot; gpuhost's audit (the package
   manager seam, issue 33 part 1) reads that host through rpm and the versionlock file.
2. gpuhost end to end (part 8): ``provision --reboot``, audit, static checks, the OS's own
   ``dnf upgrade``, ``upgrade --to``, ``rollback``, and bad input (a profile for another OS, a
   stream the repository lacks), and a provision from an offline bundle: ``gpuhost bundle`` on
   h1 makes an RPM repository, h2 (its own repositories disabled, dnf's proxy a closed port, so
   only the bundle answers) is provisioned from it to the same locked set as h1 online.

The two hosts are shared by the module's tests; they are re-created before part 2 and back to
Debian at the end. What a test needs of an earlier step is a module fixture, never an earlier
test, so each test also passes alone: h1 with the driver installed and locked by hand
(``locked``), then rebooted so the module loads (``rebooted``); part 2's provision
(``provisioned``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.provision_support import ssh_data, write_inventory
from tests.lab.config import REPO_PORT

pytestmark = [pytest.mark.lab, pytest.mark.slow]

#: both GPU-shaped: a provision --reboot needs the module loaded after the boot, which the lab's
#: emulator does only on a host with a GPU
SHAPES = {1: ("t4", 1), 2: ("l4", 1)}
Attempt = tuple[subprocess.CompletedProcess[str], dict[str, str], dict[str, str], list[str]]
OS = "rocky-9"
CUDA9 = "http://lab-gateway:8088/compute/cuda/repos/rhel9/x86_64/cuda-rhel9.repo"
CUDA10 = "http://lab-gateway:8088/compute/cuda/repos/rhel10/x86_64/cuda-rhel10.repo"
#: the coupled set of one driver release with the proprietary (latest-dkms) kmod
COUPLED = ["nvidia-driver-cuda", "nvidia-driver-cuda-libs", "libnvidia-ml", "libnvidia-cfg",
           "nvidia-persistenced", "nvidia-kmod-common", "kmod-nvidia-latest-dkms"]
OLD, NEW = "580.159.03", "580.178.04"


class Rocky:
    def __init__(self, view: Any, workdir: Path) -> None:
        self.view, self.workdir = view, workdir
        self.h1, self.h2 = view.hosts[0], view.hosts[1]
        #: provision of BAD_STREAM, then of BAD_VERSION, on fresh h2: (result, rpms before,
        #: after, the files gpuhost would write that exist after)
        self.no_stream: Attempt
        self.no_version: Attempt
        #: the offline inventory (h2 from the bundle), provision's output, the bundle's making
        self.offline: Path
        self.offline_output = ""
        self.bundle_s = 0.0

    def shape(self) -> None:
        for index, gpu in SHAPES.items():
            self.view.hosts[index - 1].record = self.view.manager.set_shape(
                index, gpu, None, OS)

    @property
    def record(self) -> dict[str, Any]:
        state = self.view.manager.load()
        assert state is not None
        return dict(state["shapes"][OS])


@pytest.fixture(scope="module")
def rocky(lab: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rocky]:
    view = lab(max(2, lab.count))
    env = Rocky(view, tmp_path_factory.mktemp("rocky"))
    env.shape()
    try:
        yield env
    finally:
        for index in SHAPES:
            view.manager.set_shape(index, None, None)


def sh(host: Any, cmd: str, timeout: float = 300) -> str:
    proc = host.run(cmd, timeout=timeout)
    assert proc.returncode == 0, f"{host.name}: {cmd}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc.stdout


def rpms(host: Any) -> dict[str, str]:
    """{name: epoch:version-release} of the host's rpmdb."""
    out = sh(host, "rpm -qa --qf '%{NAME} %{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n'")
    return dict(line.split() for line in out.splitlines())


def reboot(host: Any) -> None:
    """Reboot a lab host from inside (nspawn boots it again) and wait until systemd is up."""
    before = host.run("cat /proc/sys/kernel/random/boot_id").stdout.strip()
    host.run("nohup sh -c 'sleep 1; systemctl reboot' >/dev/null 2>&1 &")
    host.manager._ssh_close(host.record)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        time.sleep(2)
        now = host.run("cat /proc/sys/kernel/random/boot_id", timeout=15)
        if now.returncode == 0 and now.stdout.strip() not in ("", before):
            host.run("systemctl is-system-running --wait", timeout=120)
            return
        host.manager._ssh_close(host.record)
    raise AssertionError(f"{host.name} did not come back from its reboot")


# ------------------------------------------------------------------ 1. the lab's mechanics


def test_a_rocky_host_is_rocky_9_with_dnf_4_14_and_rpm_in_var_lib_rpm(rocky: Rocky) -> None:
    for host in (rocky.h1, rocky.h2):
        release = sh(host, ". /etc/os-release; echo $ID $VERSION_ID $PLATFORM_ID; "
                     "cat /etc/redhat-release").split("\n")
        assert release[:2] == ["rocky 9.6 platform:el9", "Rocky Linux release 9.6 (Blue Onyx)"]
        assert sh(host, "dnf --version").splitlines()[0] == "4.14.0"
        assert sh(host, "rpm --eval %_dbpath").strip() == "/var/lib/rpm"
        conf = sh(host, "cat /etc/dnf/dnf.conf")
        for line in ("best=True", "skip_if_unavailable=False",
                     "module_platform_id=platform:el9"):
            assert line in conf.splitlines(), conf
        assert sh(host, "stat -c %s /etc/dnf/plugins/versionlock.list").strip() == "0"
        assert sorted(rpms(host)) == ["bash", "rocky-release"]
        assert sh(host, "systemctl is-system-running").strip() in ("running", "degraded")
        repos = sh(host, "dnf -q repolist --all")
        assert re.search(r"^crb\s.*disabled$", repos, re.M), repos
        assert [r.split()[0] for r in repos.splitlines()[1:]] == [
            "appstream", "baseos", "crb", "extras"], repos
    # what gpuhost's checks see: pytest-testinfra picks its rpm package module from os-release
    infra = rocky.h1.testinfra()
    assert (infra.system_info.distribution, infra.system_info.release) == ("rocky", "9.6")
    assert type(infra.package("bash")).__name__ == "RpmPackage"
    assert infra.package("rocky-release").version == "9.6"


@pytest.fixture(scope="module")
def locked(rocky: Rocky) -> dict[str, Any]:
    """h1 as NVIDIA's RHEL 9 instructions leave it: the rhel9 repository, stream 580-dkms
    enabled, the OLD driver with the proprietary kmod installed, the coupled set versionlocked.
    What each step showed: the streams listed, the module file, the rpms installed, the plan of
    an unlocked ``dnf upgrade``."""
    h1 = rocky.h1
    sh(h1, f"dnf -y -q config-manager --add-repo {CUDA9} && dnf -y -q install epel-release "
           "kernel-devel-$(uname -r) kernel-headers")
    seen: dict[str, Any] = {"streams": sh(h1, "dnf -q module list nvidia-driver")}
    sh(h1, "dnf -y -q module enable nvidia-driver:580-dkms")
    seen["module"] = sh(h1, "cat /etc/dnf/modules.d/nvidia-driver.module")
    sh(h1, f"dnf -y -q install nvidia-driver-cuda-{OLD} kmod-nvidia-latest-dkms-{OLD}")
    seen["installed"] = rpms(h1)
    seen["plan"] = h1.run("dnf upgrade --assumeno").stdout
    sh(h1, "dnf -q versionlock add " + " ".join(f"'{n}-{OLD}*'" for n in COUPLED))
    return seen


def test_stream_exact_version_versionlock_keeps_the_set_through_dnf_upgrade(
    rocky: Rocky, locked: dict[str, Any]
) -> None:
    h1 = rocky.h1
    streams = locked["streams"]
    for stream in ("latest-dkms [d]", "open-dkms", "580-dkms", "580-open", "590-dkms"):
        assert stream in streams, streams
    assert "stream=580-dkms" in locked["module"]
    installed = locked["installed"]
    assert {n: installed.get(n) for n in COUPLED} == {n: f"3:{OLD}-1.el9" for n in COUPLED}
    assert "dkms" in installed and "kmod-nvidia-open-dkms" not in installed
    # unlocked, the stream moves the set within 580, never to 590
    plan = locked["plan"]
    assert NEW in plan and "590." not in plan, plan
    locks = sh(h1, "grep -v '^#' /etc/dnf/plugins/versionlock.list | grep .").split()
    assert sorted(locks) == sorted(f"{n}-3:{OLD}-1.el9.*" for n in COUPLED)
    proc = h1.run("dnf -y upgrade")
    assert proc.returncode == 0 and "Nothing to do." in proc.stdout, proc.stdout + proc.stderr
    assert rpms(h1) == installed
    refused = h1.run(f"dnf -y install nvidia-driver-cuda-{NEW}")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    # a stream switch needs a reset first (NVIDIA: dnf module reset / switch-to)
    switch = h1.run("dnf -y module enable nvidia-driver:580-open")
    assert switch.returncode == 1 and "module_stream_switch" in switch.stderr, switch.stderr


@pytest.mark.usefixtures("locked")
def test_a_partial_lock_makes_dnf_upgrade_fail_under_best_true(rocky: Rocky) -> None:
    h1 = rocky.h1
    sh(h1, "dnf -q versionlock delete nvidia-persistenced")
    proc = h1.run("dnf -y upgrade")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "cannot install the best update candidate for package nvidia-persistenced" in out, out
    sh(h1, f"dnf -q versionlock add 'nvidia-persistenced-{OLD}*'")
    assert "Nothing to do." in sh(h1, "dnf -y upgrade")


@pytest.fixture(scope="module")
def rebooted(rocky: Rocky, locked: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """h1, driver installed and locked, rebooted: the emulated module loads at boot. What
    ``nvidia-smi -L`` answered before the reboot."""
    before = rocky.h1.run("nvidia-smi -L")
    reboot(rocky.h1)
    return before


def test_the_gpu_emulator_answers_as_nvidias_nvidia_smi_after_the_reboot(
    rocky: Rocky, rebooted: subprocess.CompletedProcess[str]
) -> None:
    h1 = rocky.h1
    before = rebooted
    assert before.returncode == 9, before.stdout  # installed, not loaded: the real one's exit 9
    smi = sh(h1, "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader")
    assert smi.strip() == f"Tesla T4, {OLD}", smi
    assert "x86_64 Kernel Module" in sh(h1, "cat /proc/driver/nvidia/version")
    assert sh(h1, "systemctl start nvidia-persistenced && systemctl is-active "
                  "nvidia-persistenced").strip() == "active"


@pytest.mark.usefixtures("rebooted")
def test_gpuhost_audit_reads_the_rocky_host_through_rpm_and_the_lock_file(rocky: Rocky) -> None:
    """gpuhost's audit (no profile) on h1 with the driver installed and locked by hand, the
    module loaded since the reboot (the fixtures ``locked`` and ``rebooted``)."""
    h1 = rocky.h1
    inventory = write_inventory(rocky.workdir / "plain.py", [(h1.name, ssh_data(rocky.view, h1))])
    report = rocky.workdir / "plain-audit.json"
    proc = _gpuhost(rocky, "audit", str(inventory), "--json", str(report))
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
    (host,) = json.loads(report.read_text())["hosts"]
    facts = host["facts"]
    assert (facts["os"]["id"], facts["os"]["version_id"]) == ("rocky", "9.6")
    assert facts["packages"]["manager"] == "rpm"
    assert sorted(facts["packages"]["held"]) == sorted(COUPLED)
    versions = {p["name"]: p["version"] for p in facts["packages"]["packages"]}
    assert {n: versions.get(n, "").split("-")[0] for n in COUPLED} == {n: OLD for n in COUPLED}
    loaded = facts["driver"]["loaded_module"]
    assert loaded["version"] == OLD and loaded["flavor"] != "open", loaded
    assert not [f for f in host["findings"] if f["severity"] == "error"], host["findings"]


def test_the_rhel10_layout_has_no_modules_and_versionlock_alone_pins(rocky: Rocky) -> None:
    h2 = rocky.h2
    sh(h2, f"dnf -y -q config-manager --add-repo {CUDA10} && dnf -y -q install epel-release")
    none = h2.run("dnf -q module list nvidia-driver")
    assert none.returncode == 1 and "No matching Modules" in none.stderr, none.stderr
    sh(h2, f"dnf -y -q install nvidia-open-{OLD} kmod-nvidia-open-dkms-{OLD}")
    installed = rpms(h2)
    assert installed["kmod-nvidia-open-dkms"] == f"3:{OLD}-1.el10"
    assert "kmod-nvidia-latest-dkms" not in installed
    plan = h2.run("dnf upgrade --assumeno").stdout
    assert "590.48.01" in plan, plan  # no stream: unlocked, the host would leave branch 580
    names = [n for n in installed if n not in ("bash", "rocky-release", "epel-release", "dkms")]
    sh(h2, "dnf -q versionlock add " + " ".join(f"'{n}-{installed[n].split(':')[1]}*'"
                                                for n in names))
    assert "Nothing to do." in sh(h2, "dnf -y upgrade")
    assert rpms(h2) == installed
    # a lock on a name the repository lacks writes nothing and says rc 0 (platforms.md, 6)
    lacking = h2.run("dnf versionlock add 'nvidia-no-such-package-580.178.04*'")
    assert lacking.returncode == 0 and "No package found" in lacking.stdout + lacking.stderr
    assert "nvidia-no-such-package" not in sh(h2, "cat /etc/dnf/plugins/versionlock.list")


# ------------------------------------------------------------------ 2. gpuhost end to end

#: the built-in profiles that serve rocky-9 (issue 33 part 6): START (CUDA 12.9, kernel_module
#: auto: proprietary without gpuhost_gpus, stream 580-dkms) and TARGET (CUDA 13.0 beside 12.9,
#: the open module, stream 580-open), so ``upgrade --to TARGET`` switches the stream and the
#: kernel module flavour and ``rollback`` switches back. Bad input: BAD_OS, a built-in profile
#: for Debian only; BAD_STREAM, TARGET at a branch whose stream the repository lacks (a
#: variant in a profiles file of the module).
START, TARGET = "nvidia-repo-580-cuda12.9", "nvidia-repo-580-cuda13.0"
BAD_OS, BAD_STREAM = "debian12-nonfree-535-security", "branch-595"
#: TARGET at a 580 release the stand-in repository lacks (its stream 580-open is offered)
BAD_VERSION = "version-580.95.05"
#: every built-in NVIDIA-repository profile pins CUDA 13.0.2 or 12.9.x, which NVIDIA bulletin
#: 5755 (fixed in 13.1.0) names: the audit's security.cuda-toolkit error is the same on every OS
#: (data/advisories.yaml vs data/profiles.yaml, not the dnf path), accepted here by name
KNOWN = "security.cuda-toolkit"


def _builtin_profiles() -> dict[str, Any]:
    from importlib import resources

    import yaml

    text = (resources.files("gpuhost") / "data" / "profiles.yaml").read_text()
    return dict(yaml.safe_load(text)["profiles"])




def _variants(path: Path) -> Path:
    """BAD_STREAM: TARGET with its driver changed."""
    import yaml

    base = _builtin_profiles()[TARGET]
    changes: dict[str, dict[str, Any]] = {
        # R595 (595.91.07: a release the compatibility data knows, CUDA 13 capable): the stand-in
        # repository has no 595 stream
        BAD_STREAM: {"driver": {"version": "595.91.07", "branch": 595}},
        # R580's 580.95.05 (CUDA 13.0.2's floor): NVIDIA published it, the stand-in has none
        BAD_VERSION: {"driver": {"version": "580.95.05", "branch": 580}},
    }
    out = {}
    for name, change in changes.items():
        profile = copy.deepcopy(base)
        profile["driver"].update(change.get("driver", {}))
        profile.update({k: v for k, v in change.items() if k != "driver"},
                       description=f"{TARGET} with {change} (tests/integration/test_rocky_lab)")
        out[name] = profile
    path.write_text(yaml.safe_dump({"profiles": out}, sort_keys=False))
    return path


def _gpuhost(env: Rocky, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """gpuhost's CLI in a new process, with a state folder of this module: its host locks are
    keyed by inventory name (h1, h2), which every lab on the machine uses."""
    return subprocess.run([sys.executable, "-m", "gpuhost", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=env.workdir, check=False,
                          stdin=subprocess.DEVNULL,
                          env=dict(os.environ, GPUHOST_STATE_DIR=str(env.workdir / "state")))


def _inventory(env: Rocky, profile: str, name: str = "", h2_data: dict[str, Any] | None = None,
               **extra: Any) -> Path:
    record = env.record
    key = Path(record["key_path"])
    profiles = env.workdir / "profiles.yaml"
    if not profiles.exists():
        _variants(profiles)
    hosts = []
    for host in (env.h1, env.h2):
        data = {**ssh_data(env.view, host), "gpuhost_profile": profile,
                "gpuhost_profiles_file": str(profiles),
                "gpuhost_cuda_repo_url": record["repo_url"],
                "gpuhost_cuda_repo_key": str(key),
                "gpuhost_cuda_repo_key_sha256": hashlib.sha256(key.read_bytes()).hexdigest(),
                "gpuhost_harden": False, **extra}
        if host is env.h2:
            data.update(h2_data or {})
        hosts.append((host.name, data))
    return Path(write_inventory(env.workdir / f"{name or profile}.py", hosts))


def _audit_errors(env: Rocky, inventory: Path) -> list[dict[str, Any]]:
    report = env.workdir / "audit.json"
    proc = _gpuhost(env, "audit", str(inventory), "--json", str(report))
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
    hosts = json.loads(report.read_text())["hosts"]
    assert all(h["reachable"] for h in hosts), proc.stdout[-2000:]
    return [{"host": h["name"], **f} for h in hosts for f in h.get("findings", [])
            if f["severity"] == "error" and f["rule"] != KNOWN]


def _refused_before_anything_changed(env: Rocky, profile: str, *words: str) -> None:
    before = rpms(env.h2)
    proc = _gpuhost(env, "provision", str(_inventory(env, profile, f"bad-{profile}")),
                    "--limit", env.h2.name)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in out, out[-2000:]
    for word in words:
        assert word in out, out[-2000:]
    assert rpms(env.h2) == before


def _packages(installed: dict[str, str]) -> dict[str, str]:
    """The packages of an rpmdb listing: without rpm's keys (gpg-pubkey), which a repository's
    key import adds (the lab's one key signs Rocky's, EPEL's and NVIDIA's stand-ins)."""
    return {n: v for n, v in installed.items() if n != "gpg-pubkey"}


#: what a provision writes first on a dnf host (operations/dnf_pin.repository), the lock file
WRITTEN = ("/etc/yum.repos.d/gpuhost-cuda.repo", "/etc/pki/rpm-gpg/RPM-GPG-KEY-gpuhost-cuda",
           "/etc/dnf/modules.d/nvidia-driver.module", "/etc/gpuhost/profile")


def _attempt(env: Rocky, profile: str) -> Attempt:
    """Provision ``profile`` on h2: (result, h2's rpms before, after, WRITTEN files there)."""
    before = rpms(env.h2)
    proc = _gpuhost(env, "provision", str(_inventory(env, profile, f"try-{profile}")),
                    "--limit", env.h2.name)
    found = sh(env.h2, f"ls -d {' '.join(WRITTEN)} 2>/dev/null; true").split()
    return proc, before, rpms(env.h2), found


#: h2's offline data: the bundle made on h1, dnf's proxy a closed port with credentials (which
#: no output may show)
PROXY_PASSWORD = "s3cret-Proxy-pw"
PROXY = f"http://lab:{PROXY_PASSWORD}@127.0.0.1:9"


@pytest.fixture(scope="module")
def provisioned(rocky: Rocky) -> Rocky:
    """Fresh hosts (part 1 left packages and locks); on fresh h2 BAD_STREAM and BAD_VERSION,
    which must be refused (kept for the tests below); then the offline bundle of START made on
    fresh h1 (EPEL and CRB enabled first: a reference host needs the repositories the packages
    come from) and h2's own repositories disabled; then both hosts provisioned at START with
    --reboot: h1 online (gpuhost enables EPEL and CRB on Rocky: NVIDIA's dkms comes from EPEL),
    h2 from the bundle through a closed proxy."""
    rocky.shape()
    rocky.no_stream = _attempt(rocky, BAD_STREAM)
    rocky.no_version = _attempt(rocky, BAD_VERSION)
    sh(rocky.h1, "dnf -y -q install epel-release && dnf -y -q config-manager --set-enabled crb")
    bundle = rocky.workdir / "bundle"
    started = time.monotonic()
    made = _gpuhost(rocky, "bundle", START, "-i", str(_inventory(rocky, START)), "--from-host",
                    rocky.h1.name, "--os", OS, "-o", str(bundle))
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    rocky.bundle_s = time.monotonic() - started
    sh(rocky.h2, "dnf -y -q config-manager --set-disabled baseos appstream extras")
    offline = {"gpuhost_bundle": {"path": str(bundle)}, "gpuhost_proxy": PROXY}
    rocky.offline = _inventory(rocky, START, "offline", h2_data=offline)
    proc = _gpuhost(rocky, "provision", str(rocky.offline), "--reboot")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    rocky.offline_output = proc.stdout + proc.stderr
    return rocky


def test_provision_enabled_epel_and_crb_for_dkms(provisioned: Rocky) -> None:
    h1 = provisioned.h1
    assert {"epel-release", "dkms"} <= set(rpms(h1))
    repos = sh(h1, "dnf -q repolist")
    assert re.search(r"^crb\s", repos, re.M) and re.search(r"^epel\s", repos, re.M), repos


def test_a_rocky_host_provisioned_from_an_offline_bundle(provisioned: Rocky) -> None:
    """h2 from the RPM bundle alone: the same locked set, stream and flavour as h1 from NVIDIA's
    repository; dkms and kernel-devel from the bundle (no EPEL); the proxy's password on no
    line of output; a re-run changes nothing."""
    env = provisioned
    manifest = json.loads((env.workdir / "bundle" / "manifest.json").read_text())
    assert (manifest["format"], manifest["os"], manifest["modules"]) == (
        "rpm", OS, ["nvidia-driver:580-dkms"])
    held = {p["package"] for p in manifest["packages"]}
    assert {"dkms", "kernel-devel", "kmod-nvidia-latest-dkms"} <= held, sorted(held)
    h1_rpms, h2_rpms = rpms(env.h1), rpms(env.h2)
    assert {n: h2_rpms.get(n) for n in COUPLED} == {n: f"3:{NEW}-1.el9" for n in COUPLED}
    assert {n: h2_rpms.get(n) for n in held} == {n: h1_rpms.get(n) for n in held}
    assert "epel-release" not in h2_rpms and "kmod-nvidia-open-dkms" not in h2_rpms
    locks = "grep -v '^#' /etc/dnf/plugins/versionlock.list | sort"
    assert sh(env.h2, locks) == sh(env.h1, locks)
    assert "stream=580-dkms" in sh(env.h2, "cat /etc/dnf/modules.d/nvidia-driver.module")
    assert [r.split()[0] for r in sh(env.h2, "dnf -q repolist").splitlines()[1:]] == [
        "gpuhost-bundle"]
    repo = sh(env.h2, "cat /etc/yum.repos.d/gpuhost-bundle.repo; "
                      "test ! -e /etc/yum.repos.d/gpuhost-cuda.repo && echo no-online-repo")
    assert "gpgcheck=1" in repo and "no-online-repo" in repo, repo
    conf = sh(env.h2, "cat /etc/dnf/dnf.conf")
    assert "proxy=http://127.0.0.1:9" in conf and "proxy_username=lab" in conf, conf
    smi = sh(env.h2, "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader")
    assert smi.strip() == f"NVIDIA L4, {NEW}", smi
    # the run after the first boot with the module loaded applies persistence and clocks (as
    # online, test below); nothing of the bundle, the proxy or the packages changes; the next
    # run changes nothing
    first = _gpuhost(env, "provision", str(env.offline), "--limit", env.h2.name)
    shown = first.stdout + first.stderr
    changed = re.findall(r"Starting operation: gpuhost provision \| ([^\n]+)\n\s*\[h2\] Success",
                         shown)
    assert first.returncode == 0 and changed == [
        "Configure persistence mode | nvidia-persistenced enabled and running",
        "Configure GPU clocks | GPU clocks (auto)"], shown[-3000:]
    again = _gpuhost(env, "provision", str(env.offline), "--limit", env.h2.name)
    out = again.stdout + again.stderr
    assert again.returncode == 0 and "h2: ok, 0 changed" in out, out[-3000:]
    assert PROXY_PASSWORD not in out + shown + env.offline_output
    print(f"bundle made in {env.bundle_s:.0f} s")
    _served_to_h2(env, h2_rpms)


def _served_to_h2(env: Rocky, installed: dict[str, str]) -> None:
    """The same bundle served over HTTP (the lab's web server on the bridge, any static server
    does): h2 switched to it with key_sha256 the manifest's SHA-256; its keys checked here and
    put under /etc/pki/rpm-gpg/gpuhost-bundle, the .repo's baseurl the URL, reached past
    dnf.conf's closed proxy; no package changes."""
    import shutil

    started = time.monotonic()
    folder = Path(env.view.state["state_dir"]) / "repo" / "served-bundle"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(env.workdir / "bundle", folder)
    url = f"http://{env.view.gateway}:{REPO_PORT}/served-bundle"
    anchor = hashlib.sha256((folder / "manifest.json").read_bytes()).hexdigest()
    served = _inventory(env, START, "served", h2_data={
        "gpuhost_bundle": {"url": url, "key_sha256": anchor}, "gpuhost_proxy": PROXY})
    proc = _gpuhost(env, "provision", str(served), "--limit", env.h2.name)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and PROXY_PASSWORD not in out, out[-3000:]
    repo = sh(env.h2, "cat /etc/yum.repos.d/gpuhost-bundle.repo; "
                      "ls /etc/pki/rpm-gpg/gpuhost-bundle")
    assert f"baseurl={url}/" in repo and "\nproxy=\n" in repo, repo
    assert "RPM-GPG-KEY-gpuhost-cuda" in repo and "gpgcheck=1" in repo, repo
    assert sh(env.h2, "dnf -q makecache >/dev/null && echo read").strip() == "read"
    assert rpms(env.h2) == installed
    print(f"served bundle step {time.monotonic() - started:.0f} s")


def test_provision_reboot_converges_audits_clean_and_static_checks_pass(
    provisioned: Rocky,
) -> None:
    env = provisioned
    inventory = _inventory(env, START)
    # the run after the first boot with the module loaded applies persistence and clocks (as on
    # Debian, test_nvidia_repo_loop_lab); the next one changes nothing
    _gpuhost(env, "provision", str(inventory))
    again = _gpuhost(env, "provision", str(inventory))
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-3000:]
    assert "h1: ok, 0 changed" in out and "h2: ok, 0 changed" in out, out[-3000:]
    smi = sh(env.h1, "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader")
    assert smi.strip() == f"Tesla T4, {NEW}", smi
    assert "stream=580-dkms" in sh(env.h1, "cat /etc/dnf/modules.d/nvidia-driver.module")
    assert "x86_64 Kernel Module" in sh(env.h1, "cat /proc/driver/nvidia/version")
    assert "kmod-nvidia-open-dkms" not in rpms(env.h1)
    # the locks name only what the profile installs: never an OS package, whose updates a lock
    # would hold back (dnf reads every line as an exclude)
    for host in (env.h1, env.h2):
        locks = sh(host, "grep -v '^#' /etc/dnf/plugins/versionlock.list | grep . || true")
        os_locked = [line for line in locks.split() if re.match(
            r"(bash|rocky-release|kernel-devel|kernel-headers|dkms|epel-release|gpg-pubkey)-\d",
            line)]
        assert not os_locked, locks
    errors = _audit_errors(env, inventory)
    assert not errors, errors
    check = _gpuhost(env, "check", str(inventory), "--tier", "static")
    assert check.returncode == 0 and " passed" in check.stdout, check.stdout[-4000:]


def test_the_oss_own_dnf_upgrade_leaves_the_pinned_set(provisioned: Rocky) -> None:
    env = provisioned
    before = [rpms(h) for h in (env.h1, env.h2)]
    for host in (env.h1, env.h2):
        proc = host.run("dnf -y upgrade", timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert [rpms(h) for h in (env.h1, env.h2)] == before
    assert not _audit_errors(env, _inventory(env, START))


def test_a_profile_for_another_os_is_one_line_before_anything_changes(
    provisioned: Rocky,
) -> None:
    _refused_before_anything_changed(provisioned, BAD_OS, OS, BAD_OS)


def test_a_module_stream_the_repository_lacks_is_one_line(provisioned: Rocky) -> None:
    """Judged while the deploy is prepared, NVIDIA's repository read by its URL: nothing on the
    host changed, not even the repository file or its key (rpm's gpg-pubkey)."""
    proc, before, after, written = provisioned.no_stream
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out, out[-2000:]
    assert "module stream nvidia-driver:595-open is not offered" in out, out[-2000:]
    assert after == before and written == []


def test_a_version_the_repository_lacks_is_one_line_naming_host_package_version(
    provisioned: Rocky,
) -> None:
    """Issue 33: a package gpuhost would install and version-lock that no repository offers at
    the profile's version (dnf's own ``versionlock add`` writes nothing and exits 0 for it) is
    one line naming host, package and version, before anything changes."""
    proc, before, after, written = provisioned.no_version
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out, out[-2000:]
    line = next((x for x in out.splitlines() if "not offered by the configured" in x), "")
    assert line.lstrip().startswith(f"{provisioned.h2.name}: "), out[-2000:]
    assert "kmod-nvidia-open-dkms 580.95.05 (offered: 3:570.195.03-1.el9" in line, line
    assert "nothing was changed" in line, line
    assert after == before and written == []


def test_upgrade_to_another_profile_and_rollback(provisioned: Rocky) -> None:
    env = provisioned
    state_dir = env.workdir / "upgrade-state"
    before = rpms(env.h2)
    # START's CUDA 12.9 is the default, through the cuda alternatives group NVIDIA's toolkit
    # packages make, chosen by hand (manual mode); TARGET moves it to 13.0; the rollback removes
    # 13.0, whose package's removal leaves the group in auto mode: gpuhost must put the hand's
    # choice back (issue 33: the snapshot records link, alternative and mode)
    link = "readlink /usr/local/cuda; readlink -f /usr/local/cuda; head -n 1 " \
           "/var/lib/dpkg/alternatives/cuda"
    for host in (env.h1, env.h2):
        sh(host, "update-alternatives --set cuda /usr/local/cuda-12.9")
    start_link = sh(env.h2, link).split()
    assert start_link == ["/etc/alternatives/cuda", "/usr/local/cuda-12.9", "manual"], start_link
    up = _gpuhost(env, "upgrade", str(_inventory(env, START)), "--to", TARGET, "--canary", "1",
                  "--batch", "1", "--state-dir", str(state_dir), "--accept-audit", KNOWN,
                  timeout=1500)
    assert up.returncode == 0, up.stdout[-4000:] + up.stderr[-2000:]
    for host in (env.h1, env.h2):
        installed = rpms(host)
        assert installed["kmod-nvidia-open-dkms"] == f"3:{NEW}-1.el9"
        assert "kmod-nvidia-latest-dkms" not in installed and "cuda-toolkit-13-0" in installed
        assert "stream=580-open" in sh(host, "cat /etc/dnf/modules.d/nvidia-driver.module")
        assert sh(host, link).split()[1] == "/usr/local/cuda-13.0"
    # known on every OS, not the dnf path: START's libcudnn9-cuda-12 (9.10.2) stays beside
    # TARGET's libcudnn9-cuda-13 (9.17.0), the audit's cuDNN fact takes the first cuDNN package
    # it lists (facts/build.py _cudnn) and the matrix judges 9.10.2 against CUDA 13.0
    errors = _audit_errors(env, _inventory(env, TARGET))
    assert all(e["rule"] == "matrix.cudnn.cuda-range" and "cuDNN 9.10.2" in e["message"]
               for e in errors), errors
    back = _gpuhost(env, "rollback", str(_inventory(env, TARGET)), "--state-dir",
                    str(state_dir), "--yes", timeout=1500)
    assert back.returncode == 0, back.stdout[-4000:] + back.stderr[-2000:]
    assert _packages(rpms(env.h2)) == _packages(before)
    assert "stream=580-dkms" in sh(env.h2, "cat /etc/dnf/modules.d/nvidia-driver.module")
    for host in (env.h1, env.h2):
        assert sh(host, link).split() == start_link, host.name
    assert not _audit_errors(env, _inventory(env, START))
