"""RPM bundles (RHEL family, issue 33): what the reference host is asked, its answer, the
repository made with the machine's real createrepo_c and modifyrepo_c, and the machine's real
dnf 4.14 (with rpm 4.18, in an installroot) enabling the profile's module stream and installing
the pinned set from the bundle alone.

The packages are the lab's empty stand-ins (tests/lab/rpmrepo.py: NVIDIA's names, epoch 3, exact
Requires, built here with rpmbuild, unsigned: the signature check with gpgcheck=1 is the lab
test's, tests/integration/test_rocky_lab.py).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gpuhost.bundle import rpmrepo
from gpuhost.bundle.manifest import (
    MANIFEST,
    Entry,
    Manifest,
    manifest_text,
    parse_manifest,
    pinned_problems,
)
from gpuhost.bundle.setting import BundleSetting
from gpuhost.bundle_resolve import Resolved
from gpuhost.bundle_rpm import dnf_specs, parse_resolved, resolve_command
from gpuhost.deploys import guards, offline
from gpuhost.deploys.spec import package_plan
from gpuhost.errors import ConfigError, DeployError
from gpuhost.parsers.marked import SECTION

PROFILE = "nvidia-repo-580-cuda12.9"  # rocky-9: stream 580-dkms (kernel_module auto, no GPUs)
DRIVER = "580.178.04"
TOOLS = ("createrepo_c", "modifyrepo_c", "rpmbuild", "dnf", "rpm")
needs_tools = pytest.mark.skipif(
    any(shutil.which(t) is None for t in TOOLS),
    reason="needs createrepo_c, modifyrepo_c, rpmbuild, dnf and rpm (scripts/test installs "
    "createrepo-c, rpm, dnf and dnf-plugins-core)",
)


def _resolved(data: dict[str, Any] | None = None) -> Resolved:
    data = {"gpuhost_profile": PROFILE, "gpuhost_harden": False, **(data or {})}
    spec = guards.check_profile("ref1", data, guards.load_profile_table())
    plan = package_plan(spec, "rocky-9")
    return Resolved(data, spec, plan, offline.required_packages(spec, plan, data))


def test_the_reference_host_is_asked_for_the_pinned_set_with_epoch_flavour_and_dkms() -> None:
    specs = dnf_specs(_resolved())
    assert f"nvidia-driver-cuda-3:{DRIVER}" in specs
    assert f"kmod-nvidia-latest-dkms-3:{DRIVER}" in specs  # the flavour named, never left to dnf
    # installed with the driver at its version (an unversioned name would resolve to 590)
    assert f"nvidia-persistenced-3:{DRIVER}" in specs
    assert "cuda-toolkit-12-9-12.9.*" in specs and "dkms" in specs
    assert not [s for s in specs if "open" in s]


def test_the_resolve_command_keeps_the_hosts_own_state_and_uses_the_seam() -> None:
    text = resolve_command("/tmp/gpuhost-bundle.x", ["dkms"], ("https://r/rhel9/x86_64", b"K"))
    assert "--setopt=reposdir=/etc/yum.repos.d,/etc/yum/repos.d,/etc/distro.repos.d," \
           "/tmp/gpuhost-bundle.x/repos" in text
    assert "--setopt=cachedir=/tmp/gpuhost-bundle.x/cache" in text
    assert "install --downloadonly --destdir /tmp/gpuhost-bundle.x/rpms dkms $k" in text
    assert "--disableplugin=versionlock" in text


def test_the_reference_hosts_answer_is_parsed_and_bad_lines_are_refused() -> None:
    digest = "a" * 64
    text = "\n".join([
        f"{SECTION}files", f"{digest}  dkms-3.1.6-1.el9.noarch.rpm", f"{SECTION}modules",
        "---", "document: modulemd", f"{SECTION}key RPM-GPG-KEY-EPEL-9", "S0VZ", ""])
    found = parse_resolved(text, "host ref1")
    assert found.files == {"dkms-3.1.6-1.el9.noarch.rpm": digest}
    assert found.modules.startswith("---\ndocument: modulemd")
    assert found.keys == {"RPM-GPG-KEY-EPEL-9": b"KEY"}
    with pytest.raises(ConfigError, match="not a sha256sum line"):
        parse_resolved(f"{SECTION}files\nx  ../../etc/passwd\n", "host ref1")


def test_an_rpm_manifest_matches_versions_without_their_epoch() -> None:
    entries = (Entry("nvidia-driver-cuda", f"3:{DRIVER}-1.el9", "x86_64", "pool/a.rpm", "0", 1),)
    manifest = Manifest("p", "rocky-9", "", entries, format="rpm")
    assert pinned_problems(manifest, {"nvidia-driver-cuda": f"{DRIVER}-*"}) == []
    assert pinned_problems(manifest, {"nvidia-driver-cuda": "580.159.03-*"}) == [
        f"nvidia-driver-cuda {DRIVER}-1.el9 (expected 580.159.03-*)"]


# ------------------------------------------------------------------ real createrepo_c and dnf


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle folder of the stand-in RPMs a Rocky 9 host needs for PROFILE (what dnf would
    download on a fresh host), indexed here, with the stream cut from the rhel9 layout's
    modules.yaml."""
    if any(shutil.which(t) is None for t in TOOLS):
        pytest.skip("needs createrepo_c, modifyrepo_c, rpmbuild, dnf and rpm (scripts/test "
                    "installs createrepo-c, rpm, dnf and dnf-plugins-core)")
    from tests.lab import rpmrepo as standins

    cached = standins.cached_rpms()
    out = tmp_path_factory.mktemp("bundle")
    pool = out / rpmrepo.POOL
    pool.mkdir()
    wanted = [p for p in (cached / "el9").glob(f"*-{DRIVER}-1.el9.*.rpm")
              if "open" not in p.name and "fabric" not in p.name]
    for pattern in ("cuda-toolkit-12-9-12.9.1-*", "libcudnn9-cuda-12-9.10.2.21-*", "*-1.19.1-1.*"):
        wanted += list((cached / "el9").glob(pattern))
    wanted += list((cached / "epel").glob("dkms-*.rpm"))
    # the installroot below is empty: the /bin/sh the scriptlets need (a Rocky host has it)
    wanted += list((cached / "baseos").glob("bash-*.rpm"))
    for rpm in wanted:
        shutil.copyfile(rpm, pool / rpm.name)
    rpmrepo.index(out)
    packages = rpmrepo.primary_packages(out)
    source = standins.modules_yaml(sorted((cached / "el9").glob("*.rpm")))
    rpmrepo.add_modules(out, rpmrepo.stream_modules(
        source, "nvidia-driver", "580-dkms", [p.nevra for p in packages], "modules.yaml"))
    return out


