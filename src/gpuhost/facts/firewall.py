"""Facts about gpuhost's nftables table (``inet gpuhost``) and how it persists across reboots.

gpuhost owns exactly one table; every other table on the host is left alone. The live table is
read with ``nft -s -t`` (stateless and terse: without counters or the elements of dynamic sets,
which change with traffic), so comparing it with the listing saved right after the last apply
tells whether someone changed it.
"""

from __future__ import annotations

from typing import TypedDict

from pyinfra.api import FactBase
from typing_extensions import override

from gpuhost.facts.sshd import MARK, split_sections

TABLE_FAMILY = "inet"
TABLE_NAME = "gpuhost"
#: the ruleset file gpuhost applied last (loaded at boot through /etc/nftables.conf)
RULESET_PATH = "/etc/gpuhost/nftables.nft"
NFTABLES_CONF = "/etc/nftables.conf"
STATE_DIR = "/var/lib/gpuhost/firewall"
#: ``nft -s -t list table inet gpuhost`` saved right after the last confirmed apply
APPLIED_LISTING = f"{STATE_DIR}/applied.listing"
INCLUDE_LINE = f'include "{RULESET_PATH}"'

_MISSING = f"{MARK} missing"


class FirewallDict(TypedDict):
    nft_present: bool
    #: content of RULESET_PATH, None when absent
    ruleset_file: str | None
    #: ``nft -s -t list table inet gpuhost``, None when the table does not exist
    live_table: str | None
    #: the listing saved after the last apply, None when absent
    applied_listing: str | None
    #: /etc/nftables.conf includes RULESET_PATH
    conf_includes_ruleset: bool
    conf_present: bool
    #: ``systemctl is-enabled nftables.service`` says enabled
    service_enabled: bool


def _section(sections: dict[str, list[str]], name: str) -> str | None:
    body = sections.get(name)
    if body is None or body == [_MISSING]:
        return None
    return "\n".join(body)


def conf_includes(conf_lines: list[str], include_line: str = INCLUDE_LINE) -> bool:
    """True when an uncommented line of nftables.conf is exactly ``include_line``."""
    return any(line.strip() == include_line for line in conf_lines)


def parse_firewall(lines: list[str]) -> FirewallDict:
    """Parse the output of ``FirewallState``'s command (sections started by ``##GPUHOST``)."""
    sections = split_sections(lines)
    conf = sections.get("conf", [_MISSING])
    enabled = (_section(sections, "enabled") or "").strip()
    return {
        "nft_present": (_section(sections, "nft") or "").strip() == "yes",
        "ruleset_file": _section(sections, "ruleset"),
        "live_table": _section(sections, "live"),
        "applied_listing": _section(sections, "applied"),
        "conf_present": conf != [_MISSING],
        "conf_includes_ruleset": conf != [_MISSING] and conf_includes(conf),
        "service_enabled": enabled == "enabled",
    }


class FirewallState(FactBase[FirewallDict]):
    """State of gpuhost's nftables table, its files and nftables.service:

    .. code:: python

        {"nft_present": True, "ruleset_file": "table inet gpuhost ...", "live_table": "table ...",
         "applied_listing": "table ...", "conf_present": True, "conf_includes_ruleset": True,
         "service_enabled": True}
    """

    @override
    def command(self) -> str:
        def cat(name: str, path: str) -> str:
            return f"echo '{MARK} section {name}'; cat {path} 2>/dev/null || echo '{_MISSING}'"

        return "; ".join(
            [
                f"echo '{MARK} section nft'",
                "if command -v nft >/dev/null 2>&1; then echo yes; else echo no; fi",
                cat("ruleset", RULESET_PATH),
                f"echo '{MARK} section live'",
                f"nft -s -t list table {TABLE_FAMILY} {TABLE_NAME} 2>/dev/null "
                f"|| echo '{_MISSING}'",
                cat("applied", APPLIED_LISTING),
                cat("conf", NFTABLES_CONF),
                f"echo '{MARK} section enabled'",
                "systemctl is-enabled nftables.service 2>/dev/null || true",
            ]
        )

    @override
    def process(self, output: list[str]) -> FirewallDict:
        return parse_firewall(output)
