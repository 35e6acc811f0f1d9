"""JUnit XML (``--junit FILE``) for CI dashboards; valid against the Jenkins/Surefire schema
(junit-10.xsd, shipped in tests/reports/ and checked there).

One ``<testsuite>`` per host (``name`` and ``hostname`` = the host), one ``<testcase>`` per rule
check (the ids of ``gpuhost.audit.rules.RULES`` plus ``matrix``), so every run and every host has
the same case names. A check with an error finding fails (``<failure>``, its findings listed with
found/expected/fix); warnings and info pass with their findings in ``<system-out>``; a check that
did not apply is ``<skipped message="reason">``; an unreachable host has one case,
``host.unreachable``, in ``<error>``.

The security exposure is a separate answer: its checks (``security.*``) are not in the host's
suite but in a second one, ``HOST security`` (classname ``gpuhost_security.HOST``), with the
exposure's verdict as a property. They fail only with ``--fail-on security`` (as the exit status
does); otherwise their findings are listed in ``<system-out>``.

``classname`` is ``gpuhost.HOST`` with the host's dots written as ``_``: JUnit readers (Jenkins,
GitLab) split a classname at dots into packages, and ``gpu01.dc1.example.org`` must stay one
host, not the package path ``gpu01.dc1.example``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable

from gpuhost.audit.host import HostReport
from gpuhost.escape import xml_text
from gpuhost.findings import ERROR, SECURITY_PREFIX, Finding, RuleResult

SUITE_NAME = "gpuhost audit"
MESSAGE_LIMIT = 500


def classname(host: str, package: str = "gpuhost") -> str:
    """``gpuhost.`` + the host name with its dots as underscores (one class per host)."""
    return f"{package}.{host.replace('.', '_')}"


def _finding_text(finding: Finding) -> str:
    parts = [f"{finding.severity}: {finding.rule}: {finding.message}"]
    for key in ("found", "expected", "fix", "source", "action"):
        value = getattr(finding, key)
        if value:
            parts.append(f"  {key}: {value}")
    return "\n".join(parts)


def _case(suite: ET.Element, host: str, name: str, package: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", {"classname": classname(host, package), "name": name})


def render(hosts: Iterable[HostReport], fail_on: str = "compatibility") -> str:
    root = ET.Element("testsuites", {"name": SUITE_NAME})
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for host in sorted(hosts, key=lambda h: h.name):
        results = [r for r in host.results if not r.rule.startswith(SECURITY_PREFIX)]
        security = [r for r in host.results if r.rule.startswith(SECURITY_PREFIX)]
        suites = [(host.name, "gpuhost", results, True)]
        if security:
            suites.append(
                (f"{host.name} security", "gpuhost_security", security, fail_on == "security")
            )
        for name, package, checks, failing in suites:
            suite = ET.SubElement(root, "testsuite", {"name": name, "hostname": host.name})
            if package != "gpuhost":
                props = ET.SubElement(suite, "properties")
                ET.SubElement(
                    props, "property", {"name": "verdict", "value": host.security_verdict}
                )
            counts = _cases(suite, host, checks, package, failing)
            for key, value in counts.items():
                suite.set(key, str(value))
                if key in totals:
                    totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    # a host's bytes (a GPU name, a message) may hold what XML 1.0 cannot carry: shown escaped
    body = xml_text(ET.tostring(root, encoding="unicode"))
    return '<?xml version="1.0" encoding="utf-8"?>\n' + body + "\n"


def _cases(
    suite: ET.Element,
    host: HostReport,
    results: list[RuleResult],
    package: str,
    failing: bool,
) -> dict[str, int]:
    """One case per rule check; ``failing``: an error finding fails its case (else listed)."""
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for result in results:
        case = _case(suite, host.name, result.rule, package)
        counts["tests"] += 1
        if result.skipped is not None and not result.findings:
            ET.SubElement(case, "skipped", {"message": result.skipped})
            counts["skipped"] += 1
            continue
        if not result.findings:
            continue
        text = "\n".join(_finding_text(f) for f in result.findings)
        errors = [f for f in result.findings if f.severity == ERROR]
        if errors and failing:
            kind = "failure" if host.reachable else "error"
            node = ET.SubElement(
                case,
                kind,
                {"message": errors[0].message[:MESSAGE_LIMIT], "type": errors[0].rule},
            )
            node.text = text
            counts["failures" if host.reachable else "errors"] += 1
        else:
            ET.SubElement(case, "system-out").text = text
    return counts
