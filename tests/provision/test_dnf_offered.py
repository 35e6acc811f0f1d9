"""Provision's guard on a dnf host (issue 33, "a lock for a name the repository lacks"): every
package the run installs and version-locks is installed at the profile's version or offered at
it, judged while the deploy is prepared, before anything changes.

The query is the seam's (``Dnf.offered_command``) run by this machine's real dnf 4.14 against a
repository made here with createrepo_c from the lab's stand-in RPMs in NVIDIA's rhel9 modular
layout (tests/lab/rpmrepo.py: names, epoch 3, module ``nvidia-driver`` with its streams): the
output parsed by ``parse_offered`` and judged by ``offered_problem`` is real dnf output."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuhost.deploys.nvidia_dnf import lacking, locked_versions, offered_problem
from gpuhost.deploys.spec import package_plan
from gpuhost.desired import DesiredState
from gpuhost.errors import DeployError
from gpuhost.matrix.profiles import load_profiles
from gpuhost.parsers.packages import Offered, parse_offered
from gpuhost.pkgmgr.dnf import Dnf

NEW = "580.178.04"
REAL = "real dnf needs dnf, rpmbuild and createrepo_c here (scripts/test installs them)"


def _spec(**data: object) -> DesiredState:
    profile = load_profiles(None)["nvidia-repo-580-cuda13.0"]
    return DesiredState.from_profile(profile, [], {"gpuhost_fabric_manager": False, **data})


def test_parse_offered_keeps_versions_and_says_why_dnf_failed() -> None:
    ok = parse_offered("a\t3:1.0-1.el9\na\t3:1.1-1.el9\n##GPUHOST-OFFERED-RC 0")
    assert ok == Offered({"a": ["3:1.0-1.el9", "3:1.1-1.el9"]})
    failed = parse_offered("Error: Failed to download metadata for repo 'x'\n"
                           "##GPUHOST-OFFERED-RC 1")
    assert failed.error == "dnf exited 1: Error: Failed to download metadata for repo 'x'"
    assert parse_offered("a\t1.0-1").error == "cut short: no message"


def test_the_locked_set_is_what_the_run_installs_plus_installed_coupled_names() -> None:
    spec = _spec()
    plan = package_plan(spec, "rocky-9")
    installed = {"nvidia-driver-devel": "3:580.95.05-1.el9", "kmod-nvidia-latest-dkms": "3:1-1"}
    wanted = locked_versions(spec, plan, {}, installed)
    assert wanted["kmod-nvidia-open-dkms"] == NEW and wanted["nvidia-driver-devel"] == NEW
    # the other flavour is replaced by the install, never locked at the new version
    assert "kmod-nvidia-latest-dkms" not in wanted
    # coupled names the host does not have are not in the set (no lock for them)
    assert "libnvidia-nscq-580" not in wanted and "nvidia-driver-NVML" not in wanted
    assert wanted["cuda-toolkit-13-0"] == "13.0" and wanted["libcudnn9-cuda-13"] == "9.17.0"
    assert "cuda-toolkit-13-0" not in locked_versions(
        spec, plan, {"gpuhost_install_cuda": False}, {})


def test_installed_at_the_version_needs_no_repository() -> None:
    wanted = {"nvidia-driver-cuda": NEW, "cuda-toolkit-13-0": "13.0"}
    installed = {"nvidia-driver-cuda": f"3:{NEW}-1.el9", "cuda-toolkit-13-0": "13.0.2-1.el9"}
    assert lacking(wanted, installed) == []
    assert offered_problem(wanted, installed, Offered({}, "dnf exited 1: Error")) is None


def _query(tmp: Path, repo: str, names: list[str]) -> Offered:
    """The seam's query through the real dnf, isolated from this machine's configuration."""
    conf = tmp / "dnf.conf"
    conf.write_text(f"[main]\nbest=True\nskip_if_unavailable=False\n"
                    f"module_platform_id=platform:el9\nreposdir={tmp / 'repos.d'}\n"
                    f"cachedir={tmp / 'cache'}\n")
    (tmp / "repos.d").mkdir(exist_ok=True)
    dnf = Dnf().configured(f"--config={conf}", f"--installroot={tmp / 'root'}",
                           "--releasever=9")
    out = subprocess.run(["sh", "-c", dnf.offered_command(names, repo)], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return parse_offered(out)


@pytest.fixture(scope="module")
def nvidia_rhel9(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """NVIDIA's rhel9 layout (module nvidia-driver, streams <branch>-dkms|-open, default
    latest-dkms) from the lab's stand-in RPMs, as a file:// repository."""
    if not all(shutil.which(t) for t in ("dnf", "rpmbuild", "createrepo_c", "modifyrepo_c")):
        pytest.skip(REAL)
    from lab import rpmrepo
    from lab.config import cache_dir

    with pytest.MonkeyPatch.context() as mp:
        if not os.access(cache_dir() if cache_dir().exists() else cache_dir().parent, os.W_OK):
            mp.setenv("GPUHOST_LAB_CACHE", str(tmp_path_factory.mktemp("rpm-cache")))
        built = rpmrepo.cached_rpms()
    repo = tmp_path_factory.mktemp("rhel9")
    rpms = sorted((built / "el9").glob("*.rpm"))
    for rpm in rpms:
        (repo / rpm.name).symlink_to(rpm)
    subprocess.run(["createrepo_c", "-q", str(repo)], check=True)
    modules = repo / "modules.yaml"
    modules.write_text(rpmrepo.modules_yaml(rpms))
    subprocess.run(["modifyrepo_c", "--mdtype=modules", str(modules),
                    str(repo / "repodata")], check=True, capture_output=True)
    return repo