def _dnf(root: Path, repo: Path | str, *args: str, proxy: str = "",
         direct: bool = False) -> subprocess.CompletedProcess[str]:
    """The machine's dnf in an installroot whose only repository is ``repo`` (a folder, or a
    served bundle's URL); ``proxy``: dnf.conf's, ``direct``: the repository file's bypass."""
    conf = root.parent / "dnf.conf"
    conf.write_text("[main]\ngpgcheck=1\nbest=True\nskip_if_unavailable=False\n"
                    "module_platform_id=platform:el9\ninstall_weak_deps=False\n"
                    + (f"proxy={proxy}\nretries=1\ntimeout=5\n" if proxy else ""))
    repos = root.parent / "repos"
    repos.mkdir(exist_ok=True)
    baseurl = repo if isinstance(repo, str) else f"file://{repo}"
    (repos / "bundle.repo").write_text(
        rpmrepo.repo_file("bundle", baseurl, [], direct).replace("gpgcheck=1", "gpgcheck=0"))
    home = root.parent / "home"
    home.mkdir(exist_ok=True)
    (home / ".rpmmacros").write_text("%_dbpath /var/lib/rpm\n")
    argv = ["dnf", "-y", f"--installroot={root}", "--releasever=9", f"--config={conf}",
            f"--setopt=reposdir={repos}", "--setopt=cachedir=" + str(root.parent / "cache"),
            "--disableplugin=*", *args]
    env = dict(os.environ, HOME=str(home), LC_ALL="C")
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=300)


