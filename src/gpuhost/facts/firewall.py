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

from gpuhost.parsers.marked import MISSING, SECTION, cat_section, section_text, split_sections

TABLE_FAMILY = "inet"
TABLE_NAME = "gpuhost"
#: the ruleset file gpuhost applied last (loaded at boot through /etc/nftables.conf)
RULESET_PATH = "/etc/gpuhost/nftables.nft"
NFTABLES_CONF = "/etc/nftables.conf"
STATE_DIR = "/var/lib/gpuhost/firewall"
#: ``nft -s -t list table inet gpuhost`` saved right after the last confirmed apply
APPLIED_LISTING = f"{STATE_DIR}/applied.listing"
INCLUDE_LINE = f'include "{RULESET_PATH}"'


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


def conf_includes(conf_lines: list[str], include_line: str = INCLUDE_LINE) -> bool:
    """True when an uncommented line of nftables.conf is exactly ``include_line``."""
    return any(line.strip() == include_line for line in conf_lines)


def parse_firewall(lines: list[str]) -> FirewallDict:
    """Parse the output of ``FirewallState``'s command (sections started by ``##GPUHOST``)."""
    sections = split_sections(lines)
    conf = sections.get("conf", [MISSING])
    enabled = (section_text(sections, "enabled") or "").strip()
    return {
        "nft_present": (section_text(sections, "nft") or "").strip() == "yes",
        "ruleset_file": section_text(sections, "ruleset"),
        "live_table": section_text(sections, "live"),
        "applied_listing": section_text(sections, "applied"),
        "conf_present": conf != [MISSING],
        "conf_includes_ruleset": conf != [MISSING] and conf_includes(conf),
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
        return "; ".join(
            [
                f"echo '{SECTION}nft'",
                "if command -v nft >/dev/null 2>&1; then echo yes; else echo no; fi",
                cat_section("ruleset", RULESET_PATH),
                f"echo '{SECTION}live'",
                f"nft -s -t list table {TABLE_FAMILY} {TABLE_NAME} 2>/dev/null || echo '{MISSING}'",
                cat_section("applied", APPLIED_LISTING),
                cat_section("conf", NFTABLES_CONF),
                f"echo '{SECTION}enabled'",
                "systemctl is-enabled nftables.service 2>/dev/null || true",
            ]
        )

    @override
    def process(self, output: list[str]) -> FirewallDict:
        return parse_firewall(output)

    @staticmethod
    @override
    def default() -> FirewallDict:
        """What an empty answer means (pyinfra gives ``default()`` for no output): nothing of
        gpuhost's firewall is there, never None (a traceback in every operation reading it)."""
        return parse_firewall([])
