"""The acceptance records as JUnit XML (one testcase per host and stage) and as a Prometheus
textfile (per host: verdict, stage verdicts, GEMM TFLOPS and peak temperature per GPU), written
by ``gpuhost accept --junit FILE --prom FILE`` whatever the verdict (pure; ``output`` writes)."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from gpuhost.accept.judge import COULD_NOT_RUN, FAIL, PASS, SKIPPED
from gpuhost.escape import xml_text

SUITE = "gpuhost_accept"
VERDICTS = (PASS, FAIL, COULD_NOT_RUN)


def junit(records: Sequence[dict[str, Any]]) -> str:
    root = ET.Element("testsuites", {"name": SUITE})
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for record in records:
        suite = ET.SubElement(root, "testsuite", {"name": f"{SUITE}.{record['host']}"})
        counts = dict.fromkeys(totals, 0)
        for stage in record["stages"]:
            case = ET.SubElement(suite, "testcase", {"classname": f"{SUITE}.{record['host']}",
                                                     "name": stage["stage"]})  # fmt: skip
            said = "\n".join(stage["lines"])
            counts["tests"] += 1
            if stage["verdict"] == FAIL:
                ET.SubElement(case, "failure", {"message": said[:500], "type": "FAIL"})
                counts["failures"] += 1
            elif stage["verdict"] == COULD_NOT_RUN:
                ET.SubElement(case, "error", {"message": said[:500], "type": "COULD-NOT-RUN"})
                counts["errors"] += 1
            elif stage["verdict"] == SKIPPED:
                ET.SubElement(case, "skipped", {"message": said[:500]})
                counts["skipped"] += 1
            else:
                ET.SubElement(case, "system-out").text = said
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key in ("tests", "failures", "errors"):
        root.set(key, str(totals[key]))
    ET.indent(root)
    body = xml_text(ET.tostring(root, encoding="unicode"))
    return '<?xml version="1.0" encoding="utf-8"?>\n' + body + "\n"


def prometheus(records: Sequence[dict[str, Any]], now: float | None = None) -> str:
    registry = CollectorRegistry()
    verdict = Gauge("gpuhost_accept_verdict", "1 for a host's acceptance verdict",
                    ("host", "verdict"), registry=registry)  # fmt: skip
    stage_verdict = Gauge("gpuhost_accept_stage_verdict", "1 for a stage's verdict",
                          ("host", "stage", "verdict"), registry=registry)  # fmt: skip
    tflops = Gauge("gpuhost_accept_gemm_tflops", "Median GEMM TFLOPS of a GPU over the soak",
                   ("host", "gpu"), registry=registry)  # fmt: skip
    temp = Gauge("gpuhost_accept_temperature_max_celsius", "A GPU's highest temperature",
                 ("host", "gpu"), registry=registry)  # fmt: skip
    last = Gauge("gpuhost_accept_last_run_timestamp_seconds",
                 "When the acceptance run finished (unix time)", registry=registry)  # fmt: skip
    for record in records:
        host = record["host"]
        for name in VERDICTS:
            verdict.labels(host, name).set(1 if record["verdict"] == name else 0)
        for stage in record["stages"]:
            stage_verdict.labels(host, stage["stage"], stage["verdict"]).set(1)
            for gpu in (stage.get("measured") or {}).get("gpus") or []:
                if stage["stage"] == "soak" and gpu.get("tflops_median") is not None:
                    tflops.labels(host, str(gpu["gpu"])).set(gpu["tflops_median"])
                if stage["stage"] == "telemetry" and gpu.get("temperature_max_c") is not None:
                    temp.labels(host, str(gpu["gpu"])).set(gpu["temperature_max_c"])
    last.set(time.time() if now is None else now)
    return generate_latest(registry).decode("utf-8")
