"""Using a bundle: what provision needs from it (the profile's pinned set), the refusal before any
change, the inventory contract of gpuhost_bundle / gpuhost_proxy, the controller's downloads
through the proxy, and the parser of apt's --print-uris answer."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuhost.bundle.printuris import parse_print_uris
from gpuhost.bundle.setting import BundleSetting, proxy_urls
from gpuhost.deploys import guards
from gpuhost.deploys.offline import check_bundle, required_packages
from gpuhost.deploys.spec import package_plan
from gpuhost.errors import DeployError, ParseError
from gpuhost.inventory.contract import host_problems
from gpuhost.operations.nvidia_repo import fetch_verified

FIXTURES = Path(__file__).parents[1] / "fixtures" / "bundle"
PROFILE = "nvidia-repo-580-cuda13.0"


def _spec_plan(profile: str = PROFILE, data: dict | None = None):
    table = guards.load_profile_table(None)
    spec = guards.check_profile("gpu1", {"gpuhost_profile": profile, **(data or {})}, table)
    return spec, package_plan(spec, "debian-12")


def test_the_required_set_is_what_provision_installs_at_the_pinned_versions() -> None:
    spec, plan = _spec_plan()
    required = required_packages(spec, plan, {})
    assert required["nvidia-smi"] == "580.178.04-*"
    assert required["nvidia-kernel-open-dkms"] == "580.178.04-*"  # the profile's open module
    assert "nvidia-kernel-dkms" not in required
    assert required["cuda-toolkit-13-0"] == "13.0.*" and required["cuda-toolkit-12-9"] == "12.9.*"
    assert required["libcudnn9-cuda-13"] == "9.17.0.*"
    assert required["nvidia-container-toolkit"] == "1.19.1-*"
    assert "nvidia-fabricmanager-580" not in required  # auto, and no NVSwitch in the data
    without_cuda = required_packages(spec, plan, {"gpuhost_install_cuda": False})
    assert not any(name.startswith("cuda-toolkit") for name in without_cuda)


def test_a_debian_profile_requires_its_companions_at_their_exact_versions() -> None:
    spec, plan = _spec_plan("debian12-nonfree-535-security")
    required = required_packages(spec, plan, {})
    assert required["nvidia-driver"] == "535.309.01-*"
    assert required["nvidia-persistenced"] == "535.171.04-1~deb12u1"
    assert required["nvidia-cuda-toolkit"] == "11.8.*"  # 11.8.89~11.8.0-5~deb12u1 matches


def _manifest_dir(tmp_path: Path, packages: dict[str, str], os_key: str = "debian-12") -> Path:
    root = tmp_path / "bundle"
    (root / "pool").mkdir(parents=True)
    entries = []
    for name, version in packages.items():
        filename = f"pool/{name}_{version}_amd64.deb"
        data = f"{name} {version}".encode()
        (root / filename).write_bytes(data)
        entries.append({"package": name, "version": version, "architecture": "amd64",
                        "filename": filename, "sha256": hashlib.sha256(data).hexdigest(),
                        "size": len(data)})
    (root / "manifest.json").write_text(json.dumps({
        "schema": 1, "profile": PROFILE, "os": os_key, "created": "2026-11-26",
        "packages": entries}))
    return root


def _complete(spec, plan) -> dict[str, str]:
    versions = {"580.178.04-*": "580.178.04-1", "13.0.*": "13.0.2-1", "12.9.*": "12.9.1-1",
                "9.17.0.*": "9.17.0.29-1", "1.19.1-*": "1.19.1-1"}
    return {name: versions.get(str(pattern), "1.0-1")
            for name, pattern in required_packages(spec, plan, {}).items()}


def test_a_complete_bundle_passes(tmp_path: Path) -> None:
    spec, plan = _spec_plan()
    root = _manifest_dir(tmp_path, _complete(spec, plan))
    manifest = check_bundle("gpu1", BundleSetting(path=str(root)), spec, plan, {}, "debian-12")
    assert manifest.profile == PROFILE


def test_a_bundle_missing_a_package_is_refused_naming_it(tmp_path: Path) -> None:
    spec, plan = _spec_plan()
    packages = _complete(spec, plan)
    del packages["nvidia-smi"]
    packages["libcudnn9-cuda-13"] = "9.19.0.56-1"
    root = _manifest_dir(tmp_path, packages)
    with pytest.raises(DeployError) as info:
        check_bundle("gpu1", BundleSetting(path=str(root)), spec, plan, {}, "debian-12")
    assert str(info.value) == (
        f"gpu1: gpuhost_bundle {root}: lacks packages profile {PROFILE} installs: "
        "libcudnn9-cuda-13 9.19.0.56-1 (expected 9.17.0.*), nvidia-smi (missing, expected "
        f"580.178.04-*); nothing was installed (make it with gpuhost bundle {PROFILE})"
    )


def test_a_bundle_for_another_os_or_with_damaged_files_is_refused(tmp_path: Path) -> None:
    spec, plan = _spec_plan()
    root = _manifest_dir(tmp_path, _complete(spec, plan), os_key="ubuntu-22.04")
    with pytest.raises(DeployError, match="made for ubuntu-22.04, this host runs debian-12"):
        check_bundle("gpu1", BundleSetting(path=str(root)), spec, plan, {}, "debian-12")
    other = _manifest_dir(tmp_path / "b", _complete(spec, plan))
    (other / "pool" / "nvidia-smi_580.178.04-1_amd64.deb").write_bytes(b"changed")
    with pytest.raises(DeployError) as info:
        check_bundle("gpu1", BundleSetting(path=str(other)), spec, plan, {}, "debian-12")
    assert "files differ from manifest.json: pool/nvidia-smi_580.178.04-1_amd64.deb: sha256" \
        in str(info.value)
    with pytest.raises(DeployError, match=r"gpuhost_bundle: .*manifest.json"):
        check_bundle("gpu1", BundleSetting(path=str(tmp_path / "none")), spec, plan, {},
                     "debian-12")


@pytest.mark.parametrize(("data", "problem"), [
    ({"gpuhost_bundle": {"path": "/srv/bundle"}}, None),
    ({"gpuhost_bundle": {"url": "http://repo1:8080/b", "key_sha256": "a" * 64}}, None),
    ({"gpuhost_bundle": {"url": "http://repo1:8080/b"}}, "a url needs key_sha256"),
    ({"gpuhost_bundle": {"path": "/b", "url": "http://r/b"}}, "exactly one of path or url"),
    ({"gpuhost_bundle": {"path": "/b", "key_sha256": "a" * 64}}, "key_sha256 goes with url"),
    ({"gpuhost_bundle": "/srv/bundle"}, "expected {path: DIR} or {url: URL"),
    ({"gpuhost_bundle": {"url": "ftp://r/b", "key_sha256": "a" * 64}}, "is not an http(s) URL"),
    ({"gpuhost_proxy": "http://proxy:3128"}, None),
    ({"gpuhost_proxy": {"https": "http://proxy:3128"}}, None),
    ({"gpuhost_proxy": "proxy:3128"}, "gpuhost_proxy: found 'proxy:3128' (str), expected"),
    ({"gpuhost_proxy": 'http://p:1";\nAcquire::x "y'}, "expected an http(s) URL"),
    ({"gpuhost_proxy": {"ftp": "http://p:1"}}, "expected an http(s) URL"),
])
def test_the_contract_checks_both_settings(data, problem) -> None:
    problems = host_problems(data)
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problem in problems[0], problems


def test_a_bundle_replaces_the_cuda_repository_data() -> None:
    from gpuhost.inventory.profiles import install_data_problem

    profile = guards.load_profile_table(None)[PROFILE]
    assert "gpuhost_cuda_repo_url: not set" in str(install_data_problem(profile, {}))
    assert install_data_problem(profile, {"gpuhost_bundle": {"path": "/b"}}) is None


def test_proxy_urls_of_both_forms() -> None:
    assert proxy_urls({}) == {}
    assert proxy_urls({"gpuhost_proxy": "http://p:3128"}) == {"http": "http://p:3128",
                                                               "https": "http://p:3128"}
    assert proxy_urls({"gpuhost_proxy": {"https": "http://s:1"}}) == {"https": "http://s:1"}


def test_the_controller_fetches_a_key_through_the_proxy() -> None:
    seen: list[str] = []
    body = b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n"

    class Proxy(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            seen.append(self.requestline)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        proxy = f"http://127.0.0.1:{server.server_address[1]}"
        data = fetch_verified("http://repo.example.invalid/key.asc",
                              hashlib.sha256(body).hexdigest(), {"http": proxy})
    finally:
        server.shutdown()
        server.server_close()
    assert data == body
    assert seen == ["GET http://repo.example.invalid/key.asc HTTP/1.1"]


def test_print_uris_of_a_real_apt_answer() -> None:
    found = parse_print_uris((FIXTURES / "print-uris-nftables-bookworm.txt").read_text())
    assert [(d.package, d.version, d.size) for d in found] == [
        ("libjansson4", "2.14-2", 40788),
        ("libnftnl11", "1.2.4-2", 61632),
        ("libnftables1", "1.0.6-2+deb12u2", 299116),
        ("nftables", "1.0.6-2+deb12u2", 70292),
    ]
    assert found[0].hash_type == "MD5Sum" and found[0].digest == "bba5be3ad532792749e18495e91732aa"
    assert found[2].uri.endswith("/libnftables1_1.0.6-2%2bdeb12u2_amd64.deb")


def test_print_uris_epochs_other_hashes_and_noise() -> None:
    text = (
        "Reading package lists...\n"
        "'http://r/pool/x/xz-utils_5.4.1-1_amd64.dsc' xz-utils_5.4.1-1.dsc 2500 SHA256:ab\n"
        "'http://r/pool/n/nvidia-persistenced_1%3a580.178.04-1_amd64.deb' "
        "nvidia-persistenced_1%3a580.178.04-1_amd64.deb 12 SHA256:ABCD\n"
    )
    (only,) = parse_print_uris(text)
    assert (only.package, only.version, only.hash_type, only.digest) == (
        "nvidia-persistenced", "1:580.178.04-1", "SHA256", "abcd")
    with pytest.raises(ParseError, match="not a package file name"):
        parse_print_uris("'http://r/a.deb' a.deb 1 SHA256:00\n")


def test_a_served_bundle_s_manifest_is_read_from_its_server(tmp_path: Path) -> None:
    import functools
    from http.server import SimpleHTTPRequestHandler

    spec, plan = _spec_plan()
    packages = _complete(spec, plan)
    del packages["libcudnn9-cuda-13"]
    root = _manifest_dir(tmp_path, packages)

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        with pytest.raises(DeployError) as info:
            check_bundle("gpu1", BundleSetting(url=url, key_sha256="0" * 64), spec, plan, {},
                         "debian-12")
        missing = BundleSetting(url=url + "nothing-here", key_sha256="0" * 64)
        with pytest.raises(DeployError, match="cannot download .*nothing-here/manifest.json"):
            check_bundle("gpu1", missing, spec, plan, {}, "debian-12")
    finally:
        server.shutdown()
        server.server_close()
    assert f"gpuhost_bundle {url}: lacks packages" in str(info.value)
    assert "libcudnn9-cuda-13 (missing, expected 9.17.0.*)" in str(info.value)


def test_the_files_copied_to_a_host_are_the_checked_ones(tmp_path: Path) -> None:
    from gpuhost.deploys.offline import bundle_files

    root = _manifest_dir(tmp_path, {"nvidia-smi": "580.178.04-1"})
    (root / "Release").write_text("Origin: gpuhost\n")
    files = bundle_files(str(root))
    assert sorted(files) == ["Release", "manifest.json", "pool/nvidia-smi_580.178.04-1_amd64.deb"]
    assert files["Release"] == hashlib.sha256(b"Origin: gpuhost\n").hexdigest()
    deb = (root / "pool" / "nvidia-smi_580.178.04-1_amd64.deb").read_bytes()
    assert files["pool/nvidia-smi_580.178.04-1_amd64.deb"] == hashlib.sha256(deb).hexdigest()
