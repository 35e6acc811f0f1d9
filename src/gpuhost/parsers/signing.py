"""Parse what tells whether a DKMS-built module will load under Secure Boot: ``mokutil
--test-key CERT``, ``modinfo``'s signature fields, DKMS's framework configuration and the
certificate's serial number (pure: text in, typed data out).

mokutil's wording is its source's (github.com/lcp/mokutil, src/mokutil.c ``test_key`` and
``print_skip_message``, read at commit 9ae73db): ``<file> is not enrolled``, ``<file> is already
enrolled``, ``<file> is already in the enrollment request``, ``<file> is already in db``,
``<file> is blocked in dbx`` / ``in MokListX``, ``Failed to open <file>``, ``Not a valid x509
certificate``, ``EFI variables are not supported on this system``. Its exit status changed
between releases (0.7 returns 1 for "not enrolled", older ones 0), so only the text is read.

A module signed by ``sign-file`` (DKMS) carries a PKCS#7 signature naming the signing
certificate by issuer and serial number; ``modinfo`` prints the issuer's CN as ``signer`` and the
serial as ``sig_key`` (``66:F2:5E:...``). The certificate matches when its serial is that number.
"""

from __future__ import annotations

import base64
import binascii
import re
import shlex
from dataclasses import dataclass

from gpuhost.errors import ParseError
from gpuhost.parsers._common import first_line, require_text
from gpuhost.parsers.marked import split_marked
from gpuhost.parsers.smi_model import _ToDict

# mokutil --test-key's answers -> enrollment state
ENROLLED = "enrolled"  # in MokListRT: shim hands it to the kernel at boot
IN_DB = "in-db"  # in the firmware's db: trusted without MOK
PENDING = "pending"  # in MokNew: enrolled at the next boot once confirmed in MOK manager
NOT_ENROLLED = "not-enrolled"
BLOCKED = "blocked"  # in dbx or MokListX: never trusted
NO_EFI = "no-efi"  # no EFI variables (legacy boot, container)
UNREADABLE = "unreadable"  # the file cannot be opened
INVALID = "invalid-cert"  # not a DER X.509 certificate
TRUSTED_STATES = (ENROLLED, IN_DB)
_TEST_KEY_RULES = (
    (re.compile(r" is already enrolled$"), ENROLLED),
    (re.compile(r" is already in db$"), IN_DB),
    (re.compile(r" is already in the enrollment request$"), PENDING),
    (re.compile(r" is not enrolled$"), NOT_ENROLLED),
    (re.compile(r" is blocked in (dbx|MokListX)$"), BLOCKED),
    (re.compile(r"^Failed to (open|read) "), UNREADABLE),
    (re.compile(r"^Not a valid x509 certificate$"), INVALID),
    (re.compile(r"^EFI variables are not supported on this system$"), NO_EFI),
)
TEST_KEY_EXPECTED = "mokutil --test-key output ('FILE is not enrolled' / 'is already enrolled')"

MODINFO_FIELD_RE = re.compile(r"^(?P<key>[a-z_]+):\s*(?P<value>.*?)\s*$")
MODINFO_KEYS = frozenset({"filename", "name", "vermagic", "srcversion", "license", "signer"})
MODINFO_NOT_FOUND_RE = re.compile(r"^modinfo: ERROR: Module (?P<name>\S+) not found\.?$")
# DKMS sources its framework files as shell: NAME=value, NAME="value", NAME='value'
CONF_RE = re.compile(
    r"""^\s*(?:export\s+)?(?P<key>mok_signing_key|mok_certificate|sign_file)="""
    r"""(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<bare>[^\s#;]*))\s*(?:[#;].*)?$"""
)
DKMS_DEFAULT_KEY = "/var/lib/dkms/mok.key"
DKMS_DEFAULT_CERT = "/var/lib/dkms/mok.pub"


def parse_test_key(text: str) -> str | None:
    """``mokutil --test-key FILE`` (stdout and stderr together) → one of the states above;
    None when mokutil printed nothing (not installed). Other text is a ParseError."""
    text = require_text(text, TEST_KEY_EXPECTED)
    for line in (raw.strip() for raw in text.splitlines()):
        for pattern, state in _TEST_KEY_RULES:
            if line and pattern.search(line):
                return state
    if not text.strip():
        return None
    raise ParseError(f"expected {TEST_KEY_EXPECTED}, found: {first_line(text)!r}")


@dataclass(frozen=True)
class ModuleSignature(_ToDict):
    """``modinfo MODULE``'s file and signature fields; ``found`` False when modinfo found no
    such module (not built for this kernel); ``signer``/``sig_key`` None: unsigned."""

    found: bool
    filename: str | None = None
    version: str | None = None
    signer: str | None = None
    sig_key: str | None = None
    sig_hashalgo: str | None = None

    @property
    def signed(self) -> bool:
        return bool(self.signer or self.sig_key)


