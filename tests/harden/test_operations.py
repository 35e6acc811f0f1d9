"""Fixture tests of the harden operations: given facts, the exact commands (or noop) they yield.

Each ``operations/<module>.<operation>/<case>.json`` holds ``args``, ``kwargs``, ``facts`` and
either ``commands`` (+ ``noop_description`` when nothing is to change) or ``exception``.
Commands are pinned so that any change to what runs on hosts shows in review.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuhost.operations import firewall, sshd
from tests.harden.fakehost import run_operation

HERE = Path(__file__).parent / "operations"
OPERATIONS = {
    "sshd.dropin": sshd.dropin,
    "sshd.authorized_keys": sshd.authorized_keys,
    "firewall.ruleset": firewall.ruleset,
    "firewall.persistence": firewall.persistence,
}
CASES = sorted(HERE.glob("*/*.json"))


def test_every_operation_has_a_converged_case():
    folders = {case.parent.name for case in CASES}
    assert folders == set(OPERATIONS)
    for folder in folders:
        converged = [
            json.loads(c.read_text())
            for c in CASES
            if c.parent.name == folder and json.loads(c.read_text()).get("commands") == []
        ]
        assert converged, f"{folder} has no case where nothing changes"
        assert all(c.get("noop_description") for c in converged)


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_operation_fixture(case: Path) -> None:
    fixture = json.loads(case.read_text())
    op = OPERATIONS[case.parent.name]
    if "exception" in fixture:
        with pytest.raises(Exception) as info:
            run_operation(op, fixture["facts"], fixture["args"], fixture["kwargs"])
        assert type(info.value).__name__ == fixture["exception"]["type"]
        assert str(info.value) == fixture["exception"]["message"]
        return
    commands, noops = run_operation(op, fixture["facts"], fixture["args"], fixture["kwargs"])
    want = fixture["commands"]
    assert commands == want, (
        f"GOT:\n{json.dumps(commands, indent=2)}\nWANT:\n{json.dumps(want, indent=2)}"
    )
    assert (noops[0] if noops else None) == fixture.get("noop_description")


def _commands(case: str) -> list:
    fixture = json.loads((HERE / f"{case}.json").read_text())
    return run_operation(
        OPERATIONS[case.split("/")[0]], fixture["facts"], fixture["args"], fixture["kwargs"]
    )[0]


def test_dropin_validates_before_swap_and_arms_timer_before_reload():
    script = next(
        c for c in _commands("sshd.dropin/new_dropin") if isinstance(c, str) and "sshd -t" in c
    )
    order = [
        script.index("sshd -t -f"),
        script.index("systemd-run"),
        script.index("mv -f /etc/ssh/sshd_config.d/00-gpuhost.conf.gpuhost-new"),
        script.index("systemctl reload ssh.service"),
    ]
    assert order == sorted(order)
    assert "restart" not in script


def test_dropin_ends_with_a_fresh_connection_check_that_reverts():
    last = _commands("sshd.dropin/new_dropin")[-1]
    assert last["function"] == "confirm_fresh_connection"
    assert "revert.sh" in last["args"][2]


def test_main_file_is_only_rewritten_when_the_include_is_missing():
    def rewrites_main(case: str) -> bool:
        return any(
            isinstance(c, str) and "mv -f /etc/ssh/sshd_config.gpuhost-new" in c
            for c in _commands(case)
        )

    assert rewrites_main("sshd.dropin/main_lacks_include")
    assert not rewrites_main("sshd.dropin/new_dropin")


def test_ruleset_is_persisted_only_after_confirmation():
    commands = _commands("firewall.ruleset/first_apply")
    apply = next(c for c in commands if isinstance(c, str) and "nft -c -f" in c)
    assert "/etc/gpuhost/nftables.nft" not in apply  # not persisted before the check
    assert apply.index("systemd-run") < apply.index("if ! nft -f /var/lib/gpuhost/firewall/cand")
    confirm = commands[-1]
    assert confirm["function"] == "confirm_fresh_connection"
    assert "/etc/gpuhost/nftables.nft" in confirm["args"][1]
    assert "nft -f /var/lib/gpuhost/firewall/revert.nft" in confirm["args"][2]
    assert "flush ruleset" not in json.dumps(commands)


def test_facts_that_come_back_empty_are_one_line_not_a_traceback():
    """pyinfra gives a fact's ``default()`` when its command prints nothing (a host whose shell
    answers empty): SshdConfigFiles and FirewallState had None, so ``harden --dry`` died with
    "'NoneType' object is not subscriptable". Now the drop-in operation says sshd_config is
    missing (one line) and the firewall plans as on a host without gpuhost's table."""
    from pyinfra.api.exceptions import OperationValueError

    from gpuhost.facts.firewall import FirewallState
    from gpuhost.facts.sshd import SshdConfigFiles
    from gpuhost.operations import firewall, sshd

    empty = {
        "sshd.SshdConfigFiles": SshdConfigFiles.default(),
        "firewall.FirewallState": FirewallState.default(),
    }
    with pytest.raises(OperationValueError, match="sshd_config is missing"):
        run_operation(sshd.dropin, empty, [], {"content": "x\n"})
    commands, noops = run_operation(firewall.ruleset, empty, [], {"content": "table inet x {}\n"})
    assert commands and not noops
