"""Module signing parsers on real captures (tests/fixtures/secureboot/SOURCES.md): mokutil
--test-key, modinfo's signature fields, DKMS's framework files, a certificate's serial."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from signing_support import certificate

from gpuhost.errors import ParseError
from gpuhost.parsers import signing

FIXTURES = Path(__file__).parent.parent / "fixtures" / "secureboot"


def _read(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("text", "state"),
    [
        # mokutil's own format strings (src/mokutil.c), file name filled in
        ("/var/lib/dkms/mok.pub is not enrolled\n", signing.NOT_ENROLLED),
        ("/var/lib/dkms/mok.pub is already enrolled\n", signing.ENROLLED),
        ("/var/lib/dkms/mok.pub is already in the enrollment request\n", signing.PENDING),
        ("/root/mok.der is already in db\n", signing.IN_DB),
        ("/root/mok.der is blocked in dbx\n", signing.BLOCKED),
        ("/root/mok.der is blocked in MokListX\n", signing.BLOCKED),
        ("Failed to open /root/missing.der\n", signing.UNREADABLE),
        ("Not a valid x509 certificate\n", signing.INVALID),
        ("EFI variables are not supported on this system\n", signing.NO_EFI),
        ("", None),
    ],
)
def test_mokutil_test_key_answers(text: str, state: str | None) -> None:
    assert signing.parse_test_key(text) == state


def test_mokutil_text_it_does_not_know_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="mokutil --test-key"):
        signing.parse_test_key("Segmentation fault\n")


def test_modinfo_of_a_dkms_signed_module() -> None:
    found = signing.parse_modinfo(_read("modinfo-camblet-dkms-signed-arm64.txt"))
    assert found.found and found.signed
    assert found.filename == "/lib/modules/6.1.0-15-cloud-arm64/updates/dkms/camblet.ko"
    assert found.version == "0.3.0"
    assert found.signer == "DKMS module signing key"
    assert found.sig_key == "66:F2:5E:BF:BF:18:04:09:64:2D:DB:5D:E9:AA:DC:95:E5:2E:68:9B"
    assert found.sig_hashalgo == "sha256"
    tabbed = signing.parse_modinfo(_read("modinfo-mlx5-dkms-signed-debian12.txt"))
    assert tabbed.sig_key is not None and tabbed.sig_key.startswith("3F:5E:C0")
    assert signing.sig_key_serial(tabbed.sig_key) == "3F5EC05FE6498AF54AC7DA1B553C50189FE070C9"


def test_modinfo_of_an_unsigned_or_missing_module() -> None:
    unsigned = signing.parse_modinfo(_read("modinfo-unsigned-variant.txt"))
    assert unsigned.found and not unsigned.signed
    trimmed = signing.parse_modinfo(_read("modinfo-r8125-dkms-pve.txt"))  # signer, no sig_key
    assert trimmed.signed and trimmed.sig_key is None
    assert signing.parse_modinfo(_read("modinfo-not-found.txt")) == signing.ModuleSignature(False)
    assert signing.parse_modinfo("") == signing.ModuleSignature(False)
    with pytest.raises(ParseError, match="modinfo"):
        signing.parse_modinfo("bash: modinfo: command not found\n")


def test_debian_framework_conf_sets_nothing_and_a_drop_in_is_read_last() -> None:
    debian = _read("dkms-framework.conf-debian12")
    assert signing.parse_framework_conf(debian) == signing.DkmsSigning()
    ours = signing.framework_conf_text("/etc/gpuhost/mok.key", "/etc/gpuhost/mok.der")
    both = signing.parse_framework_conf(debian + "\n" + ours)
    assert (both.key, both.cert, both.configured) == (
        "/etc/gpuhost/mok.key",
        "/etc/gpuhost/mok.der",
        True,
    )
    shell = "mok_signing_key=/k1\nmok_signing_key='/k2' # later wins\nexport mok_certificate=/c\n"
    read = signing.parse_framework_conf(shell)
    assert (read.key, read.cert) == ("/k2", "/c")


def test_certificate_serial_matches_modinfo_sig_key() -> None:
    serial = 0x3F5EC05FE6498AF54AC7DA1B553C50189FE070C9  # the mlx5 capture's sig_key
    text = base64.encodebytes(certificate(serial)).decode()
    cert = signing.parse_certificate_b64(text, "/var/lib/dkms/mok.pub")
    assert cert == signing.Certificate(serial="3F5EC05FE6498AF54AC7DA1B553C50189FE070C9", der=True)
    module = signing.parse_modinfo(_read("modinfo-mlx5-dkms-signed-debian12.txt"))
    assert signing.signed_by(module, cert) is True
    other = signing.parse_modinfo(_read("modinfo-camblet-dkms-signed-arm64.txt"))
    assert signing.signed_by(other, cert) is False
    unsigned = signing.parse_modinfo(_read("modinfo-unsigned-variant.txt"))
    assert signing.signed_by(unsigned, cert) is False
    assert signing.signed_by(signing.ModuleSignature(False), cert) is None
    # a serial whose first byte has the high bit set is stored with a leading 00 in DER
    high = signing.parse_certificate_b64(base64.b64encode(certificate(0x80FF)).decode(), "c")
    assert high is not None and high.serial == "80FF"
    assert signing.sig_key_serial("00:80:FF") == "80FF"


def test_pem_certificate_is_read_and_said_to_be_pem() -> None:
    text = base64.b64encode(certificate(12345, pem=True)).decode()
    cert = signing.parse_certificate_b64(text, "/root/mok.pem")
    assert cert == signing.Certificate(serial="3039", der=False)


def test_not_a_certificate_names_the_file() -> None:
    assert signing.parse_certificate_b64("", "/var/lib/dkms/mok.pub") is None
    with pytest.raises(ParseError, match="/root/key.der: not an X.509 certificate"):
        signing.parse_certificate_b64(base64.b64encode(b"hello world!").decode(), "/root/key.der")
    with pytest.raises(ParseError, match="/root/key.der: expected base64"):
        signing.parse_certificate_b64("base64: /root/key.der: No such file", "/root/key.der")
