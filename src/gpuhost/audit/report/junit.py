"""JUnit XML: one test case per host and rule, for CI dashboards.

A rule with an error finding fails its case; warnings and info pass with their messages in
``system-out``; a rule that did not apply is skipped with its reason; an unreachable host has one
case, ``host.unreachable``, in error.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable

from gpuhost.audit.host import HostReport

SUITE_NAME = "gpuhost audit"


def _case(suite: ET.Element, host: str, name: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", {"classname": f"gpuhost.audit.{host}", "name": name})


def render(hosts: Iterable[HostReport]) -> str:
    root = ET.Element("testsuites", {"name": SUITE_NAME})
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for host in sorted(hosts, key=lambda h: h.name):
        suite = ET.SubElement(root, "testsuite", {"name": host.name})
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for result in host.results:
            by_rule: dict[str, list] = {}
            for finding in result.findings:
                by_rule.setdefault(finding.rule, []).append(finding)
            if not by_rule:
                case = _case(suite, host.name, result.rule)
                counts["tests"] += 1
                if result.skipped:
                    ET.SubElement(case, "skipped", {"message": result.skipped})
                    counts["skipped"] += 1
                continue
            for rule, findings in by_rule.items():
                case = _case(suite, host.name, rule)
                counts["tests"] += 1
                errors = [f for f in findings if f.severity == "error"]
                text = "\n".join(f"{f.severity}: {f.message}" for f in findings)
                if not host.reachable:
                    node = ET.SubElement(case, "error", {"message": errors[0].message[:500]})
                    node.text = text
                    counts["errors"] += 1
                elif errors:
                    node = ET.SubElement(
                        case, "failure", {"message": errors[0].message[:500], "type": "error"}
                    )
                    node.text = text
                    counts["failures"] += 1
                else:
                    ET.SubElement(case, "system-out").text = text
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
