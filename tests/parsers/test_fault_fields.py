"""The fields the fault judgement reads, on real captures: clock event reasons (newer
"Clocks Event Reasons", older "Clocks Throttle Reasons"), the NVSwitch fabric, the GPU Recovery
Action (XML and -q text), Xid lines, AER counters and nvlink -e."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.errors import ParseError
from gpuhost.parsers.aer import parse_aer_counters
from gpuhost.parsers.nvidia_smi import ClockEvents, Fabric, parse_output
from gpuhost.parsers.smi_misc import parse_nvlink_errors
from gpuhost.parsers.xid import short_bus_id, xid_events

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CAPTURES = FIXTURES / "captures"


def _gpu(relative: str, index: int = 0):
    return parse_output((CAPTURES / relative).read_text(encoding="utf-8")).gpus[index]


IDLE_NOTHING_ELSE = ClockEvents(
    idle=True, sw_power_cap=False, hw_slowdown=False, hw_thermal=False, power_brake=False,
    sw_thermal=False,
)


@pytest.mark.parametrize(
    ("relative", "events", "fabric"),
    [
        (
            "nvidia-smi-q-text/thamada-gls__H100SXMx8__565.57.01.txt",
            IDLE_NOTHING_ELSE,
            Fabric("Completed", "Success", "0"),
        ),
        (
            "nvidia-smi-q-text/utku__linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__idle.txt",
            IDLE_NOTHING_ELSE,
            Fabric("Completed", "Success", "0"),
        ),
        ("nvidia-smi-q-text/thamada-gls__GH200__550.127.05.txt", IDLE_NOTHING_ELSE, Fabric()),
        (
            "nvidia-smi-xml/telegraf-pr17482__pro-6000-maxq-blackwell-v13.xml",
            ClockEvents(False, False, False, False, False, False),
            Fabric(),  # N/A: no NVSwitch fabric
        ),
        (  # the older <clocks_throttle_reasons>, HW thermal / power brake N/A
            "nvidia-smi-xml/openpai__nvidia_smi_out_of_order.xml",
            ClockEvents(False, False, False, None, None, False),
            Fabric(),
        ),
    ],
)
def test_clock_events_and_fabric(relative, events, fabric):
    gpu = _gpu(relative)
    assert gpu.clock_events == events
    assert gpu.fabric == fabric
    assert gpu.recovery_action is None  # "None" (nothing asked) or not reported


def test_text_recovery_action_other_than_none():
    """A hand-made variant of a real H100 report (590.48.01): the recovery action asked."""
    name = "utku__linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__idle.txt"
    text = CAPTURES / "nvidia-smi-q-text" / name
    changed = text.read_text(encoding="utf-8").replace(
        "GPU Recovery Action                                : None",
        "GPU Recovery Action                                : Reset",
    )
    assert parse_output(changed).gpus[0].recovery_action == "Reset"


def test_xid_lines_and_bus_ids():
    (event,) = xid_events(
        (FIXTURES / "faults" / "xid-79__pop-os-3363__syslog.txt").read_text(encoding="utf-8")
    )
    assert (event.code, event.bus_id) == (79, "0000:01:00")
    assert short_bus_id("00000000:01:00.0") == short_bus_id(event.bus_id) == "0000:01:00"
    assert short_bus_id("3B:00.0") == "0000:3b:00"
    recovery = xid_events(
        "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to "
        "0x2 (OS Reboot)\n"
    )
    assert (recovery[0].recovery_code, recovery[0].recovery_text) == (2, "OS Reboot")
    with pytest.raises(ParseError):
        xid_events("no kernel log here\n")


def test_aer_and_nvlink_errors_refuse_other_text():
    assert parse_aer_counters("").counts == {}
    assert parse_aer_counters("RxErr 0\nBadTLP 3\nTOTAL_ERR_COR 3\n").total == 3
    with pytest.raises(ParseError, match="AER counter file"):
        parse_aer_counters("cat: aer_dev_fatal: No such file or directory\n")
    assert parse_nvlink_errors("") == []
    with pytest.raises(ParseError, match="nvlink -e"):
        parse_nvlink_errors("Link 0: Replay Errors: 0\n")
