"""``gpuhost.parsers.systemd``: one ``systemctl show`` for several units."""

from __future__ import annotations

import pytest

from gpuhost.errors import ParseError
from gpuhost.facts.probe_parsers import parse_services
from gpuhost.parsers.systemd import UnitState, parse_systemctl_show, show_command
from gpuhost.probe.script import SERVICE_UNITS, STATIC_SECTIONS

# Real output of show_command(["nvidia-persistenced.service", "nvidia-fabricmanager.service",
# "ssh.service"]) on a lab host (Debian 12, systemd 252) after `apt-get install
# --no-install-recommends nvidia-persistenced` (the daemon fails without a GPU).
CAPTURE = """\
Id=nvidia-persistenced.service
LoadState=loaded
ActiveState=failed
SubState=failed
UnitFileState=enabled

Id=nvidia-fabricmanager.service
LoadState=not-found
ActiveState=inactive
SubState=dead
UnitFileState=

Id=ssh.service
LoadState=loaded
ActiveState=active
SubState=running
UnitFileState=enabled
"""


def test_one_block_per_unit() -> None:
    states = parse_systemctl_show(CAPTURE)
    assert list(states) == [
        "nvidia-persistenced.service",
        "nvidia-fabricmanager.service",
        "ssh.service",
    ]
    assert states["nvidia-persistenced.service"] == UnitState(
        "nvidia-persistenced.service", "loaded", "failed", "failed", "enabled"
    )
    assert states["nvidia-fabricmanager.service"] == UnitState(
        "nvidia-fabricmanager.service", "not-found", "inactive", "dead", None
    )
    assert states["ssh.service"].active == "active"


def test_property_order_does_not_matter() -> None:
    text = "ActiveState=active\nUnitFileState=enabled\nId=docker.service\n"
    assert parse_systemctl_show(text)["docker.service"].unit_file == "enabled"


def test_no_systemd_means_no_units() -> None:
    assert parse_systemctl_show("") == {}


@pytest.mark.parametrize(
    "text", ["Id=a.service\nthis is not a property\n", "LoadState=loaded\nActiveState=active\n"]
)
def test_malformed_output_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="systemctl show"):
        parse_systemctl_show(text)


def test_the_probe_reads_every_service_with_one_systemctl() -> None:
    (section,) = [s for s in STATIC_SECTIONS if s.name == "services"]
    assert section.code.count("systemctl") == 2  # `_gh_need systemctl` and the one call
    assert section.code.endswith(show_command(SERVICE_UNITS))
    assert show_command(["a.service", "b c"]) == (
        "systemctl show --no-pager -p Id,LoadState,ActiveState,SubState,UnitFileState "
        "a.service 'b c'"
    )


def test_audit_service_states_keep_the_is_active_and_is_enabled_words() -> None:
    services = parse_services(CAPTURE)
    assert services["nvidia-persistenced"].active == "failed"
    assert services["nvidia-persistenced"].enabled == "enabled"
    # a unit that does not exist: inactive, no enablement (what is-enabled printed: nothing)
    assert services["nvidia-fabricmanager"].enabled is None
