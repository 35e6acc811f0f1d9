"""An offline bundle folder whose manifest.json or files were changed by hand (or by someone
else): refused in one line before any change to a host.

Before, an RPM bundle folder's vendor keys were never compared with its manifest: a missing
keys/ file left dnf's repository file naming no key (gpgcheck=1 then failed the install after
NVIDIA's online repository file was already gone), a replaced key or one added under keys/ was
trusted by dnf; and a manifest whose ``format`` was edited to the other family's made a Rocky
host use an apt folder as its RPM repository (or a Debian host the reverse)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from gpuhost.bundle.setting import BundleSetting
from gpuhost.deploys import offline
from gpuhost.errors import ConfigError
from tests.robustness.conftest import assert_one_line, gpuhost

PACKAGE = b"an rpm's bytes"
KEY = b"a vendor's key"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _bundle(root: Path, **changes: object) -> Path:
    """An RPM bundle folder of one package and one key, its manifest with ``changes``."""
    (root / "pool").mkdir(parents=True)
    (root / "keys").mkdir()
    (root / "pool" / "a.rpm").write_bytes(PACKAGE)
    (root / "keys" / "RPM-GPG-KEY-vendor").write_bytes(KEY)
    doc = {
        "schema": 1, "profile": "nvidia-repo-580-cuda12.9", "os": "rocky-9", "created": "now",
        "format": "rpm", "modules": ["nvidia-driver:580-dkms"],
        "keys": {"RPM-GPG-KEY-vendor": _sha(KEY)},
        "packages": [{"package": "a", "version": "1-1", "architecture": "x86_64",
                      "filename": "pool/a.rpm", "sha256": _sha(PACKAGE), "size": len(PACKAGE)}],
        **changes,
    }
    doc = {k: v for k, v in doc.items() if v is not ...}  # ...: the field left out
    (root / "manifest.json").write_text(json.dumps(doc), encoding="utf-8")
    return root


def test_the_untouched_folder_loads(tmp_path: Path) -> None:
    """The cases below differ from this one only in what they change."""
    manifest = offline.load_bundle(BundleSetting(path=str(_bundle(tmp_path / "b"))))
    assert manifest.keys == (("RPM-GPG-KEY-vendor", _sha(KEY)),)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda keys: (keys / "RPM-GPG-KEY-vendor").unlink(), "keys/RPM-GPG-KEY-vendor: missing"),
        (lambda keys: (keys / "RPM-GPG-KEY-vendor").write_bytes(b"another key"),
         f"keys/RPM-GPG-KEY-vendor: sha256 {_sha(b'another key')[:16]}..., manifest says "
         f"{_sha(KEY)[:16]}..."),
        (lambda keys: (keys / "RPM-GPG-KEY-planted").write_bytes(b"x"),
         "keys/RPM-GPG-KEY-planted: not listed in manifest.json"),
        (lambda keys: [p.unlink() for p in keys.iterdir()] and keys.rmdir(),
         "keys/RPM-GPG-KEY-vendor: missing"),
    ],
    ids=["missing", "replaced", "planted", "no keys folder"],
)
def test_a_key_folder_that_differs_from_the_manifest_is_refused(tmp_path: Path, change,
                                                                 named: str) -> None:
    root = _bundle(tmp_path / "b")
    change(root / "keys")
    with pytest.raises(ConfigError) as exc:
        offline.load_bundle(BundleSetting(path=str(root)))
    assert f"bundle {root}: files differ from manifest.json: {named}" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_an_rpm_manifest_listing_no_keys_is_refused_for_a_folder_too(tmp_path: Path) -> None:
    root = _bundle(tmp_path / "b", keys={})
    with pytest.raises(ConfigError, match="keys/: manifest.json lists no keys"):
        offline.load_bundle(BundleSetting(path=str(root)))


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"format": "apt"}, "format: found 'apt' for os rocky-9, expected 'rpm'"),
        ({"format": ...}, "format: found none (read as 'apt') for os rocky-9, expected 'rpm'"),
        ({"format": "rpm", "os": "debian-12"}, "format: found 'rpm' for os debian-12, expected "
                                               "'apt'"),
        ({"format": None}, "format: None is not one of ['apt', 'rpm']"),
    ],
)
def test_a_manifest_whose_format_is_not_its_os_is_one_line_before_any_host(
    tmp_path: Path, changes: dict[str, object], named: str
) -> None:
    _bundle(tmp_path / "bundle", **changes)
    host = {"ssh_hostname": "127.0.0.1", "ssh_port": 9,
            "gpuhost_profile": "nvidia-repo-580-cuda12.9", "gpuhost_bundle": {"path": "bundle"}}
    (tmp_path / "inv.py").write_text(f"gpu = [('a', {host!r}), ('b', {host!r})]\n")
    run = gpuhost("provision", "inv.py", "--dry", cwd=tmp_path)
    assert_one_line(run, 2, "inv.py: host a: gpuhost_bundle: bundle/manifest.json", named)


@pytest.mark.parametrize("command", [["provision", "inv.py", "--dry"], ["inventory", "check",
                                                                         "inv.py"]])
def test_a_bundle_made_for_an_os_the_profile_never_installs_on_is_one_line_before_any_host(
    tmp_path: Path, command: list[str]
) -> None:
    """A Rocky 9 bundle given to hosts of a Debian-only profile: before, found on each host
    reached (exit 1, 'made for rocky-9, this host runs debian-12'), and not at all while they
    were unreachable; the manifest and the profile already say it."""
    _bundle(tmp_path / "bundle")
    host = {"ssh_hostname": "127.0.0.1", "ssh_port": 9,
            "gpuhost_profile": "debian12-nonfree-535-security",
            "gpuhost_bundle": {"path": "bundle"}}
    (tmp_path / "inv.py").write_text(f"gpu = [('a', {host!r}), ('b', {host!r})]\n")
    run = gpuhost(*command, cwd=tmp_path)
    assert_one_line(run, 2, "inv.py: host a: gpuhost_bundle: bundle was made for rocky-9, "
                            "profile debian12-nonfree-535-security installs on debian-12")
    assert "unreachable" not in run.out + run.err
