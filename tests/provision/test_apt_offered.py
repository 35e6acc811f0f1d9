"""Provision's guard on an apt host (issue 33, item 9; dnf's: tests/provision/test_dnf_offered.py):
every package the run installs at a pinned version is installed at it or offered at it by the
sources the run will have, judged while the deploy is prepared, before anything changes.

The query is the seam's (``Apt.offered_command``, fact ``AptOffered``) run by this machine's real
apt 2.6 with its private configuration (a ``mktemp -d`` folder under /var/tmp: the sources,
NVIDIA's keyring, the lists; removed afterwards) against two stand-ins built here: the lab's
NVIDIA flat repository (tests/lab/aptrepo.py, ``deb [signed-by=K] URL /``) and the lab's Ubuntu
archive (tests/lab/ubuntu_archive.py, deb822, pockets noble/-security/-updates). The output
``parse_apt_offered`` reads and ``offered_problem`` judges is real apt output. Every network
address used is 127.0.0.1 (a local HTTP server, or a port nothing listens on)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gpuhost.deploys.apt_offered import (
    lacking,
    offered_problem,
    pinned_versions,
    private_sources,
)
from gpuhost.deploys.spec import package_plan
from gpuhost.desired import DesiredState
from gpuhost.errors import DeployError
from gpuhost.facts.apt_pins import AptOffered
from gpuhost.matrix.profiles import load_profiles
from gpuhost.operations.apt_proxy import PROXY_PATH, query_settings
from gpuhost.parsers.packages import Offered, parse_apt_offered

REAL = ("real apt needs apt-get, apt-ftparchive, dpkg-deb and gpg here (Debian/Ubuntu packages "
        "apt, apt-utils, dpkg, gpg; scripts/test installs them)")
pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("apt-get", "apt-ftparchive", "dpkg-deb", "gpg")),
    reason=REAL)

NEW = "580.178.04"
UBUNTU_DRIVER = "nvidia-headless-no-dkms-580-server-open"
LISTS = Path("/var/lib/apt/lists")
#: apt retries a refused connection with a growing delay (about 7 s in all); the guard keeps
#: apt's default, these tests need only the first answer
NO_RETRIES = ("Acquire::Retries=0",)


@dataclasses.dataclass(frozen=True)
class StandIns:
    nvidia_url: str  # file: URL of the flat repository
    nvidia: Path  # the flat repository's folder (served over HTTP by ``served``)
    key: Path  # its binary keyring
    ubuntu_sources: str  # deb822 entry of the Ubuntu stand-in, with its own keyring


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory: pytest.TempPathFactory) -> StandIns:
    from lab import aptrepo
    from lab import ubuntu_archive as ua

    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=True).stdout.strip()
    archive = ua.build(tmp_path_factory.mktemp("ubuntu-archive"), arch, "24.04")
    root = tmp_path_factory.mktemp("nvidia")
    repo = aptrepo.build(root, arch)
    return StandIns(f"file:{repo}", repo, root / f"{aptrepo.KEY_NAME}.gpg",
                    ua.sources_text(f"file:{archive.root}", archive.codename,
                                    str(archive.key_path)))


def _closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served(stand_ins: StandIns) -> Iterator[str]:
    """The NVIDIA stand-in over HTTP on 127.0.0.1."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 functools.partial(Quiet, directory=str(stand_ins.nvidia)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _run(command: str) -> list[str]:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=180,
                          check=True).stdout.splitlines()


def _query(stand_ins: StandIns, names: list[str], url: str | None = None,
           settings: tuple[str, ...] = ()) -> Offered:
    """The guard's fact, its command run by this machine's apt: the Ubuntu stand-in as the
    host's own source, NVIDIA's (``url``, default the stand-in) as gpuhost will write it."""
    host_files = {"/etc/apt/sources.list.d/ubuntu.sources": stand_ins.ubuntu_sources}
    sources, keys = private_sources(host_files, [], "",
                                    (url or stand_ins.nvidia_url, stand_ins.key.read_bytes()))
    fact = AptOffered()
    return fact.process(_run(fact.command(names, tuple(sources), tuple(keys), settings)))


def _lists_state() -> list[tuple[str, int]]:
    return sorted((p.name, p.stat().st_mtime_ns) for p in LISTS.iterdir()) if LISTS.is_dir() else []