@needs_tools
def test_createrepo_c_lists_every_package_with_its_epoch_and_sha256(bundle: Path) -> None:
    packages = {p.name: p for p in rpmrepo.primary_packages(bundle)}
    assert packages["nvidia-driver-cuda"].evr == f"3:{DRIVER}-1.el9"
    assert packages["dkms"].evr == "3.1.6-1.el9" and packages["dkms"].arch == "noarch"
    assert all(p.location.startswith("pool/") and len(p.sha256) == 64 for p in packages.values())


@needs_tools
def test_real_dnf_enables_the_stream_and_installs_the_pinned_set_from_the_bundle_alone(
    bundle: Path, tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    streams = _dnf(root, bundle, "module", "list", "nvidia-driver")
    assert streams.returncode == 0, streams.stderr
    assert "580-dkms" in streams.stdout and "latest-dkms" not in streams.stdout, streams.stdout
    hidden = _dnf(root, bundle, "install", "--assumeno", f"nvidia-driver-cuda-3:{DRIVER}")
    assert hidden.returncode == 1  # modular packages: nothing until the stream is enabled
    enabled = _dnf(root, bundle, "module", "enable", "nvidia-driver:580-dkms")
    assert enabled.returncode == 0, enabled.stderr
    done = _dnf(root, bundle, "install", f"nvidia-driver-cuda-3:{DRIVER}",
                f"kmod-nvidia-latest-dkms-3:{DRIVER}")
    assert done.returncode == 0, done.stdout + done.stderr
    listed = subprocess.run(
        ["rpm", f"--root={root}", "--dbpath=/var/lib/rpm", "-qa", "--qf",
         "%{NAME} %{EPOCHNUM}:%{VERSION}\n"], capture_output=True, text=True, check=True)
    installed = dict(line.split() for line in listed.stdout.splitlines())
    assert installed["kmod-nvidia-latest-dkms"] == f"3:{DRIVER}" and "dkms" in installed
    assert {v for n, v in installed.items() if n not in ("dkms", "bash")} == {f"3:{DRIVER}"}


@needs_tools
def test_the_stream_the_source_lacks_is_one_line(bundle: Path) -> None:
    from tests.lab import rpmrepo as standins

    source = standins.modules_yaml(sorted((standins.cached_rpms() / "el9").glob("*.rpm")))
    with pytest.raises(ConfigError, match=r"no module stream nvidia-driver:595-open \(offered: "
                                          r".*nvidia-driver:580-dkms"):
        rpmrepo.stream_modules(source, "nvidia-driver", "595-open", [], "modules.yaml")


def _manifest_of(bundle: Path, drop: str = "", modules: tuple[str, ...] = (
        "nvidia-driver:580-dkms",)) -> Manifest:
    entries = tuple(Entry(p.name, p.evr, p.arch, p.location, p.sha256, p.size)
                    for p in rpmrepo.primary_packages(bundle) if p.name != drop)
    return Manifest(PROFILE, "rocky-9", "now", entries, "ref1", None, "rpm", modules)


@needs_tools
def test_a_bundle_lacking_a_package_or_the_stream_is_refused_in_one_line(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    resolved = _resolved()
    from gpuhost.bundle.setting import BundleSetting

    def check(manifest: Manifest) -> str:
        monkeypatch.setattr(offline, "load_bundle", lambda setting: manifest)
        try:
            offline.check_bundle("h2", BundleSetting(path=str(tmp_path)), resolved.spec,
                                 resolved.plan, resolved.data, "rocky-9")
        except DeployError as exc:
            return str(exc)
        return ""

    assert check(_manifest_of(bundle)) == ""
    lacking = check(_manifest_of(bundle, drop="dkms"))
    assert "lacks packages profile" in lacking and "dkms (missing)" in lacking, lacking
    assert "\n" not in lacking
    stream = check(_manifest_of(bundle, modules=("nvidia-driver:580-open",)))
    assert "carries module stream(s) nvidia-driver:580-open" in stream, stream
    assert "needs nvidia-driver:580-dkms" in stream


@needs_tools
def test_the_rpm_manifest_round_trips_through_its_schema(bundle: Path) -> None:
    manifest = _manifest_of(bundle)
    doc = json.loads(json.dumps(manifest.to_dict()))
    assert doc["format"] == "rpm" and doc["modules"] == ["nvidia-driver:580-dkms"]
    assert parse_manifest(doc, "manifest.json").to_dict() == doc  # checked against the schema


# ------------------------------------------------ a bundle served over HTTP (127.0.0.1 only)


def _closed_port() -> int:
    """A loopback port nothing listens on (a proxy that never answers)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def served(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(URL, folder): the bundle with its keys and manifest.json, as ``gpuhost bundle`` writes
    them, served by a static web server on 127.0.0.1 (any static server over the folder)."""
    folder = tmp_path_factory.mktemp("served") / "b"
    shutil.copytree(bundle, folder)
    (folder / rpmrepo.KEYS).mkdir()
    (folder / rpmrepo.KEYS / "RPM-GPG-KEY-gpuhost-cuda").write_bytes(b"-----BEGIN PGP cuda\n")
    (folder / rpmrepo.KEYS / "RPM-GPG-KEY-EPEL-9").write_bytes(b"-----BEGIN PGP epel\n")
    keys = tuple((k.name, hashlib.sha256(k.read_bytes()).hexdigest())
                 for k in sorted((folder / rpmrepo.KEYS).iterdir()))
    manifest = _manifest_of(folder)
    manifest = Manifest(*[getattr(manifest, f) for f in ("profile", "os", "created", "packages",
                          "reference_host", "signing_key", "format", "modules")], keys)
    (folder / MANIFEST).write_text(manifest_text(manifest), encoding="utf-8")
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", folder
    server.shutdown()
    server.server_close()


def _anchor(folder: Path) -> str:
    return hashlib.sha256((folder / MANIFEST).read_bytes()).hexdigest()


@needs_tools
def test_a_served_rpm_bundle_is_trusted_through_its_manifests_sha256_and_its_keys_through_it(
    served: tuple[str, Path], monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, folder = served
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    offline._manifest_at_url.cache_clear()
    offline.served_keys.cache_clear()
    manifest = offline.load_bundle(BundleSetting(url=url, key_sha256=_anchor(folder)))
    assert manifest.format == "rpm" and dict(manifest.keys).keys() == {
        "RPM-GPG-KEY-EPEL-9", "RPM-GPG-KEY-gpuhost-cuda"}
    assert offline.served_keys(url, manifest.keys)["RPM-GPG-KEY-EPEL-9"] == b"-----BEGIN PGP epel\n"
    resolved = _resolved()
    checked = offline.check_bundle("h2", BundleSetting(url=url, key_sha256=_anchor(folder)),
                                   resolved.spec, resolved.plan, resolved.data, "rocky-9")
    assert checked == manifest

    # the inventory's key_sha256 is not this manifest's: one line, before any change
    with pytest.raises(DeployError) as wrong:
        offline.check_bundle("h2", BundleSetting(url=url, key_sha256="0" * 64), resolved.spec,
                             resolved.plan, resolved.data, "rocky-9")
    text = str(wrong.value)
    assert "manifest.json: SHA-256 is" in text and "key_sha256 says 000" in text, text
    assert "nothing was installed" in text and "\n" not in text

    # a key on the server differs from the manifest's: refused, never trusted on first use
    key = folder / rpmrepo.KEYS / "RPM-GPG-KEY-EPEL-9"
    original = key.read_bytes()
    key.write_bytes(b"-----BEGIN PGP someone else\n")
    try:
        offline.served_keys.cache_clear()
        with pytest.raises(DeployError) as tampered:
            offline.check_bundle("h2", BundleSetting(url=url, key_sha256=_anchor(folder)),
                                 resolved.spec, resolved.plan, resolved.data, "rocky-9")
    finally:
        key.write_bytes(original)
        offline.served_keys.cache_clear()
    text = str(tampered.value)
    assert f"{url}/keys/RPM-GPG-KEY-EPEL-9: SHA-256 is" in text, text
    assert "refusing to install this key" in text and "\n" not in text


@needs_tools
def test_an_rpm_manifest_listing_no_keys_is_refused_when_served(
    served: tuple[str, Path], tmp_path: Path,
) -> None:
    url, folder = served
    doc = json.loads((folder / MANIFEST).read_text())
    del doc["keys"]
    old = folder / "old"
    old.mkdir(exist_ok=True)
    (old / MANIFEST).write_text(json.dumps(doc))
    offline._manifest_at_url.cache_clear()
    with pytest.raises(ConfigError, match=r"old/manifest.json: lists no keys .* make the bundle "
                                          r"again"):
        offline.load_bundle(BundleSetting(url=f"{url}/old", key_sha256=_anchor(old)))


@needs_tools
def test_real_dnf_installs_from_the_served_bundle_past_dnf_confs_proxy(
    served: tuple[str, Path], tmp_path: Path,
) -> None:
    """The repository file gpuhost writes for a served bundle (``direct``: an empty ``proxy=``)
    lets the real dnf reach it while dnf.conf's proxy is a closed port; the same file without it
    fails there (dnf.conf's proxy is honoured, so the bypass is what makes it work)."""
    url, _ = served
    proxy = f"http://127.0.0.1:{_closed_port()}"
    root = tmp_path / "root"

    def dnf(direct: bool, *args: str) -> subprocess.CompletedProcess[str]:
        return _dnf(root, url, *args, proxy=proxy, direct=direct)

    blocked = dnf(False, "module", "list", "nvidia-driver")
    assert blocked.returncode == 1, blocked.stdout
    assert proxy.rsplit(":", 1)[1] in blocked.stderr + blocked.stdout, blocked.stderr
    assert dnf(True, "module", "enable", "nvidia-driver:580-dkms").returncode == 0
    done = dnf(True, "install", f"nvidia-driver-cuda-3:{DRIVER}",
               f"kmod-nvidia-latest-dkms-3:{DRIVER}")
    assert done.returncode == 0, done.stdout + done.stderr
    listed = subprocess.run(
        ["rpm", f"--root={root}", "--dbpath=/var/lib/rpm", "-q", "--qf", "%{EPOCHNUM}:%{VERSION}",
         "kmod-nvidia-latest-dkms"], capture_output=True, text=True, check=False)
    assert listed.stdout == f"3:{DRIVER}", listed.stdout + listed.stderr


# ------------------------------ upgrade and rollback of a host whose NVIDIA source is a bundle

OLD = "580.159.03"  # the driver of the bundle the host was provisioned from; DRIVER: the target's


def _driver_bundle(out: Path, driver: str) -> Path:
    """A served-bundle folder of the stream 580-dkms driver set at ``driver`` (with dkms and the
    /bin/sh the scriptlets need), its module metadata cut to it."""
    from tests.lab import rpmrepo as standins

    cached = standins.cached_rpms()
    (out / rpmrepo.POOL).mkdir(parents=True)
    wanted = [p for p in (cached / "el9").glob(f"*-{driver}-1.el9.*.rpm")
              if "open" not in p.name and "fabric" not in p.name]
    wanted += [*(cached / "epel").glob("dkms-*.rpm"), *(cached / "baseos").glob("bash-*.rpm")]
    for rpm in wanted:
        shutil.copyfile(rpm, out / rpmrepo.POOL / rpm.name)
    rpmrepo.index(out)
    source = standins.modules_yaml(sorted((cached / "el9").glob("*.rpm")))
    rpmrepo.add_modules(out, rpmrepo.stream_modules(
        source, "nvidia-driver", "580-dkms", [p.nevra for p in rpmrepo.primary_packages(out)],
        "modules.yaml"))
    return out


@needs_tools
def test_upgrade_cache_and_rollback_through_the_seam_on_a_host_whose_source_is_a_served_bundle(
    served: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What ``gpuhost upgrade --to`` and ``rollback`` run through the seam (pkgmgr/dnf.py), on
    a host whose only NVIDIA repository is a served bundle: before the upgrade the snapshot's
    package files are cached by ``dnf download`` from the host's bundle (a served bundle leaves
    no pool on the host), the upgrade installs the new bundle's versions, and the rollback
    installs the cached files with every repository off (the new bundle lacks the old
    versions)."""
    from gpuhost.pkgmgr import DNF
    from gpuhost.upgrade import package_cache

    url, folder = served
    _driver_bundle(folder / "old", OLD)
    root = tmp_path / "root"
    proxy = f"http://127.0.0.1:{_closed_port()}"
    assert _dnf(root, f"{url}/old", "module", "enable", "nvidia-driver:580-dkms",
                proxy=proxy, direct=True).returncode == 0
    names = ["nvidia-driver-cuda", "kmod-nvidia-latest-dkms"]
    done = _dnf(root, f"{url}/old", "install", *[f"{n}-3:{OLD}" for n in names],
                proxy=proxy, direct=True)
    assert done.returncode == 0, done.stdout + done.stderr

    def installed() -> dict[str, str]:
        listed = subprocess.run(
            ["rpm", f"--root={root}", "--dbpath=/var/lib/rpm", "-qa", "--qf",
             "%{NAME} %{EPOCHNUM}:%{VERSION}-%{RELEASE} %{ARCH}\n"],
            capture_output=True, text=True, check=True)
        return {n: f"{v} {a}" for n, v, a in (line.split() for line in listed.stdout.splitlines())
                if n not in ("bash", "dkms")}

    before = installed()
    assert set(before.values()) >= {f"3:{OLD}-1.el9 x86_64"} and len(before) >= 5, before
    # the host's dnf as gpuhost's seam runs it, here in the installroot (the lab does the same
    # with the host's own files)
    manager = DNF.configured(
        f"--installroot={root}", "--releasever=9", f"--config={tmp_path / 'dnf.conf'}",
        f"--setopt=reposdir={tmp_path / 'repos'}", f"--setopt=cachedir={tmp_path / 'cache'}")
    monkeypatch.setattr(package_cache, "CACHE_ROOT", str(tmp_path / "packages"))
    monkeypatch.setattr(package_cache, "BUNDLE_POOL", str(tmp_path / "no-pool"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    snapshot = {n: {"version": v.split()[0], "arch": v.split()[1]} for n, v in before.items()}
    fill = subprocess.run(["sh", "-c", package_cache.fill_command("20261129T000000Z", snapshot,
                                                                   manager)],
                          capture_output=True, text=True, check=False, timeout=300)
    report = package_cache.parse_fill_output("20261129T000000Z", fill.stdout)
    assert report.complete and set(report.files) == set(before), fill.stdout + fill.stderr

    # the upgrade: the host's repository file now names the target's bundle
    up = _dnf(root, url, "install", *[f"{n}-3:{DRIVER}" for n in before], proxy=proxy,
              direct=True)
    assert up.returncode == 0, up.stdout + up.stderr
    assert set(installed().values()) == {f"3:{DRIVER}-1.el9 x86_64", f"3:{DRIVER}-1.el9 noarch"}

    back = subprocess.run(
        ["sh", "-c", package_cache.install_command("20261129T000000Z", report.files, manager)],
        capture_output=True, text=True, check=False, timeout=300)
    assert back.returncode == 0, back.stdout + back.stderr
    assert installed() == before
