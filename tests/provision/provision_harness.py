"""Run a gpuhost operation against given facts and return the commands it yields (pyinfra's
fixture style: ``tests/provision/operations/<module>.<operation>/<case>.json``).

A case file holds:
  args             keyword arguments of the operation
  report_xml       (optional) path, from the repo root, of an ``nvidia-smi -q -x`` capture,
                   parsed and passed as the ``report`` argument
  report_text      (optional) nvidia-smi output text (e.g. its "no driver" message), passed
                   the same way
  facts            {fact name: {argument string: value}}; argument string "" for no arguments,
                   else "key=value" joined by ";" with list values joined by ","
  commands         expected commands; a file upload is {"upload": dest, "lines": [text lines]}
  noop_description (optional) expected noop text when no commands are expected
  exception        (optional) {"type": name, "contains": text}
  stage            (optional) "execute" (default: the operation runs for real, after the ones
                   before it) or "prepare" (pyinfra's planning pass, also ``--dry``)
"""

from __future__ import annotations

import json
from io import BytesIO, StringIO
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pyinfra.api import FileUploadCommand
from pyinfra.api.state import StateStage
from pyinfra.context import ctx_host

from gpuhost.parsers.nvidia_smi import parse_output

REPO_ROOT = Path(__file__).resolve().parents[2]


def fact_key(kwargs: dict[str, Any]) -> str:
    parts = []
    for key in sorted(kwargs):
        value = kwargs[key]
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        parts.append(f"{key}={value}")
    return ";".join(parts)


class FakeHost:
    """Just enough of pyinfra's Host for operations: facts from the case, noops recorded."""

    name = "fixture-host"

    def __init__(self, facts: dict[str, dict[str, Any]], stage: str = "execute") -> None:
        self.facts = facts
        self.noops: list[str] = []
        executing = stage == "execute"
        self.state = SimpleNamespace(
            is_executing=executing,
            current_stage=StateStage.Execute if executing else StateStage.Prepare,
        )

    def get_fact(self, cls: type, *args: Any, **kwargs: Any) -> Any:
        name = cls.name  # type: ignore[attr-defined]
        key = fact_key(kwargs)
        if name not in self.facts or key not in self.facts[name]:
            raise AssertionError(f"case lacks fact {name!r} with arguments {key!r}")
        value = self.facts[name][key]
        if value is None and hasattr(cls, "default") and name.startswith("gpuhost."):
            return cls().default()
        return value

    def noop(self, description: str) -> None:
        self.noops.append(description)


def render(command: Any) -> Any:
    if isinstance(command, FileUploadCommand):
        src = command.src
        if isinstance(src, StringIO):
            content: Any = src.getvalue()
        elif isinstance(src, BytesIO):
            content = src.getvalue().decode(errors="replace")
        else:
            content = str(src)
        return {"upload": command.dest, "lines": content.splitlines()}
    return str(command)


def case_report(case: dict[str, Any]):
    if "report_xml" in case:
        return parse_output((REPO_ROOT / case["report_xml"]).read_text())
    if "report_text" in case:
        return parse_output(case["report_text"])
    return None


def run_case(operation: Any, case: dict[str, Any]) -> tuple[list[Any], list[str]]:
    args = dict(case.get("args", {}))
    report = case_report(case)
    if report is not None:
        args["report"] = report
    fake = FakeHost(case.get("facts", {}), case.get("stage", "execute"))
    with ctx_host.use(fake):
        commands = [render(c) for c in operation._inner(**args)]
    return commands, fake.noops


def load_case(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())