# Real apt 2.6.2 output of Apt.offered_command (this machine, the stand-ins above; trimmed to
# the lines that matter: a second source at 127.0.0.1:9, where nothing listens)
CAPTURED = """\
Get:1 file:/tmp/s/nv/compute/cuda/repos/debian12/x86_64  InRelease [1194 B]
Get:2 file:/tmp/s/ua/ubuntu noble InRelease [4255 B]
Err:3 http://127.0.0.1:9/x  InRelease
  Could not connect to 127.0.0.1:9 (127.0.0.1). - connect (111: Connection refused)
Reading package lists...
W: Failed to fetch http://127.0.0.1:9/x/InRelease  Could not connect to 127.0.0.1:9 (127.0.0.1). \
- connect (111: Connection refused)
W: Some index files failed to download. They have been ignored, or old ones used instead.
##GPUHOST-APT-UPDATE-RC 0
nvidia-headless-no-dkms-580-server-open | 580.199.02-0ubuntu0.24.04.1 | \
file:/tmp/s/ua/ubuntu noble-updates/restricted amd64 Packages
nvidia-headless-no-dkms-580-server-open | 580.178.04-0ubuntu0.24.04.1 | \
file:/tmp/s/ua/ubuntu noble-security/restricted amd64 Packages
nvidia-driver | 580.178.04-1 | file:/tmp/s/nv/compute/cuda/repos/debian12/x86_64  Packages
##GPUHOST-APT-OFFERED-RC 0
"""


def test_parse_apt_offered_keeps_versions_and_says_which_source_apt_could_not_read() -> None:
    offered = parse_apt_offered(CAPTURED)
    assert offered.versions == {
        UBUNTU_DRIVER: ["580.199.02-0ubuntu0.24.04.1", "580.178.04-0ubuntu0.24.04.1"],
        "nvidia-driver": ["580.178.04-1"],
    }
    assert offered.error == ("apt-get update exited 0: Failed to fetch http://127.0.0.1:9/x/"
                             "InRelease  Could not connect to 127.0.0.1:9 (127.0.0.1). - "
                             "connect (111: Connection refused)")
    clean = "\n".join(x for x in CAPTURED.splitlines() if not x.startswith(("Err", "W:", "  ")))
    assert parse_apt_offered(clean).error is None
    cut = CAPTURED.split("##GPUHOST-APT-UPDATE-RC")[0]
    assert str(parse_apt_offered(cut).error).startswith("cut short: Failed to fetch")
    assert parse_apt_offered("##GPUHOST-APT-UPDATE-RC mktemp").error == "cut short: no message"


def test_real_apt_sees_both_sources_and_leaves_the_hosts_apt_state_untouched(
    stand_ins: StandIns,
) -> None:
    before = _lists_state()
    offered = _query(stand_ins, ["nvidia-driver", UBUNTU_DRIVER])
    assert offered.error is None
    assert f"{NEW}-1" in offered.versions["nvidia-driver"]
    assert f"{NEW}-0ubuntu0.24.04.1" in offered.versions[UBUNTU_DRIVER]
    wanted = {"nvidia-driver": f"{NEW}-*", UBUNTU_DRIVER: f"{NEW}-*"}
    assert offered_problem(wanted, {}, offered) is None
    # the private folder is gone, this machine's own lists are as they were
    assert not list(Path("/var/tmp").glob("gpuhost-apt-offered.*"))
    assert _lists_state() == before


def test_real_apt_a_version_or_a_name_the_sources_lack_is_one_line(stand_ins: StandIns) -> None:
    wanted = {"nvidia-driver": "580.999.99-*", "nvidia-no-such-package": f"{NEW}-*",
              UBUNTU_DRIVER: f"{NEW}-*"}
    offered = _query(stand_ins, lacking(wanted, {}))
    problem = offered_problem(wanted, {}, offered)
    assert problem is not None and "\n" not in problem
    assert problem.startswith("not offered by the apt sources at the profile's version, so it "
                              "could be neither installed nor held: nvidia-driver 580.999.99 "
                              f"(offered: {NEW}-1, 580.159.03-1, ")
    assert f"; nvidia-no-such-package {NEW} (offered: none); nothing was changed" in problem
    assert UBUNTU_DRIVER not in problem


def test_real_apt_an_unreachable_source_is_not_an_empty_one(stand_ins: StandIns) -> None:
    port = _closed_port()
    offered = _query(stand_ins, ["nvidia-driver", UBUNTU_DRIVER],
                     url=f"http://127.0.0.1:{port}/repo", settings=NO_RETRIES)
    assert offered.error is not None
    assert offered.error.startswith(
        f"apt-get update exited 0: Failed to fetch http://127.0.0.1:{port}/repo/")
    problem = offered_problem({"nvidia-driver": f"{NEW}-*"}, {}, offered)
    assert problem is not None and problem.startswith(
        "cannot read what the apt sources offer (apt-get update exited 0: Failed to fetch ")
    assert problem.endswith("while nvidia-driver 580.178.04 must come from them; nothing was "
                            "changed: check gpuhost_cuda_repo_url, gpuhost_proxy and the host's "
                            "apt sources")
    # a version another source offers needs no unreachable one
    assert offered_problem({UBUNTU_DRIVER: f"{NEW}-*"}, {}, offered) is None


