"""A judged smoke document as ``gpuhost smoke`` shows it: lines of text, or one JSON document."""

from __future__ import annotations

import dataclasses
import json

from gpuhost.smoke.judge import Verdict
from gpuhost.smoke.result import SmokeResult


def report_lines(result: SmokeResult, verdicts: list[Verdict], as_json: bool) -> list[str]:
    if as_json:
        doc = {
            "host": result.host,
            "python": result.python_executable,
            "verdicts": [dataclasses.asdict(v) | {"id": v.id} for v in verdicts],
        }
        return [json.dumps(doc, indent=1)]
    lines = [f"smoke test on {result.host} with {result.python_executable}"]
    width = max((len(v.id) for v in verdicts), default=0)
    lines.extend(f"{v.outcome:<13} {v.id:<{width}}  {v.message}" for v in verdicts)
    counts = {o: sum(v.outcome == o for v in verdicts) for o in ("PASS", "FAIL", "COULD-NOT-RUN")}
    return [*lines, ", ".join(f"{n} {o}" for o, n in counts.items())]
