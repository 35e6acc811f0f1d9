"""DKMS 2.8 (Ubuntu 22.04's 2.8.7) with the user's own signing key: its ``sign_build`` signs
every module it installs again, after the ``sign_tool``, with Ubuntu's fixed MOK paths, so
gpuhost links those paths to the configured key and certificate.

``SIGN_BUILD`` below is our stand-in of that step, written from what DKMS 2.8.7's ``sign_build``
does (read in its source, dell/dkms tag v2.8.7, file ``dkms``: tests/fixtures/secureboot/
SOURCES.md): when kmodsign and /var/lib/shim-signed/mok/ exist and update-secureboot-policy is
installed, ask for a new key (made only where none is), sign every ``*.ko`` under the build's
``module/`` folder with ``kmodsign sha512 MOK.priv MOK.der``, then ask for enrollment. It runs in
sh with stand-ins of kmodsign and update-secureboot-policy that record what they are given, its
/var/lib/shim-signed path, and the same path in gpuhost's commands, moved under a temporary root.
What this does not show: DKMS 2.8.7's own script run (no dkms 2.8 package is reachable here),
Ubuntu's real kmodsign and update-secureboot-policy, the jammy package's own copy of the
function (read in a public note, not here), a module loading under Secure Boot
(docs/provision.md, "What only a real machine shows")."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace

import pytest
from harden.fakehost import FakeHost, command_to_json
from pyinfra.context import ctx_host

from gpuhost.deploys import secure_boot
from gpuhost.errors import DeployError
from gpuhost.operations import signing as ops
from gpuhost.parsers import signing

SIGN_BUILD = """
command -v kmodsign >/dev/null && [ -d /var/lib/shim-signed/mok/ ] || exit 0
command -v update-secureboot-policy >/dev/null || exit 0
SHIM_NOTRIGGER=y update-secureboot-policy --new-key
find "$dkms_tree/$module/$module_version/$kernelver/$arch/module/" -name '*.ko' |
while read -r built; do
    kmodsign sha512 /var/lib/shim-signed/mok/MOK.priv /var/lib/shim-signed/mok/MOK.der "$built"
done
update-secureboot-policy --enroll-key
"""
SHIM = "/var/lib/shim-signed"
KEY, CERT = "/root/mok/signing.key", "/root/mok/signing.der"
LINKS = {signing.UBUNTU_MOK_KEY: KEY, signing.UBUNTU_MOK_CERT: CERT}


def _commands(links: Mapping[str, object], key: str = KEY, cert: str = CERT) -> tuple[list, list]:
    fake = FakeHost({"files.Link": {f"path={path}": found for path, found in links.items()}})
    fake.state = SimpleNamespace(is_executing=False, current_stage=None)
    with ctx_host.use(fake):
        commands = [command_to_json(c) for c in ops.shim_mok_linked._inner(key=key, cert=cert)]
    return commands, fake.noops


def test_the_mok_paths_are_linked_once() -> None:
    commands, _ = _commands({signing.UBUNTU_MOK_KEY: False, signing.UBUNTU_MOK_CERT: None})
    assert commands == [ops.mok_link_command(path, target) for path, target in LINKS.items()]
    done = {path: {"link_target": target} for path, target in LINKS.items()}
    commands, noops = _commands(done)
    assert commands == [] and noops == [
        f"{signing.SHIM_MOK_DIR}/MOK.priv, MOK.der link to {KEY}, {CERT}"
    ]
    # a link to another key is replaced (and kept aside)
    other = {**done, signing.UBUNTU_MOK_CERT: {"link_target": "/old/mok.der"}}
    commands, _ = _commands(other)
    assert commands == [ops.mok_link_command(signing.UBUNTU_MOK_CERT, CERT)]


class Jammy:
    """A temporary root with shim-signed's MOK directory, a module DKMS built, the user's key
    files, and stand-ins of kmodsign and update-secureboot-policy."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.root = tmp, tmp / "root"
        self.mok = self.root / SHIM.lstrip("/") / "mok"
        self.mok.mkdir(parents=True)
        self.base = self.root / "var/lib/dkms/nvidia/580.178.04/5.15.0-91-generic/x86_64"
        (self.base / "module").mkdir(parents=True)
        (self.base / "module" / "nvidia.ko").write_text("module\n")
        self.keys = self.root / "keys"
        self.keys.mkdir()
        (self.keys / "my.priv").write_text("user key\n")
        (self.keys / "my.der").write_text("user cert\n")
        self.bin, self.log = tmp / "bin", tmp / "log"
        self.bin.mkdir()
        self.log.write_text("")
        self._stub("kmodsign", f'echo "kmodsign $1 $(cat "$2") $(cat "$3") $4" >> {self.log}')
        self._stub("update-secureboot-policy", (
            f'echo "update-secureboot-policy $*" >> {self.log}\n'
            f'if [ "$1" = --new-key ] && [ ! -e {self.mok}/MOK.priv ]; then\n'
            f'  echo "new key" > {self.mok}/MOK.priv; echo "new cert" > {self.mok}/MOK.der\nfi'))

    def _stub(self, name: str, body: str) -> None:
        path = self.bin / name
        path.write_text("#!/bin/sh\n" + body + "\n")
        path.chmod(0o755)

    def here(self, text: str) -> str:
        return text.replace(SHIM, f"{self.root}{SHIM}")

    def gpuhost(self, key: str, cert: str) -> None:
        """gpuhost's commands for a host where nothing is linked yet, run by sh."""
        links = {path: False if (self.root / path.lstrip("/")).exists() else None
                 for path in LINKS}
        commands, _ = _commands(links, key, cert)
        for command in commands:
            subprocess.run(["sh", "-c", self.here(command)], check=True)

    def dkms_build(self) -> list[str]:
        """The sign_build stand-in for the module under ``base``; the stand-ins' records."""
        script = self.here(SIGN_BUILD)
        env = {**os.environ, "PATH": f"{self.bin}:{os.environ['PATH']}",
               "dkms_tree": str(self.root / "var/lib/dkms"), "module": "nvidia",
               "module_version": "580.178.04", "kernelver": "5.15.0-91-generic",
               "arch": "x86_64"}
        subprocess.run(["sh", "-c", script], env=env, check=True,
                       capture_output=True, text=True)
        return self.log.read_text().splitlines()


