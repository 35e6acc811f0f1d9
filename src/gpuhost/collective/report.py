"""The collective test's results as text lines, the JSON document (schema
``collective-result``), JUnit XML and a Prometheus node_exporter textfile.

- JSON: ``{"schema": 1, "kind": "collective", "verdict", "launcher", "launch_host", "nodes",
  "gpus_per_node", "nccl_tests", "floor": {busbw_gbs, origin, source}, "runs": [...],
  "slow": {nodes, links, group, note} | null, "generated_at", "gpuhost_version"}``;
- JUnit: one ``<testsuite name="gpuhost collective">``, one ``<testcase>`` per run (the whole
  set, each pair, split and half), classname ``gpuhost_collective.TEST``, name ``TEST over
  NODES (stage)``; FAIL is ``<failure>``, COULD-NOT-RUN ``<error>`` (never a skip: it is not a
  pass);
- Prometheus: ``gpuhost_collective_busbw_gbps{test,nodes,stage}`` (peak bus bandwidth of each
  run that measured one), ``gpuhost_collective_floor_gbps``,
  ``gpuhost_collective_run_verdict{test,nodes,stage,verdict}`` 1,
  ``gpuhost_collective_verdict{verdict}`` 1 for the whole answer,
  ``gpuhost_collective_slow_node{node}`` 1 per node named,
  ``gpuhost_collective_last_run_timestamp_seconds``.
"""

from __future__ import annotations

import datetime
import json
import time
import xml.etree.ElementTree as ET
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from gpuhost import __version__
from gpuhost.collective.judge import COULD_NOT_RUN, FAIL, VERDICTS, RunResult
from gpuhost.collective.run import Report
from gpuhost.escape import xml_text

SUITE = "gpuhost collective"


def _nodes(run: RunResult) -> str:
    return ",".join(run.nodes)


def lines(report: Report) -> list[str]:
    """What the terminal shows: a line per run, the slow node or link, the verdict."""
    setup = report.setup
    out = [
        f"collective: {len(setup.nodes)} nodes x {setup.gpus_per_node} GPUs through "
        f"{setup.launcher} on {setup.launch_host or 'this machine'}; floor "
        f"{setup.floor.busbw_gbs:g} GB/s ({setup.floor.origin})"
    ]
    for run in report.runs:
        out.append(f"{run.verdict:<13} {run.test} over {_nodes(run)} ({run.stage}): {run.reason}")
    if report.located is not None:
        out.append(f"slow: {report.located.named} ({report.located.note})")
    out.append(f"collective: {report.verdict}")
    return out


def document(report: Report, now: datetime.datetime | None = None) -> dict[str, Any]:
    setup = report.setup
    when = now or datetime.datetime.now(datetime.timezone.utc)
    located = report.located
    return {
        "schema": 1,
        "kind": "collective",
        "generated_at": when.isoformat(timespec="seconds"),
        "gpuhost_version": __version__,
        "verdict": report.verdict,
        "launcher": setup.launcher,
        "launch_host": setup.launch_host,
        "nodes": list(setup.names),
        "gpus_per_node": setup.gpus_per_node,
        "nccl_tests": setup.nccl_tests,
        "floor": {
            "busbw_gbs": setup.floor.busbw_gbs,
            "origin": setup.floor.origin,
            "source": setup.floor.source,
        },
        "runs": [run.to_dict() for run in report.runs],
        "slow": None
        if located is None
        else {
            "nodes": list(located.nodes),
            "links": [list(link) for link in located.links],
            "group": list(located.group),
            "note": located.note,
        },
    }


def json_text(report: Report) -> str:
    return json.dumps(document(report), indent=2) + "\n"


def junit(report: Report) -> str:
    root = ET.Element("testsuites", {"name": SUITE})
    suite = ET.SubElement(root, "testsuite", {"name": SUITE})
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for run in report.runs:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": f"gpuhost_collective.{run.test}",
                "name": f"{run.test} over {_nodes(run)} ({run.stage})",
            },
        )
        counts["tests"] += 1
        if run.verdict == FAIL:
            ET.SubElement(case, "failure", {"message": run.reason[:500], "type": "FAIL"})
            counts["failures"] += 1
        elif run.verdict == COULD_NOT_RUN:
            ET.SubElement(case, "error", {"message": run.reason[:500], "type": COULD_NOT_RUN})
            counts["errors"] += 1
        else:
            ET.SubElement(case, "system-out").text = run.reason
    for key, value in counts.items():
        suite.set(key, str(value))
        if key != "skipped":
            root.set(key, str(value))
    ET.indent(root)
    body = xml_text(ET.tostring(root, encoding="unicode"))
    return '<?xml version="1.0" encoding="utf-8"?>\n' + body + "\n"


def prometheus(report: Report, now: float | None = None) -> str:
    registry = CollectorRegistry()
    run_labels = ("test", "nodes", "stage")
    busbw = Gauge(
        "gpuhost_collective_busbw_gbps",
        "Peak bus bandwidth of a collective run (nccl-tests busbw, GB/s)",
        run_labels,
        registry=registry,
    )
    floor = Gauge(
        "gpuhost_collective_floor_gbps", "The all_reduce bus-bandwidth floor", registry=registry
    )
    run_verdict = Gauge(
        "gpuhost_collective_run_verdict",
        "1 for a collective run's verdict",
        (*run_labels, "verdict"),
        registry=registry,
    )
    verdict = Gauge(
        "gpuhost_collective_verdict",
        "1 for the collective test's verdict",
        ("verdict",),
        registry=registry,
    )
    slow = Gauge(
        "gpuhost_collective_slow_node",
        "1 for a node the slow-node search named",
        ("node",),
        registry=registry,
    )
    last = Gauge(
        "gpuhost_collective_last_run_timestamp_seconds",
        "When the collective test finished (unix time)",
        registry=registry,
    )
    floor.set(report.setup.floor.busbw_gbs)
    for run in report.runs:
        labels = (run.test, _nodes(run), run.stage)
        if run.busbw is not None:
            busbw.labels(*labels).set(run.busbw)
        run_verdict.labels(*labels, run.verdict).set(1)
    for name in VERDICTS:
        verdict.labels(name).set(1 if name == report.verdict else 0)
    for node in report.located.nodes if report.located else ():
        slow.labels(node).set(1)
    last.set(time.time() if now is None else now)
    return generate_latest(registry).decode("utf-8")