def test_real_apt_asks_through_the_proxy_the_run_configures(stand_ins: StandIns,
                                                            served: str) -> None:
    assert _query(stand_ins, ["nvidia-driver"], url=served).error is None
    port = _closed_port()
    proxy = query_settings({"http": f"http://127.0.0.1:{port}"}, False)
    assert proxy == [f"Acquire::http::Proxy=http://127.0.0.1:{port}"]
    through = _query(stand_ins, ["nvidia-driver"], url=served, settings=(*proxy, *NO_RETRIES))
    assert through.error is not None and f"127.0.0.1:{port}" in through.error
    assert "nvidia-driver" not in through.versions
    # an earlier run's drop-in that this run takes out: its value emptied for the query (here
    # set on the command line first, as apt reads its configuration files before -o)
    emptied = (*proxy, *query_settings({}, True))
    assert _query(stand_ins, ["nvidia-driver"], url=served, settings=emptied).error is None
    assert query_settings({}, False) == []


def test_the_private_sources_are_the_hosts_as_the_run_leaves_them() -> None:
    host = {"/etc/apt/sources.list": "deb http://deb.debian.org/debian bookworm main\n",
            "/etc/apt/sources.list.d/gpuhost-cuda.list": "deb [signed-by=/old] http://old/ /\n"}
    sources, keys = private_sources(host, ["contrib", "non-free"], "bookworm",
                                    ("https://repo.example/debian12/x86_64", b"\x99binary key"))
    assert dict(sources) == {
        "sources.list": "deb http://deb.debian.org/debian bookworm main contrib non-free\n",
        "parts/gpuhost-cuda.list": (
            "# Written by gpuhost: NVIDIA CUDA repository (pinned by preferences.d/gpuhost-nvidia)"
            "\ndeb [signed-by=@GPUHOST_PRIVATE@/gpuhost-cuda-archive-keyring.gpg] "
            "https://repo.example/debian12/x86_64/ /\n"),
    }
    assert keys == [("gpuhost-cuda-archive-keyring.gpg", "mWJpbmFyeSBrZXk=")]
    assert private_sources(host, [], "", None) == (
        [("sources.list", host["/etc/apt/sources.list"]),
         ("parts/gpuhost-cuda.list", host["/etc/apt/sources.list.d/gpuhost-cuda.list"])], [])


def _spec(driver: str = NEW, **data: object) -> DesiredState:
    profile = load_profiles(None)["nvidia-repo-580-cuda13.0"]
    spec = DesiredState.from_profile(profile, [], {"gpuhost_fabric_manager": False, **data})
    return dataclasses.replace(spec, driver_version=driver)


def test_the_pinned_set_is_what_the_run_installs_plus_installed_coupled_names() -> None:
    spec = _spec()
    plan = package_plan(spec, "debian-12")
    wanted = pinned_versions(spec, plan, {}, {"libnvidia-ml1": {"575.57.08-1"}})
    assert wanted["cuda-drivers-580"] == f"{NEW}-*" and wanted["libnvidia-ml1"] == f"{NEW}-*"
    assert wanted["cuda-toolkit-13-0"] == "13.0.*" and wanted["libcudnn9-cuda-13"] == "9.17.0.*"
    assert "nvidia-persistenced" not in wanted  # no pinned version: whatever is offered
    assert "cuda-toolkit-13-0" not in pinned_versions(spec, plan,
                                                      {"gpuhost_install_cuda": False}, {})
    assert lacking({"a": f"{NEW}-*"}, {"a": {f"{NEW}-1"}}) == []
    assert lacking({"a": f"{NEW}-*"}, {"a": {"575.57.08-1"}}) == ["a"]