def parse_modinfo(text: str) -> ModuleSignature:
    """``modinfo nvidia`` (whole, or its ``filename``/``version``/``sig*``/``signer`` lines) →
    ModuleSignature. Continuation lines (the signature bytes) are ignored; empty output or
    ``modinfo: ERROR: Module nvidia not found.`` → ``found=False``."""
    text = require_text(text, "modinfo output ('filename: /lib/modules/...')")
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if MODINFO_NOT_FOUND_RE.match(line.strip()):
            return ModuleSignature(found=False)
        match = MODINFO_FIELD_RE.match(line)
        if match and not line[:1].isspace():
            fields.setdefault(match["key"], match["value"])
    if not fields and not text.strip():
        return ModuleSignature(found=False)
    if not MODINFO_KEYS & set(fields):
        raise ParseError(f"expected modinfo output ('filename: ...'), found: {first_line(text)!r}")
    return ModuleSignature(
        found=True,
        filename=fields.get("filename") or None,
        version=fields.get("version") or None,
        signer=fields.get("signer") or None,
        sig_key=fields.get("sig_key") or None,
        sig_hashalgo=fields.get("sig_hashalgo") or None,
    )


@dataclass(frozen=True)
class DkmsSigning(_ToDict):
    """The key and certificate DKMS signs with: the framework files' last ``mok_signing_key`` /
    ``mok_certificate`` (they are sourced in order: framework.conf, then framework.conf.d/*.conf),
    DKMS's defaults where none is set (``configured`` False)."""

    key: str = DKMS_DEFAULT_KEY
    cert: str = DKMS_DEFAULT_CERT
    configured: bool = False
    sign_file: str | None = None


def parse_framework_conf(text: str) -> DkmsSigning:
    """The concatenated DKMS framework files → DkmsSigning (comments and other settings
    ignored)."""
    text = require_text(text, "DKMS framework configuration")
    values: dict[str, str] = {}
    for line in text.splitlines():
        match = CONF_RE.match(line)
        if match:
            value = next(v for v in (match["dq"], match["sq"], match["bare"]) if v is not None)
            values[match["key"]] = value
    key = values.get("mok_signing_key") or None
    cert = values.get("mok_certificate") or None
    return DkmsSigning(
        key=key or DKMS_DEFAULT_KEY,
        cert=cert or DKMS_DEFAULT_CERT,
        configured=bool(key or cert),
        sign_file=values.get("sign_file") or None,
    )


#: Ubuntu's Secure Boot key, made by shim-signed's update-secureboot-policy --new-key: what DKMS
#: signs with on Ubuntu when nothing else is set (dkms 2.8.7 sign_build with kmodsign; dkms
#: 3.0.11 read_framework_conf defaults for "ubuntu*")
UBUNTU_MOK_KEY = "/var/lib/shim-signed/mok/MOK.priv"
UBUNTU_MOK_CERT = "/var/lib/shim-signed/mok/MOK.der"
#: DKMS 2 (Ubuntu 22.04's 2.8.7) sources only this file (no framework.conf.d, no mok_* names)
#: and runs its ``sign_tool`` for every module it builds
DKMS2_FRAMEWORK = "/etc/dkms/framework.conf"
DKMS2_SIGN_TOOL = "/etc/dkms/gpuhost-sign-tool"
#: DKMS 2.8.x's ``sign_build`` (dkms v2.8.7 ``build_module``: after the build, whose ``sign_tool``
#: signed the build directory's copy) signs every ``*.ko`` it keeps for installation again, with
#: ``kmodsign sha512`` and these two fixed paths, whenever kmodsign, this directory and
#: update-secureboot-policy exist (Ubuntu 22.04 with shim-signed); the last signature is the one
#: the kernel checks, so on such a host these paths must be the configured key and certificate
SHIM_MOK_DIR = "/var/lib/shim-signed/mok"
#: suffix of Ubuntu's own key and certificate when gpuhost puts links in their place (kept, never
#: deleted: modules signed with them stay loadable while that certificate stays enrolled)
SHIM_MOK_SAVED = ".before-gpuhost"


def shim_mok_links(key: str, cert: str) -> dict[str, str]:
    """{path DKMS 2's sign_build signs with: what it must link to} for ``key`` and ``cert``."""
    return {UBUNTU_MOK_KEY: key, UBUNTU_MOK_CERT: cert}
