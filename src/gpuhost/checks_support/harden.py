"""Which hardening checks apply to a host, from its inventory data (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuhost.firewall_roles import firewall_requested

HARDEN_KEY = "gpuhost_harden"
FIREWALL_KEY = "gpuhost_firewall_enabled"


def ssh_skip_reason(data: Mapping[str, Any]) -> str | None:
    """Why the SSH checks do not apply to this host, or None when they do.

    A host whose data says ``gpuhost_harden: false`` is deliberately not hardened by gpuhost."""
    if data.get(HARDEN_KEY) is False:
        return f"{HARDEN_KEY} is false for this host: SSH hardening is not managed by gpuhost"
    return None


def firewall_skip_reason(data: Mapping[str, Any]) -> str | None:
    """Why the firewall checks do not apply to this host, or None when they do."""
    reason = ssh_skip_reason(data)
    if reason is not None:
        return reason.replace("SSH hardening", "the firewall")
    if data.get(FIREWALL_KEY) is False:
        return f"{FIREWALL_KEY} is false for this host: no gpuhost firewall to check"
    if not firewall_requested(data):
        return (
            "no gpuhost firewall asked for this host (no gpuhost_firewall_roles, allowed ports "
            f"or SSH sources, {FIREWALL_KEY} unset): gpuhost does not load one"
        )
    return None