class _Host:
    """pyinfra's host as ``apt_offered.check_offered`` reads it: data and facts by class name;
    ``AptOffered`` is run for real on this machine (its private configuration, real apt)."""

    name = "debian1"

    def __init__(self, stand_ins: StandIns, installed: dict[str, set[str]],
                 url: str | None = None) -> None:
        key = stand_ins.key
        self.data: dict[str, Any] = {
            "gpuhost_cuda_repo_url": url or stand_ins.nvidia_url,
            "gpuhost_cuda_repo_key": str(key),
            "gpuhost_cuda_repo_key_sha256": hashlib.sha256(key.read_bytes()).hexdigest(),
            "gpuhost_install_cuda": False,
        }
        self.installed = installed
        self.files = {"/etc/apt/sources.list.d/ubuntu.sources": stand_ins.ubuntu_sources}
        self.asked: list[dict[str, Any]] = []
        self.extra: tuple[str, ...] = ()  # apt options added to the real query (test speed)

    def get_fact(self, cls: type, **kwargs: Any) -> Any:
        self.asked.append({"fact": cls.__name__, **kwargs})
        if cls.__name__ == "DebPackages":
            return self.installed
        if cls.__name__ == "LinuxDistribution":
            return {"release_meta": {"VERSION_CODENAME": "bookworm"}}
        if cls.__name__ == "FindFiles":
            return sorted(self.files)
        if cls.__name__ == "SmallFile":
            text = self.files.get(kwargs["path"])
            return None if text is None else text.splitlines()
        assert cls is AptOffered, cls
        kwargs["settings"] = (*kwargs["settings"], *self.extra)
        return cls().process(_run(cls().command(**kwargs)))


def _check(fake: _Host, driver: str = NEW) -> None:
    from pyinfra.context import ctx_host

    from gpuhost.deploys.apt_offered import check_offered

    spec = _spec(driver)
    plan = package_plan(spec, "debian-12")
    with ctx_host.use(fake):
        check_offered(spec, plan, fake.data)


def test_the_guard_refuses_a_pin_the_sources_lack_in_one_line(stand_ins: StandIns) -> None:
    """The profile's driver at a version neither the host's sources nor NVIDIA's stand-in has:
    the host is refused while the run is prepared, naming host, package, the pinned version and
    what the sources offer; the facts are all it read (no operation exists yet)."""
    fake = _Host(stand_ins, {})
    with pytest.raises(DeployError) as info:
        _check(fake, "580.999.99")
    line = str(info.value)
    assert line.startswith("debian1: not offered by the apt sources at the profile's version")
    assert f"cuda-drivers-580 580.999.99 (offered: {NEW}-1, 580.159.03-1" in line, line
    assert "\n" not in line and "nothing was changed" in line
    query = fake.asked[-1]
    assert query["fact"] == "AptOffered" and query["settings"] == ()
    assert ("parts/gpuhost-cuda.list" in dict(query["files"])
            and "parts/ubuntu.sources" in dict(query["files"]))


def test_the_guard_passes_what_the_stand_in_offers(stand_ins: StandIns) -> None:
    _check(_Host(stand_ins, {}))


def test_the_guard_asks_no_source_when_everything_is_installed_at_its_version(
    stand_ins: StandIns,
) -> None:
    spec = _spec()
    wanted = pinned_versions(spec, package_plan(spec, "debian-12"),
                             {"gpuhost_install_cuda": False}, {})
    installed = {n: {p.replace("*", "1")} for n, p in wanted.items()}
    fake = _Host(stand_ins, installed, url=f"http://127.0.0.1:{_closed_port()}/never-read")
    _check(fake)
    assert [a["fact"] for a in fake.asked] == ["DebPackages"]


def test_the_guard_says_when_the_sources_cannot_be_read(stand_ins: StandIns) -> None:
    port = _closed_port()
    fake = _Host(stand_ins, {}, url=f"http://127.0.0.1:{port}/repo")
    fake.extra = NO_RETRIES
    with pytest.raises(DeployError, match=rf"^debian1: cannot read what the apt sources offer "
                       rf"\(apt-get update exited 0: Failed to fetch http://127\.0\.0\.1:{port}/"):
        _check(fake)


def test_the_guard_asks_through_gpuhost_proxy_or_without_an_earlier_runs(
    stand_ins: StandIns,
) -> None:
    port = _closed_port()
    fake = _Host(stand_ins, {})
    fake.data["gpuhost_proxy"] = f"http://127.0.0.1:{port}"
    _check(fake)  # file: sources need no proxy
    assert fake.asked[-1]["settings"] == (f"Acquire::http::Proxy=http://127.0.0.1:{port}",
                                          f"Acquire::https::Proxy=http://127.0.0.1:{port}")
    fake = _Host(stand_ins, {})
    fake.files[PROXY_PATH] = 'Acquire::http::Proxy "http://127.0.0.1:1";\n'
    _check(fake)
    assert fake.asked[-1]["settings"] == ("Acquire::http::Proxy=", "Acquire::https::Proxy=")