DKMS_VERSION_RE = re.compile(r"^dkms-(?P<version>\d+\.\d+(?:\.\d+)*)\s*$")


@dataclass(frozen=True)
class DkmsRelease(_ToDict):
    """The host's DKMS: the installed release (``dkms --version``), else the version apt would
    install (its candidate; DKMS comes with the driver's DKMS package)."""

    installed: str | None = None
    candidate: str | None = None

    @property
    def major(self) -> int | None:
        """DKMS's major version (2 or 3), None when neither is known."""
        version = self.installed or self.candidate
        if not version:
            return None
        head = version.split(":", 1)[-1].split(".", 1)[0]
        return int(head) if head.isdigit() else None


def parse_dkms_release(text: str) -> DkmsRelease:
    """``installed=dkms-2.8.7`` / ``candidate=2.8.7-2ubuntu2.2`` lines (facts.signing.DkmsVersion)
    → DkmsRelease; ``(none)`` or nothing: not known. Other text is a ParseError."""
    installed = candidate = None
    for line in (raw.strip() for raw in text.splitlines()):
        key, _, value = line.partition("=")
        if key == "installed" and value:
            match = DKMS_VERSION_RE.match(value)
            if match is None:
                raise ParseError(
                    f"expected 'dkms-VERSION' from dkms --version, found: {value!r}"
                )
            installed = match["version"]
        elif key == "candidate":
            candidate = value if value and value != "(none)" else None
        elif line:
            raise ParseError(f"expected installed=/candidate= lines, found: {first_line(line)!r}")
    return DkmsRelease(installed=installed, candidate=candidate)


def sign_tool_text(key: str, cert: str) -> str:
    """DKMS 2's ``sign_tool`` (called with the kernel version and the module file, as its
    sample sign_helper.sh): Ubuntu's kmodsign where present, else the kernel's sign-file."""
    k, c = shlex.quote(key), shlex.quote(cert)
    return (
        "#!/bin/sh\n"
        "# Written by gpuhost (inventory gpuhost_module_signing_key/_cert): DKMS 2 runs this for\n"
        "# every module it builds ($1 kernel version, $2 module file); set as sign_tool in\n"
        f"# {DKMS2_FRAMEWORK}.\n"
        "if command -v kmodsign >/dev/null 2>&1; then\n"
        f'  exec kmodsign sha512 {k} {c} "$2"\n'
        "fi\n"
        f'exec /lib/modules/"$1"/build/scripts/sign-file sha512 {k} {c} "$2"\n'
    )


def sign_tool_line() -> str:
    """The framework.conf line naming gpuhost's sign tool (DKMS 2)."""
    return f'sign_tool="{DKMS2_SIGN_TOOL}"'


def framework_conf_text(key: str, cert: str) -> str:
    """The drop-in gpuhost writes (/etc/dkms/framework.conf.d/gpuhost.conf): DKMS's own names,
    read back by :func:`parse_framework_conf` and by DKMS's ``read_framework_conf``."""
    return (
        "# Written by gpuhost (inventory gpuhost_module_signing_key/_cert): DKMS signs the\n"
        "# modules it builds with this key; its certificate must be enrolled in MOK.\n"
        f'mok_signing_key="{key}"\n'
        f'mok_certificate="{cert}"\n'
    )


@dataclass(frozen=True)
class Certificate(_ToDict):
    """What gpuhost reads of a signing certificate: its serial number (hex, upper case, no
    leading zeros) and its encoding (mokutil needs DER)."""

    serial: str
    der: bool


def _der_length(data: bytes, at: int) -> tuple[int, int]:
    """(length, offset of the content) of the DER element whose length byte is at ``at``."""
    first = data[at]
    if first < 0x80:
        return first, at + 1
    count = first & 0x7F
    if count == 0 or count > 4 or at + 1 + count > len(data):
        raise ValueError("bad length")
    return int.from_bytes(data[at + 1 : at + 1 + count], "big"), at + 1 + count


def _serial_of(der: bytes) -> int:
    """The serialNumber of an X.509 certificate in DER (Certificate → tbsCertificate →
    optional [0] version → INTEGER serialNumber)."""
    if len(der) < 8 or der[0] != 0x30:
        raise ValueError("not a DER SEQUENCE")
    _, tbs = _der_length(der, 1)
    if der[tbs] != 0x30:
        raise ValueError("no tbsCertificate")
    _, at = _der_length(der, tbs + 1)
    if der[at] == 0xA0:  # [0] EXPLICIT version
        length, content = _der_length(der, at + 1)
        at = content + length
    if der[at] != 0x02:
        raise ValueError("no serialNumber")
    length, content = _der_length(der, at + 1)
    if length == 0 or content + length > len(der):
        raise ValueError("bad serialNumber")
    return int.from_bytes(der[content : content + length], "big", signed=False)


