"""Module signing for Secure Boot: DKMS's signing drop-in, the MOK enrollment request, and the
built module's signature checked (facts: ``gpuhost.facts.signing.ModuleSigning``)."""

from __future__ import annotations

import shlex
from collections.abc import Generator

from pyinfra import host
from pyinfra.api import HiddenValue, OperationError, StringCommand, operation
from pyinfra.facts.files import Link

from gpuhost.facts.files import SmallFile
from gpuhost.facts.signing import ModuleSigning
from gpuhost.operations._facts import fact
from gpuhost.operations._files import put_text
from gpuhost.parsers import signing

DKMS_DROPIN = "/etc/dkms/framework.conf.d/gpuhost.conf"


@operation()
def dkms_signing(key: str, cert: str) -> Generator:
    """``/etc/dkms/framework.conf.d/gpuhost.conf`` naming the key and certificate DKMS signs the
    modules it builds with (``mok_signing_key``, ``mok_certificate``: DKMS 3's names, read after
    /etc/dkms/framework.conf); written only when it differs.

    + key: path of the private key on the host (or a ``pkcs11:`` URI)
    + cert: path of its DER certificate on the host
    """
    commands = list(put_text(DKMS_DROPIN, signing.framework_conf_text(key, cert)))
    if not commands:
        host.noop(f"{DKMS_DROPIN} names {key}")
    yield from commands


@operation()
def dkms2_sign_tool(key: str, cert: str) -> Generator:
    """DKMS 2 (Ubuntu 22.04's 2.8.7) reads no ``mok_*`` names and no framework.conf.d: its one
    signing hook is ``sign_tool`` in /etc/dkms/framework.conf, a program run for every module
    it builds. This writes that program (``/etc/dkms/gpuhost-sign-tool``, signing with ``key`` and
    ``cert``) and names it there (the ``sign_tool=`` line replaced, else added); nothing when
    both are in place.

    + key: path of the private key on the host (or a ``pkcs11:`` URI)
    + cert: path of its DER certificate on the host
    """
    commands = list(put_text(signing.DKMS2_SIGN_TOOL, signing.sign_tool_text(key, cert), "755"))
    current = fact(SmallFile, path=signing.DKMS2_FRAMEWORK) or []
    line = signing.sign_tool_line()
    setting = [raw.strip() for raw in current if raw.strip().startswith("sign_tool=")]
    if setting != [line]:
        conf = shlex.quote(signing.DKMS2_FRAMEWORK)
        commands.append(StringCommand(
            f"touch {conf} && sed -i '/^[[:space:]]*sign_tool=/d' {conf} && "
            f"echo {shlex.quote(line)} >> {conf}"
        ))
    if not commands:
        host.noop(f"{signing.DKMS2_FRAMEWORK} runs {signing.DKMS2_SIGN_TOOL} ({key})")
    yield from commands


def mok_link_command(path: str, target: str) -> str:
    """``path`` made a symbolic link to ``target``; whatever is there first (Ubuntu's own key or
    certificate, another link) is moved aside to ``path.before-gpuhost`` (a later one gets a time
    stamp too), never deleted."""
    p, t = shlex.quote(path), shlex.quote(target)
    saved = shlex.quote(path + signing.SHIM_MOK_SAVED)
    return (
        f"mkdir -p {shlex.quote(path.rpartition('/')[0])} && "
        f"if [ -e {p} ] || [ -L {p} ]; then s={saved}; "
        f'if [ -e "$s" ] || [ -L "$s" ]; then s="$s.$(date +%Y%m%dT%H%M%S)"; fi; '
        f'mv {p} "$s"; fi && ln -s {t} {p}'
    )


@operation()
def shim_mok_linked(key: str, cert: str) -> Generator:
    """DKMS 2.8's ``sign_build`` signs each module it installs with Ubuntu's
    /var/lib/shim-signed/mok/MOK.priv and MOK.der, after (and over) the ``sign_tool``'s
    signature, whenever kmodsign and shim-signed are there: those two paths are made links to
    ``key`` and ``cert`` (what was there is kept beside them, ``.before-gpuhost``); nothing when
    both already are.

    + key: path of the private key on the host
    + cert: path of its DER certificate on the host
    """
    done = []
    for path, target in signing.shim_mok_links(key, cert).items():
        found = fact(Link, path=path)
        if found and found.get("link_target") == target:
            done.append(path)
            continue
        yield StringCommand(mok_link_command(path, target))
    if len(done) == 2:
        host.noop(f"{signing.SHIM_MOK_DIR}/MOK.priv, MOK.der link to {key}, {cert}")