def test_real_dnf_offers_every_stream_before_one_is_enabled(
    nvidia_rhel9: Path, tmp_path: Path
) -> None:
    """No stream enabled (a fresh host): the open flavour's package belongs to the 580-open
    stream only, which modular filtering hides; the query sees it, so the stream is judged by
    its own step (dnf_pin.module_stream) and never read as a missing package."""
    offered = _query(tmp_path, f"file://{nvidia_rhel9}", ["kmod-nvidia-open-dkms"])
    assert offered.error is None
    assert f"3:{NEW}-1.el9" in offered.versions["kmod-nvidia-open-dkms"]
    spec = _spec()
    plan = package_plan(spec, "rocky-9")
    wanted = locked_versions(spec, plan, {"gpuhost_install_cuda": False}, {})
    # cuDNN and the container toolkit come from the same stand-in repository
    offered = _query(tmp_path, f"file://{nvidia_rhel9}", lacking(wanted, {}))
    assert offered_problem(wanted, {}, offered) is None


def test_real_dnf_lists_the_streams_of_a_repository_the_host_has_no_file_for(
    nvidia_rhel9: Path, tmp_path: Path
) -> None:
    from gpuhost.facts.dnf import DnfModuleStreams

    _query(tmp_path, f"file://{nvidia_rhel9}", ["nvidia-driver"])  # writes the isolated config
    dnf = Dnf().configured(f"--config={tmp_path / 'dnf.conf'}",
                           f"--installroot={tmp_path / 'root'}", "--releasever=9")
    fact = DnfModuleStreams()
    command = fact.command("nvidia-driver", f"file://{nvidia_rhel9}").replace(
        "dnf -q", " ".join(("dnf", *dnf.options, "-q")), 1)
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    streams = fact.process(out.splitlines())
    assert {"580-dkms", "580-open", "570-open", "latest-dkms"} <= set(streams), out
    assert "595-open" not in streams


def test_real_dnf_a_version_or_name_the_repository_lacks_is_one_line(
    nvidia_rhel9: Path, tmp_path: Path
) -> None:
    wanted = {"nvidia-driver-cuda": "580.95.05", "nvidia-driver-devel": NEW,
              "libnvidia-ml": NEW}
    offered = _query(tmp_path, f"file://{nvidia_rhel9}", sorted(wanted))
    problem = offered_problem(wanted, {}, offered)
    assert problem is not None and "\n" not in problem
    assert problem.startswith("not offered by the configured repositories at the profile's "
                              "version, so it could be neither installed nor version-locked: ")
    assert "nvidia-driver-cuda 580.95.05 (offered: 3:570.195.03-1.el9, 3:580.105.08-1.el9" in (
        problem)
    assert "nvidia-driver-devel 580.178.04 (offered: none)" in problem
    assert "libnvidia-ml" not in problem and "nothing was changed" in problem


