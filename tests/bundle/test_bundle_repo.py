"""The bundle's repository and manifest, made from real packages built here with dpkg-deb and
signed with a new gpg key: Packages/Release hashes, the signature apt checks, the manifest's
schema, its file checks and the pinned-set comparison provision refuses on."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuhost.bundle import aptrepo
from gpuhost.bundle.debfile import control_text
from gpuhost.bundle.manifest import (
    file_problems,
    from_debs,
    manifest_text,
    parse_manifest_text,
    pinned_problems,
    read_manifest,
)
from gpuhost.errors import ConfigError

needs_dpkg = pytest.mark.skipif(shutil.which("dpkg-deb") is None,
                                reason="dpkg-deb is not installed: it builds the test packages")
needs_gpg = pytest.mark.skipif(shutil.which("gpg") is None or shutil.which("gpgv") is None,
                               reason="gpg/gpgv are not installed: they sign and check Release")


def _deb(tmp: Path, name: str, version: str, out: Path) -> Path:
    root = tmp / f"{name}-src"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "usr/share/doc" / name).mkdir(parents=True)
    (root / "usr/share/doc" / name / "README").write_text(f"{name} {version}\n")
    (root / "DEBIAN/control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: amd64\n"
        "Maintainer: gpuhost tests <tests@example.invalid>\n"
        f"Description: test package {name}\n a second line\n"
    )
    target = out / f"{name}_{version.replace(':', '%3a')}_amd64.deb"
    subprocess.run(["dpkg-deb", "-Zxz", "--root-owner-group", "--build", str(root), str(target)],
                   check=True, capture_output=True)
    return target


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    if shutil.which("dpkg-deb") is None or shutil.which("gpg") is None:
        pytest.skip("dpkg-deb and gpg are needed to build and sign a bundle")
    tmp = tmp_path_factory.mktemp("bundle")
    root = tmp / "bundle"
    (root / "pool").mkdir(parents=True)
    _deb(tmp, "nvidia-smi", "580.178.04-1", root / "pool")
    _deb(tmp, "nvidia-persistenced", "1:580.178.04-1", root / "pool")
    key = aptrepo.build(root, "test-profile debian-12")
    debs = [aptrepo.read_deb(root, f"pool/{p.name}") for p in sorted((root / "pool").iterdir())]
    manifest = from_debs(debs, "test-profile", "debian-12", "2026-11-26T00:00:00+00:00", "ref1",
                         key)
    (root / "manifest.json").write_text(manifest_text(manifest))
    return root


@needs_dpkg
@needs_gpg
def test_packages_lists_each_file_with_its_size_and_hashes(bundle: Path) -> None:
    text = (bundle / "Packages").read_text()
    assert gzip.decompress((bundle / "Packages.gz").read_bytes()).decode() == text
    stanzas = text.strip().split("\n\n")
    assert len(stanzas) == 2
    for stanza in stanzas:
        fields = dict(re.findall(r"^([A-Za-z0-9-]+): (.*)$", stanza, re.M))
        deb = bundle / fields["Filename"]
        data = deb.read_bytes()
        assert fields["Filename"].startswith("pool/") and int(fields["Size"]) == len(data)
        assert fields["SHA256"] == hashlib.sha256(data).hexdigest()
        assert fields["MD5sum"] == hashlib.md5(data).hexdigest()
        assert " a second line" in stanza  # the control file's continuation kept
    assert "Version: 1:580.178.04-1" in text


@needs_dpkg
@needs_gpg
def test_release_hashes_its_indexes_never_expires_and_is_signed(bundle: Path) -> None:
    release = (bundle / "Release").read_text()
    assert "Valid-Until" not in release
    for name in ("Packages", "Packages.gz"):
        data = (bundle / name).read_bytes()
        assert f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}\n" in release
    keyring = str(bundle / aptrepo.KEY_FILE)
    for args in (["InRelease"], ["Release.gpg", "Release"]):
        proc = subprocess.run(["gpgv", "--keyring", keyring, *[str(bundle / a) for a in args]],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
    (bundle / "Release").write_text(release.replace("Origin: gpuhost", "Origin: someone"))
    try:
        proc = subprocess.run(["gpgv", "--keyring", keyring, str(bundle / "Release.gpg"),
                               str(bundle / "Release")], capture_output=True, check=False)
        assert proc.returncode != 0  # a changed Release no longer matches its signature
    finally:
        (bundle / "Release").write_text(release)


@needs_dpkg
@needs_gpg
def test_the_manifest_round_trips_and_keeps_its_schema(bundle: Path) -> None:
    manifest = read_manifest(bundle)
    assert manifest.versions() == {"nvidia-persistenced": ["1:580.178.04-1"],
                                   "nvidia-smi": ["580.178.04-1"]}
    assert manifest.reference_host == "ref1" and manifest.signing_key
    assert file_problems(manifest, bundle) == []
    doc = json.loads((bundle / "manifest.json").read_text())
    doc["packages"][0]["sha256"] = "not a digest"
    with pytest.raises(ConfigError, match=r"^m.json: packages\[0\]\.sha256: 'not a digest'"):
        parse_manifest_text(json.dumps(doc), "m.json")
    with pytest.raises(ConfigError, match="^m.json: not JSON"):
        parse_manifest_text("{", "m.json")


@needs_dpkg
@needs_gpg
def test_a_changed_or_missing_package_file_is_named(bundle: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    manifest = read_manifest(copy)
    smi = next(p for p in manifest.packages if p.package == "nvidia-smi")
    other = next(p for p in manifest.packages if p.package != "nvidia-smi")
    with (copy / smi.filename).open("ab") as handle:
        handle.write(b"x")
    (copy / other.filename).unlink()
    problems = file_problems(manifest, copy)
    assert problems[0] == f"{other.filename}: missing"
    assert problems[1].startswith(f"{smi.filename}: sha256 ") and "manifest says" in problems[1]


def test_the_pinned_set_is_compared_with_the_manifest() -> None:
    manifest = parse_manifest_text(json.dumps({
        "schema": 1, "profile": "p", "os": "debian-12", "created": "2026-11-26",
        "packages": [
            {"package": n, "version": v, "architecture": "amd64",
             "filename": f"pool/{n}_{v}_amd64.deb", "sha256": "0" * 64, "size": 1}
            for n, v in (("nvidia-smi", "580.178.04-1"), ("cuda-toolkit-13-0", "13.0.2-1"),
                         ("nvidia-persistenced", "535.171.04-1~deb12u1"))
        ],
    }), "manifest.json")
    assert pinned_problems(manifest, {"nvidia-smi": "580.178.04-*", "cuda-toolkit-13-0": "13.0.*",
                                      "nvidia-persistenced": "535.171.04-1~deb12u1"}) == []
    assert pinned_problems(manifest, {"nvidia-smi": "580.159.03-*", "libcuda1": "580.178.04-*",
                                      "nftables": None,
                                      "nvidia-persistenced": "535.171.04-1"}) == [
        "libcuda1 (missing, expected 580.178.04-*)",
        "nftables (missing)",
        "nvidia-persistenced 535.171.04-1~deb12u1 (expected 535.171.04-1)",
        "nvidia-smi 580.178.04-1 (expected 580.159.03-*)",
    ]


def test_a_file_that_is_no_package_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "x.deb"
    bad.write_bytes(b"PK\x03\x04 a zip file")
    with pytest.raises(ConfigError, match=r"x.deb: not a Debian package \(no ar archive header\)$"):
        control_text(bad)
    bad.write_bytes(b"!<arch>\ndebian-binary   0           0     0     100644  4         `\n2.0\n")
    with pytest.raises(ConfigError, match="no control.tar member"):
        control_text(bad)