def parse_certificate_b64(text: str, path: str) -> Certificate | None:
    """``base64 CERT`` (the certificate file, DER or PEM, base64-encoded on the host) →
    Certificate; empty → None (no such file). Not a certificate → ParseError naming ``path``."""
    text = require_text(text, f"base64 of the certificate {path}")
    if not text.strip():
        return None
    try:
        raw = base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ParseError(
            f"{path}: expected base64 of a certificate, found: {first_line(text)!r}"
        ) from exc
    der = True
    if raw.lstrip().startswith(b"-----BEGIN"):
        der = False
        body = b"".join(
            line for line in raw.splitlines() if line.strip() and not line.startswith(b"-----")
        )
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ParseError(f"{path}: PEM file whose body is not base64") from exc
    try:
        serial = _serial_of(raw)
    except (ValueError, IndexError) as exc:
        raise ParseError(f"{path}: not an X.509 certificate ({exc})") from exc
    return Certificate(serial=f"{serial:X}", der=der)


def sig_key_serial(sig_key: str | None) -> str | None:
    """modinfo's ``sig_key`` (``0A:1B:...``) in Certificate.serial's form; None when absent or
    not hexadecimal."""
    if not sig_key:
        return None
    digits = sig_key.replace(":", "").strip()
    try:
        return f"{int(digits, 16):X}"
    except ValueError:
        return None


def signed_by(module: ModuleSignature, cert: Certificate | None) -> bool | None:
    """Is the module signed with ``cert``'s key? None when it cannot be told (no module, no
    certificate, a sig_key that is not a serial number)."""
    if not module.found or cert is None:
        return None
    if not module.signed:
        return False
    serial = sig_key_serial(module.sig_key)
    return None if serial is None else serial == cert.serial


SIGNING_MARK = "##GPUHOST "


@dataclass(frozen=True)
class SigningFacts(_ToDict):
    """What decides whether the NVIDIA module loads under Secure Boot, read in one command
    (``probe.script.module_signing_code``): the DKMS signing configuration, the certificate DKMS
    signs with (or the one the inventory names) and its MOK enrollment, the key's readability,
    and the signature of the module modinfo finds for the running kernel. ``read`` False: the
    command did not run (an older probe, a host without a shell)."""

    read: bool = False
    dkms: DkmsSigning = DkmsSigning()
    cert_path: str | None = None
    cert: Certificate | None = None
    cert_error: str | None = None
    key_path: str | None = None
    key_readable: bool | None = None
    enrollment: str | None = None  # parse_test_key's state; None: mokutil not installed
    module: ModuleSignature = ModuleSignature(False)

    @property
    def module_signed_by_cert(self) -> bool | None:
        return signed_by(self.module, self.cert)


def parse_signing_output(text: str) -> SigningFacts:
    """``module_signing_code``'s output (``##GPUHOST framework|key PATH|cert PATH|test-key|
    modinfo`` parts) → SigningFacts; a part that cannot be read leaves its field unknown and the
    certificate's reason in ``cert_error``."""
    text = require_text(text, "module signing facts")
    parts = {s.name: s for s in split_marked(text.splitlines(), SIGNING_MARK, maxsplit=1)}
    if not parts:
        return SigningFacts()
    conf = parts.get("framework")
    cert_part, key_part = parts.get("cert"), parts.get("key")
    cert_path = cert_part.args[0] if cert_part and cert_part.args else None
    cert, cert_error = None, None
    if cert_part is not None and cert_path:
        try:
            cert = parse_certificate_b64("\n".join(cert_part.lines), cert_path)
        except ParseError as exc:
            cert_error = str(exc)
        if cert is None and cert_error is None:
            cert_error = f"{cert_path}: no such file or not readable"
    test_key = parts.get("test-key")
    try:
        enrollment = parse_test_key("\n".join(test_key.lines)) if test_key else None
    except ParseError:
        enrollment = None
    modinfo = parts.get("modinfo")
    try:
        module = parse_modinfo("\n".join(modinfo.lines)) if modinfo else ModuleSignature(False)
    except ParseError:
        module = ModuleSignature(False)
    return SigningFacts(
        read=True,
        dkms=parse_framework_conf("\n".join(conf.lines)) if conf else DkmsSigning(),
        cert_path=cert_path,
        cert=cert,
        cert_error=cert_error,
        key_path=key_part.args[0] if key_part and key_part.args else None,
        key_readable=(key_part.lines[:1] == ["readable"]) if key_part else None,
        enrollment=enrollment,
        module=module,
    )