def import_command(cert: str, password: str) -> StringCommand:
    """``mokutil --import CERT`` answering its two password prompts on stdin (the password
    masked in pyinfra's output), only while ``mokutil --test-key`` says the certificate is not
    enrolled: a request made by an earlier run, or a certificate DKMS had not generated when the
    run was prepared, is decided on the host."""
    quoted = shlex.quote(cert)
    return StringCommand(
        f"if LC_ALL=C mokutil --test-key {quoted} 2>&1 | grep -q ' is not enrolled$'; then "
        "printf '%s\\n%s\\n'",
        HiddenValue(shlex.quote(password)),
        HiddenValue(shlex.quote(password)),
        f"| mokutil --import {quoted}; fi",
    )


@operation()
def enrollment_requested(cert: str, password: str | None = None) -> Generator:
    """Request MOK enrollment of ``cert`` (``mokutil --import`` with the operator's one-time
    password) unless it is enrolled, in the firmware's db, or already requested. The request
    takes effect at the next boot, once confirmed in the MOK manager with that password.

    + cert: the certificate DKMS signs with (DER)
    + password: the one-time password (inventory ``gpuhost_mok_password``); None: nothing is
      requested (provision's guard refused the host if that was needed)
    """
    state = fact(ModuleSigning, key=None, cert=cert).enrollment
    if state in signing.TRUSTED_STATES:
        host.noop(f"{cert} is enrolled ({state})")
        return
    if state == signing.PENDING:
        host.noop(f"{cert}: enrollment requested, to confirm in the MOK manager at the next boot")
        return
    if password is None:
        host.noop(f"{cert}: enrollment {state or 'unknown'}, no gpuhost_mok_password to request it")
        return
    yield import_command(cert, password)


def signature_problem(found: signing.SigningFacts, cert: str) -> str | None:
    """Why the module DKMS built will not load under Secure Boot with ``cert`` (None: it carries
    that certificate's signature and the certificate is enrolled, in db, requested, or its state
    unknown)."""
    module = found.module
    if not module.found:
        return (
            "no nvidia module is installed for the running kernel (modinfo nvidia): check "
            "dkms status and the build log in /var/lib/dkms/nvidia*/*/build/make.log"
        )
    if not module.signed:
        return (
            f"{module.filename} carries no signature: DKMS did not sign it (its sign_file "
            "missing? on Debian it comes with linux-kbuild-*); run dkms install --force again"
        )
    if found.cert is None:
        return f"{cert}: {found.cert_error or 'not readable'}"
    if not found.module_signed_by_cert:
        return (
            f"{module.filename} is signed by {module.signer!r} (key {module.sig_key}), not with "
            f"{cert} (serial {found.cert.serial}): rebuild it so DKMS signs it with that key"
        )
    if found.enrollment in (signing.NOT_ENROLLED, signing.BLOCKED):
        # mokutil was missing when the run was prepared: the guard could not tell
        return (
            f"{module.filename} is signed with {cert}, which mokutil --test-key says is "
            f"{found.enrollment}: the module will not load; set gpuhost_mok_password to request "
            f"its enrollment, or mokutil --import {cert}, reboot, confirm in the MOK manager"
        )
    return None


@operation()
def module_signed(cert: str) -> Generator:
    """Fail the host unless the nvidia module of the running kernel carries ``cert``'s
    signature. Judged in the execute stage only, after the install built the module."""
    if not host.state.is_executing:
        host.noop(f"the module's signature is checked against {cert} after the install")
        return
    found = fact(ModuleSigning, key=None, cert=cert)
    problem = signature_problem(found, cert)
    if problem:
        raise OperationError(problem)
    pending = found.enrollment == signing.PENDING
    host.noop(
        f"{found.module.filename} signed with {cert}"
        + ("; reboot and confirm the enrollment in the MOK manager" if pending else "")
    )
    return
    yield  # pragma: no cover - makes this a generator