def test_real_dnf_a_repository_it_cannot_read_is_not_an_empty_one(tmp_path: Path) -> None:
    if not shutil.which("dnf"):
        pytest.skip(REAL)
    offered = _query(tmp_path, f"file://{tmp_path}/no-such-repository", ["nvidia-driver-cuda"])
    assert offered.error is not None
    assert offered.error.startswith(
        "dnf exited 1: Error: Failed to download metadata for repo 'gpuhost-offered'")
    problem = offered_problem({"nvidia-driver-cuda": NEW}, {}, offered)
    assert problem is not None and problem.startswith("cannot read what the repositories offer")


class _Host:
    """pyinfra's host as ``check_offered`` reads it: data and facts (by fact class name)."""

    name = "rocky1"

    def __init__(self, installed: dict[str, str], offered: Offered | None,
                 streams: tuple[str, ...] = ("580-dkms", "580-open", "latest-dkms")) -> None:
        self.data = {"gpuhost_cuda_repo_url": "https://repo.example/rhel9/x86_64"}
        self.installed, self.offered, self.streams = installed, offered, list(streams)
        self.asked: list[dict[str, object]] = []
        self.conf = ["[main]", "gpgcheck=1", "best=True"]  # /etc/dnf/dnf.conf

    def get_fact(self, cls: type, **kwargs: object) -> object:
        self.asked.append({"fact": cls.__name__, **kwargs})
        if cls.__name__ == "RpmVersions":
            return self.installed
        if cls.__name__ == "DnfModuleStreams":
            return self.streams
        if cls.__name__ == "SmallFile":
            return self.conf
        assert self.offered is not None, "the repositories were asked on a converged host"
        return self.offered


def _check(fake: _Host) -> None:
    from pyinfra.context import ctx_host

    from gpuhost.deploys.nvidia_dnf import check_offered

    spec = _spec()
    with ctx_host.use(fake):
        check_offered(spec, package_plan(spec, "rocky-9"))


def test_the_guard_refuses_with_one_line_naming_host_package_and_version() -> None:
    from gpuhost.errors import DeployError

    fake = _Host({}, Offered({"kmod-nvidia-open-dkms": ["3:580.159.03-1.el9"]}))
    with pytest.raises(DeployError) as info:
        _check(fake)
    line = str(info.value)
    assert line.startswith("rocky1: not offered by the configured repositories")
    assert f"kmod-nvidia-open-dkms {NEW} (offered: 3:580.159.03-1.el9)" in line
    assert "cuda-toolkit-13-0 13.0 (offered: none)" in line and "\n" not in line
    # NVIDIA's repository is read from the inventory's URL, before the host has its file
    assert fake.asked[-1]["repo_url"] == "https://repo.example/rhel9/x86_64"


def test_a_stream_the_repository_lacks_is_its_own_line_before_anything_changes() -> None:
    from gpuhost.errors import DeployError

    fake = _Host({}, Offered({}), streams=("570-dkms", "570-open", "latest-dkms"))
    with pytest.raises(DeployError, match=r"^rocky1: module stream nvidia-driver:580-open is "
                       r"not offered by the enabled repositories \(offered: 570-dkms, 570-open, "
                       r"latest-dkms\); nothing was installed$"):
        _check(fake)
    assert fake.asked[-1] == {"fact": "DnfModuleStreams", "module": "nvidia-driver",
                              "repo_url": "https://repo.example/rhel9/x86_64"}


def test_the_guard_asks_no_repository_when_everything_is_installed_at_its_version() -> None:
    spec = _spec()
    every = locked_versions(spec, package_plan(spec, "rocky-9"), {}, {})
    installed = {n: (f"3:{v}-1.el9" if v == NEW else f"{v}.1-1") for n, v in every.items()}
    fake = _Host(installed, None)
    _check(fake)
    assert [a["fact"] for a in fake.asked] == ["RpmVersions"]


