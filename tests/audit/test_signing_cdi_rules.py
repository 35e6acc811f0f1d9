"""kernel.module-signature and container.cdi on probe outputs carrying real captures
(tests/fixtures/secureboot, tests/fixtures/cdi; sources in their SOURCES.md)."""

from __future__ import annotations

import base64
from pathlib import Path

from probe_text import host_with
from signing_support import certificate

from gpuhost.audit.host import AuditSettings, audit_host
from gpuhost.facts.build import host_facts_from_text
from gpuhost.matrix import load_matrix

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SETTINGS = AuditSettings(matrix=load_matrix(), profiles={})
SB_ON = "efi=yes\nmokutil=SecureBoot enabled\n"
DRIVER_PACKAGES = (
    "nvidia-driver\t535.261.03-1\tii \n"
    "libnvidia-ml1\t535.261.03-1\tii \n"
    "nvidia-kernel-dkms\t535.261.03-1\tii \n"
)
NOT_LOADED = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
    "",
    9,
)
# the mlx5 capture's sig_key as a certificate serial; the certificate itself is built here
SERIAL = 0x3F5EC05FE6498AF54AC7DA1B553C50189FE070C9


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def _cert_b64(serial: int) -> str:
    return base64.encodebytes(certificate(serial)).decode()


def _signing(modinfo: str, test_key: str, serial: int = SERIAL) -> str:
    cert = "/var/lib/dkms/mok.pub"
    return (
        f"##GPUHOST framework\n##GPUHOST cert {cert}\n{_cert_b64(serial)}"
        f"##GPUHOST test-key\n{test_key}##GPUHOST modinfo\n{modinfo}"
    )


def _findings(rule_prefix: str, **sections: object) -> list:
    report = audit_host("h", host_facts_from_text(host_with(**sections)), {}, SETTINGS)
    return [f for f in report.findings if f.rule.startswith(rule_prefix)]


def _ids(found: list) -> set[str]:
    return {f.rule for f in found}


def test_secure_boot_host_with_an_unsigned_module() -> None:
    found = _findings(
        "kernel.module",
        secure_boot=SB_ON,
        module_signing=_signing(_fixture("secureboot/modinfo-unsigned-variant.txt"), ""),
    )
    assert _ids(found) == {"kernel.module-unsigned"}
    assert found[0].severity == "error" and "gpuhost_module_signing_key" in (found[0].fix or "")


def test_module_signed_with_the_dkms_certificate_by_enrollment_state() -> None:
    signed = _fixture("secureboot/modinfo-mlx5-dkms-signed-debian12.txt")
    cert = "/var/lib/dkms/mok.pub"
    enrolled = _findings(
        "kernel.module",
        secure_boot=SB_ON,
        module_signing=_signing(signed, f"{cert} is already enrolled\n"),
    )
    assert enrolled == []
    missing = _findings(
        "kernel.module",
        secure_boot=SB_ON,
        module_signing=_signing(signed, f"{cert} is not enrolled\n"),
    )
    assert _ids(missing) == {"kernel.module-key-not-enrolled"}
    assert f"mokutil --import {cert}" in (missing[0].fix or "")
    pending = _findings(
        "kernel.module",
        secure_boot=SB_ON,
        module_signing=_signing(signed, f"{cert} is already in the enrollment request\n"),
    )
    assert _ids(pending) == {"kernel.module-key-pending"}
    # Secure Boot off: nothing to judge
    off = _findings("kernel.module", module_signing=_signing(signed, f"{cert} is not enrolled\n"))
    assert off == []


def test_module_signed_by_another_key_is_an_error_only_when_it_did_not_load() -> None:
    other = _fixture("secureboot/modinfo-camblet-dkms-signed-arm64.txt")
    found = _findings(
        "kernel.module",
        secure_boot=SB_ON,
        dpkg=DRIVER_PACKAGES,
        nvidia_smi=NOT_LOADED,
        module_signing=_signing(other, "/var/lib/dkms/mok.pub is already enrolled\n"),
    )
    assert _ids(found) == {"kernel.module-key-not-enrolled"}
    assert "66:F2:5E" in found[0].message
    loaded = _findings(
        "kernel.module",
        secure_boot=SB_ON,
        proc_driver="NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.261.03  Wed Jul 16 2025\n",
        module_signing=_signing(other, "/var/lib/dkms/mok.pub is already enrolled\n"),
    )
    assert loaded == []


def test_cdi_spec_for_another_driver_is_stale() -> None:
    spec = _fixture("cdi/nvidia-460.91.03-dgx-a100.yaml")
    found = _findings(
        "container.cdi",
        dpkg=DRIVER_PACKAGES,
        nvidia_smi=NOT_LOADED,
        cdi=f"##GPUHOST cdi /etc/cdi/nvidia.yaml\n{spec}\n##GPUHOST cdi /etc/cdi/x.yaml\n[1\n",
    )
    assert _ids(found) == {"container.cdi-stale", "container.cdi-unreadable"}
    stale = next(f for f in found if f.rule == "container.cdi-stale")
    assert stale.severity == "error" and "460.91.03" in stale.message
    assert stale.fix == "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"
    current = spec.replace("460.91.03", "535.261.03")
    fresh = _findings(
        "container.cdi",
        dpkg=DRIVER_PACKAGES,
        nvidia_smi=NOT_LOADED,
        cdi=f"##GPUHOST cdi /etc/cdi/nvidia.yaml\n{current}\n",
    )
    assert fresh == []
