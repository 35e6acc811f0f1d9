"""Secure Boot module signing (``kernel.module-signature``): on a Secure Boot host the nvidia
module DKMS built must carry a signature whose key is enrolled in MOK (or the firmware's db),
else it will not load (``kernel.module-unsigned``, ``kernel.module-key-not-enrolled``,
``kernel.module-key-pending``)."""

from __future__ import annotations

from gpuhost.audit.rules.context import AuditContext, ok_result, one_finding, skip_result
from gpuhost.findings import ERROR, RuleResult
from gpuhost.parsers import signing

RULE = "kernel.module-signature"
REBUILD = (
    "rebuild the module so DKMS signs it (dpkg-reconfigure nvidia-kernel-dkms, or "
    "dkms install --force nvidia/VERSION)"
)
ENROLL = (
    "mokutil --import {cert} (it asks for a one-time password), reboot, and in the blue MOK "
    "manager screen choose Enroll MOK, confirm, type that password, reboot"
)


def _unsigned(module: signing.ModuleSignature, sb: signing.SigningFacts) -> RuleResult:
    return one_finding(
        RULE,
        "kernel.module-unsigned",
        ERROR,
        f"Secure Boot is on and the nvidia module {module.filename or ''} carries no "
        "signature: the kernel refuses to load it",
        found=f"unsigned module {module.filename or 'nvidia'}",
        expected="the module signed by a key enrolled in MOK",
        fix="configure DKMS to sign (inventory gpuhost_module_signing_key and "
        "gpuhost_module_signing_cert, or gpuhost_mok_password to enroll DKMS's own key) and "
        f"run gpuhost provision; by hand: set mok_signing_key/mok_certificate in "
        f"/etc/dkms/framework.conf.d/ (now: {sb.dkms.cert}), then {REBUILD}",
    )


def _enrollment(module: signing.ModuleSignature, sb: signing.SigningFacts) -> RuleResult:
    """The module is signed with DKMS's certificate: is that certificate enrolled?"""
    cert = sb.cert_path or sb.dkms.cert
    if sb.enrollment in signing.TRUSTED_STATES:
        return ok_result(RULE)
    if sb.enrollment == signing.PENDING:
        return one_finding(
            RULE,
            "kernel.module-key-pending",
            ERROR,
            f"the nvidia module is signed with {cert}, whose enrollment is requested but not "
            "confirmed: the module loads only after a reboot through the MOK manager",
            found=f"{cert} in the MOK enrollment request (MokNew)",
            expected=f"{cert} enrolled in MOK",
            fix="reboot, and in the blue MOK manager screen choose Enroll MOK, confirm and type "
            "the one-time password given to mokutil --import (gpuhost_mok_password)",
        )
    if sb.enrollment in (signing.NOT_ENROLLED, signing.BLOCKED):
        said = "is blocked (dbx or MokListX)" if sb.enrollment == signing.BLOCKED else "is not"
        return one_finding(
            RULE,
            "kernel.module-key-not-enrolled",
            ERROR,
            f"the nvidia module is signed with {cert}, which {said} enrolled in MOK: the "
            "kernel refuses to load it under Secure Boot",
            found=f"module signed by {cert} ({module.signer}); mokutil --test-key: {sb.enrollment}",
            expected=f"{cert} enrolled in MOK",
            fix=ENROLL.format(cert=cert),
        )
    return skip_result(
        RULE, f"mokutil is not installed: whether {cert} is enrolled was not checked"
    )


def check_module_signature(ctx: AuditContext) -> RuleResult:
    facts = ctx.facts
    if not facts.secure_boot.enabled:
        return skip_result(RULE, "Secure Boot is not enabled")
    sb = facts.module_signing
    if not sb.read:
        return skip_result(RULE, "the module signing facts were not read")
    module = sb.module
    if not module.found:
        return skip_result(RULE, "no nvidia module is installed for the running kernel")
    if not module.signed:
        return _unsigned(module, sb)
    if sb.module_signed_by_cert:
        return _enrollment(module, sb)
    if facts.driver.loaded_module is not None:
        return ok_result(RULE)  # the kernel accepted its signature
    cert = sb.cert_path or sb.dkms.cert
    return one_finding(
        RULE,
        "kernel.module-key-not-enrolled",
        ERROR,
        f"Secure Boot is on, the nvidia module is not loaded and it is signed by "
        f"{module.signer!r} (key {module.sig_key}), not with DKMS's certificate {cert}: its "
        "key is not one the kernel trusts",
        found=f"module signed by {module.signer!r} (key {module.sig_key}), not loaded",
        expected=f"the module signed with {cert}, enrolled in MOK",
        fix=f"{REBUILD} so it is signed with {cert}, and enroll that certificate: "
        + ENROLL.format(cert=cert),
    )