def test_upgrade_preflight_refuses_what_the_install_would_before_the_snapshot(
    tmp_path: Path,
) -> None:
    """gpuhost upgrade asks the same facts (their commands over its session, their parsers)
    at preflight, before the snapshot and the drain: a target version the repositories lack
    is the host's one line, not a refusal after its holds were released."""
    from gpuhost.inventory.loader import InventoryHost
    from gpuhost.upgrade.hoststeps import HostSteps, StepSettings
    from tests.upgrade.fakes import ScriptedRemote, ok

    data = {"gpuhost_cuda_repo_url": "https://repo.example/rhel9/x86_64",
            "gpuhost_install_cuda": False}
    hosts = {"h1": InventoryHost("h1", data, ())}
    steps = HostSteps(hosts, StepSettings(target="nvidia-repo-580-cuda13.0",
                                          snapshots=tmp_path / "snapshots"))
    offered = ("nvidia-driver-cuda\t3:580.159.03-1.el9\n"
               f"kmod-nvidia-open-dkms\t3:{NEW}-1.el9\n##GPUHOST-OFFERED-RC 0\n")
    remote = ScriptedRemote("h1").on("os-release", ok('ID="rocky"\nVERSION_ID="9.6"\n'))
    remote.on("rpm -qa", ok("")).on("repoquery --disable-modular-filtering", ok(offered))
    remote.on("module list", ok("##GPUHOST-MODULE nvidia-driver\n"))  # none read: not judged
    remote.on("/etc/dnf/dnf.conf", ok("[main]\nbest=True\n"))
    steps._remotes["h1"] = remote  # type: ignore[assignment]
    problem = steps.offered_problem("h1")
    assert problem is not None and problem.startswith("not offered by the configured")
    assert f"nvidia-driver-cuda {NEW} (offered: 3:580.159.03-1.el9)" in problem
    query = next(c for c in remote.commands if "repoquery" in c)
    assert "--repofrompath=gpuhost-offered,https://repo.example/rhel9/x86_64" in query


def test_the_queries_go_through_the_proxy_the_run_configures_later() -> None:
    """``gpuhost_proxy``: provision writes dnf's proxy (operations/dnf_proxy) in the run, after
    this guard; the guard's queries get the same settings for themselves."""
    fake = _Host({}, Offered({}, "dnf exited 1: Error: Curl error (5)"))
    fake.data["gpuhost_proxy"] = "http://lab:pw@proxy.example:3128"
    with pytest.raises(DeployError, match="cannot read what the repositories offer"):
        _check(fake)
    setopts = ["proxy=http://proxy.example:3128", "proxy_username=lab", "proxy_password=pw"]
    queries = [a for a in fake.asked if a["fact"].startswith("Dnf")]
    assert [a.get("setopts") for a in queries] == [setopts, setopts]


def test_a_proxy_the_run_takes_out_is_not_used_by_the_queries_an_admins_is() -> None:
    from gpuhost.operations.dnf_proxy import MARK, run_settings

    # gpuhost's proxy of an earlier run (gpuhost_proxy no longer set): the run removes it
    fake = _Host({}, Offered({}, "dnf exited 1: Error"))
    fake.conf = ["[main]", MARK, "proxy=http://127.0.0.1:9", "best=True"]
    with pytest.raises(DeployError, match="cannot read"):
        _check(fake)
    queries = [a for a in fake.asked if a["fact"].startswith("Dnf")]
    assert queries[0]["setopts"] == ["proxy=", "proxy_username=", "proxy_password="]
    # an administrator's own proxy, gpuhost_proxy unset: dnf's configuration as it is
    fake = _Host({}, Offered({}, "dnf exited 1: Error"))
    fake.conf = ["[main]", "proxy=http://site-proxy:3128"]
    with pytest.raises(DeployError, match="cannot read"):
        _check(fake)
    assert "setopts" not in [a for a in fake.asked if a["fact"].startswith("Dnf")][0]
    assert run_settings(fake.conf, {}) == ["proxy=http://site-proxy:3128", "proxy_username=",
                                          "proxy_password="]
