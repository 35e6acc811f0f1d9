"""``apt-cache policy``: the one parser (gpuhost.parsers.packages) and the two facts that use it."""

from __future__ import annotations

from pathlib import Path

from gpuhost.facts.apt_pins import AptPolicy as AptPolicyFact
from gpuhost.facts.build import host_facts_from_text
from gpuhost.parsers.packages import AptPolicy, parse_apt_policy
from tests.audit.probe_text import host_with

POLICY = (Path(__file__).parents[1] / "fixtures" / "parsers" / "apt-cache-policy.txt").read_text()


def test_parse_apt_policy_reads_candidate_origin_and_pin_priority() -> None:
    assert parse_apt_policy(POLICY) == [
        AptPolicy(
            "libnvidia-ml1",
            "535.261.03-1",
            "535.309.01-0+deb12u1",
            "http://deb.debian.org/debian-security bookworm-security/non-free",
            500,
        ),
        AptPolicy(
            "nvidia-smi",
            "535.261.03-1",
            "535.261.03-1",
            "http://deb.debian.org/debian bookworm/non-free",
            1001,
        ),
        AptPolicy(
            "nvidia-cuda-mps",
            None,
            "535.261.03-1",
            "http://deb.debian.org/debian bookworm/non-free",
        ),
    ]
    upgradable, pinned, absent = parse_apt_policy(POLICY)
    assert upgradable.upgrade_pending and not upgradable.pinned
    assert pinned.pinned and not pinned.upgrade_pending
    assert not absent.upgrade_pending


def test_parse_apt_policy_ignores_unknown_packages_and_empty_output() -> None:
    assert parse_apt_policy("") == []
    assert parse_apt_policy("N: Unable to locate package nvidia-nope\n") == []


def test_provision_fact_and_audit_read_the_same_versions() -> None:
    fact = AptPolicyFact().process(POLICY.splitlines())
    assert fact == {
        "libnvidia-ml1": {"installed": "535.261.03-1", "candidate": "535.309.01-0+deb12u1"},
        "nvidia-smi": {"installed": "535.261.03-1", "candidate": "535.261.03-1"},
        "nvidia-cuda-mps": {"installed": None, "candidate": "535.261.03-1"},
    }
    audit = host_facts_from_text(host_with(apt_policy=POLICY)).packages.policy
    assert {p.name: {"installed": p.installed, "candidate": p.candidate} for p in audit} == fact
