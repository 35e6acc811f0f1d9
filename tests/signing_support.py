"""A self-signed X.509 certificate with a chosen serial number, built at test time (what
``openssl req -x509`` makes for DKMS), for the module signing tests."""

from __future__ import annotations

import datetime

import pytest


def certificate(serial: int, pem: bool = False) -> bytes:
    """DER (or PEM) bytes of a certificate named like DKMS's own, with ``serial``."""
    x509 = pytest.importorskip("cryptography.x509", reason="cryptography builds the test cert")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "DKMS module signing key")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(serial)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    encoding = serialization.Encoding.PEM if pem else serialization.Encoding.DER
    return cert.public_bytes(encoding)