def test_dkms_2_8_7_signs_with_ubuntus_mok_unless_gpuhost_links_the_paths(
    tmp_path: Path,
) -> None:
    jammy = Jammy(tmp_path)
    (jammy.mok / "MOK.priv").write_text("ubuntu key\n")
    (jammy.mok / "MOK.der").write_text("ubuntu cert\n")
    ko = jammy.base / "module" / "nvidia.ko"
    # the problem: with only the sign_tool configured, sign_build's signature is Ubuntu's
    assert jammy.dkms_build() == [
        "update-secureboot-policy --new-key",
        f"kmodsign sha512 ubuntu key ubuntu cert {ko}",
        "update-secureboot-policy --enroll-key",
    ]
    jammy.log.write_text("")
    jammy.gpuhost(str(jammy.keys / "my.priv"), str(jammy.keys / "my.der"))
    assert jammy.dkms_build() == [
        "update-secureboot-policy --new-key",
        f"kmodsign sha512 user key user cert {ko}",
        "update-secureboot-policy --enroll-key",
    ]
    # Ubuntu's own pair is kept beside the links, never deleted
    saved = signing.SHIM_MOK_SAVED
    assert (jammy.mok / f"MOK.priv{saved}").read_text() == "ubuntu key\n"
    assert (jammy.mok / f"MOK.der{saved}").read_text() == "ubuntu cert\n"
    assert os.readlink(jammy.mok / "MOK.priv") == str(jammy.keys / "my.priv")


def test_with_the_links_no_ubuntu_key_is_made(tmp_path: Path) -> None:
    """A host with shim-signed but no MOK yet: without the links, sign_build's --new-key makes
    Ubuntu's key and signs with it; with them, the user's key is already there."""
    jammy = Jammy(tmp_path)
    jammy.gpuhost(str(jammy.keys / "my.priv"), str(jammy.keys / "my.der"))
    assert f"user key user cert {jammy.base / 'module' / 'nvidia.ko'}" in jammy.dkms_build()[1]
    assert not list(jammy.mok.glob(f"*{signing.SHIM_MOK_SAVED}*"))


def test_a_pkcs11_key_on_dkms_2_is_refused_in_one_line() -> None:
    fake = FakeHost({"signing.DkmsVersion": signing.DkmsRelease(installed="2.8.7")})
    fake.state = SimpleNamespace(is_executing=False, current_stage=None)
    fake.name = "gpu3"
    plan = secure_boot.SigningPlan(key="pkcs11:token=mok;object=db", cert=CERT, secure_boot=True)
    with ctx_host.use(fake), pytest.raises(DeployError) as info:
        secure_boot.configure_signing._inner(plan)
    assert str(info.value) == "gpu3: " + secure_boot.DKMS2_PKCS11.format(
        key=secure_boot.KEY, cert=secure_boot.CERT)
