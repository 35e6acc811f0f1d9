"""Secure Boot, done: DKMS signs the NVIDIA module with a key whose certificate is enrolled in
MOK, checked before any package is touched and after the install.

Inventory data (docs/inventory.md): ``gpuhost_module_signing_key`` + ``gpuhost_module_signing_cert``
(paths on the host: the key never leaves it) or, without them, the key DKMS generates itself
(``/var/lib/dkms/mok.key``, ``mok.pub``); ``gpuhost_mok_password``, the one-time password with
which an operator confirms an enrollment request in the MOK manager at the next boot.

:func:`signing_problem` is the guard (pure): one line, or None. :func:`configure_signing` and
:func:`verify_signing` orchestrate the operations of ``gpuhost.operations.signing``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pyinfra import host
from pyinfra.api import deploy

from gpuhost.errors import DeployError
from gpuhost.facts.host_facts import SecureBoot
from gpuhost.facts.kernel import SecureBootState
from gpuhost.facts.signing import DkmsVersion, ModuleSigning
from gpuhost.operations import packages
from gpuhost.operations import signing as signing_ops
from gpuhost.operations._facts import fact
from gpuhost.parsers import signing

KEY = "gpuhost_module_signing_key"
CERT = "gpuhost_module_signing_cert"
PASSWORD = "gpuhost_mok_password"
NO_KEY = (
    "Secure Boot is enabled: the DKMS-built NVIDIA module will not load unless it is signed with "
    "a key enrolled in MOK; set {key} and {cert} (paths on the host of a key and its DER "
    "certificate, enrolled or to enroll), or {password} (a one-time password to enroll the key "
    "DKMS generates), or disable Secure Boot"
)


DKMS2_PKCS11 = (
    "{key}: DKMS 2.8 (Ubuntu 22.04) signs each module it installs again with the key file "
    "/var/lib/shim-signed/mok/MOK.priv (its sign_build), which a pkcs11: URI cannot be; give "
    "{key} and {cert} as files on the host"
)


@dataclass(frozen=True)
class SigningPlan:
    """What provision does for module signing on one host: the key and certificate DKMS signs
    with (``key`` None: DKMS's own), whether to write DKMS's drop-in, request enrollment, check
    the module after the install."""

    key: str | None
    cert: str
    secure_boot: bool
    password: str | None = None


def plan_for(data: dict[str, Any], secure_boot: SecureBoot) -> SigningPlan | None:
    """The host's signing plan from its inventory data; None when there is nothing to do
    (Secure Boot not known to be on and no key given)."""
    key, cert = data.get(KEY), data.get(CERT)
    if not secure_boot.enabled and not key:
        return None
    return SigningPlan(
        key=key or None,
        cert=cert or signing.DKMS_DEFAULT_CERT,
        secure_boot=bool(secure_boot.enabled),
        password=data.get(PASSWORD) or None,
    )


def _file_problems(plan: SigningPlan, found: signing.SigningFacts) -> list[str]:
    problems = []
    if plan.key and not plan.key.startswith("pkcs11:") and not found.key_readable:
        problems.append(f"{KEY}: {plan.key} is missing or not readable on the host")
    if plan.key and found.cert is None:
        why = found.cert_error or f"{plan.cert}: no such file or not readable"
        problems.append(f"{CERT}: {why}")
    elif found.cert is not None and not found.cert.der:
        problems.append(
            f"{CERT}: {plan.cert} is PEM but mokutil needs DER; expected a DER certificate "
            f"(openssl x509 -in {plan.cert} -outform DER -out {plan.cert}.der)"
        )
    return problems


def signing_problem(plan: SigningPlan | None, found: signing.SigningFacts) -> str | None:
    """Why provision must not touch this host (one line), or None: the given key or certificate
    missing or unreadable; on a Secure Boot host, a certificate that is not enrolled (or
    blocked) with no ``gpuhost_mok_password`` to request its enrollment, or no key and no
    password at all (DKMS's own key not enrolled)."""
    if plan is None:
        return None
    problems = _file_problems(plan, found)
    if problems:
        return "; ".join(problems)
    if not plan.secure_boot:
        return None
    if found.enrollment == signing.BLOCKED:
        return f"{plan.cert} is blocked (dbx or MokListX): modules it signs never load"
    if found.enrollment in (*signing.TRUSTED_STATES, signing.PENDING) or plan.password:
        return None
    if plan.key is None:
        return NO_KEY.format(key=KEY, cert=CERT, password=PASSWORD)
    if found.enrollment == signing.NOT_ENROLLED:
        return (
            f"Secure Boot is enabled and {plan.cert} is not enrolled in MOK (mokutil "
            "--test-key): the module it signs will not load; set "
            f"{PASSWORD} to request its enrollment (confirmed in the MOK manager at the next "
            f"boot), or enroll it yourself: mokutil --import {plan.cert}, reboot, confirm"
        )
    return None  # mokutil missing or no EFI variables: installed, then checked after


Reader = Callable[[str | None, str | None], signing.SigningFacts]


def judged(
    data: dict[str, Any], secure_boot: SecureBoot, read: Reader
) -> tuple[SigningPlan | None, str | None]:
    """(the host's signing plan, why the host must not be touched or None), the signing facts
    read with ``read(key, cert)`` (``cert`` None: the one DKMS is configured with, which then
    becomes the plan's): provision's guard and ``gpuhost upgrade``'s preflight."""
    plan = plan_for(data, secure_boot)
    if plan is None:
        return None, None
    found = read(plan.key, data.get(CERT) or None)
    if plan.key is None and found.cert_path:
        plan = replace(plan, cert=found.cert_path)
    return plan, signing_problem(plan, found)


def checked_plan(name: str, data: dict[str, Any]) -> SigningPlan | None:
    """The current host's signing plan, its key, certificate and enrollment read from the host;
    DeployError, before any change, when :func:`signing_problem` finds one."""

    def read(key: str | None, cert: str | None) -> signing.SigningFacts:
        return fact(ModuleSigning, key=key, cert=cert)

    plan, problem = judged(data, host.get_fact(SecureBootState), read)
    if problem:
        raise DeployError(name, problem)
    return plan


def dkms_settings(key: str, release: signing.DkmsRelease) -> str:
    """Where this host's DKMS takes a signing key from: "dkms3" (framework.conf.d's
    ``mok_signing_key``/``mok_certificate``; also when the release is not known, as before),
    "dkms2" (``sign_tool`` in framework.conf: DKMS 2.8, Ubuntu 22.04), or "ubuntu-mok" (DKMS 2
    with Ubuntu's own key, which its sign_build signs with already: nothing to write)."""
    if release.major is None or release.major >= 3:
        return "dkms3"
    return "ubuntu-mok" if key == signing.UBUNTU_MOK_KEY else "dkms2"


@deploy("Module signing for Secure Boot")
def configure_signing(plan: SigningPlan) -> None:
    """Before the driver: DKMS told which key to sign with (when one is given), in the way the
    host's DKMS release reads it, and mokutil on a Secure Boot host, so the module DKMS builds
    during the install is signed."""
    if plan.key is not None:
        release = host.get_fact(DkmsVersion)
        how = dkms_settings(plan.key, release)
        if how == "dkms3":
            signing_ops.dkms_signing(
                name=f"DKMS signs modules with {plan.key}", key=plan.key, cert=plan.cert
            )
        elif how == "dkms2":
            if plan.key.startswith("pkcs11:"):
                # its sign_build signs with a key file path (kmodsign), which no link can make
                raise DeployError(host.name, DKMS2_PKCS11.format(key=KEY, cert=CERT))
            # DKMS 2 reads its own framework.conf only: DKMS first, so the file is the package's
            packages.present(
                name="DKMS (its framework.conf names the sign tool)", packages=["dkms"]
            )
            signing_ops.dkms2_sign_tool(
                name=f"DKMS {release.installed or release.candidate} signs modules with "
                f"{plan.key}", key=plan.key, cert=plan.cert,
            )
            # its sign_build then signs the installed copy again with these paths (Ubuntu)
            signing_ops.shim_mok_linked(
                name=f"DKMS {release.installed or release.candidate}'s sign_build signs with "
                f"{plan.key}", key=plan.key, cert=plan.cert,
            )
    if plan.secure_boot:
        packages.present(name="mokutil (MOK enrollment)", packages=["mokutil"])


@deploy("Module signature checked for Secure Boot")
def verify_signing(plan: SigningPlan) -> None:
    """After the driver: the certificate's enrollment requested where needed (one-time
    password), then the module checked to carry the certificate's signature."""
    if not plan.secure_boot:
        return
    signing_ops.enrollment_requested(
        name=f"MOK enrollment of {plan.cert}", cert=plan.cert, password=plan.password
    )
    signing_ops.module_signed(name=f"nvidia module signed with {plan.cert}", cert=plan.cert)
