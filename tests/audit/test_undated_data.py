"""Data without a date (a shipped matrix.yaml with no ``updated``): every output says so in its
own way and none prints Python's ``None``: the JSON has ``null`` (the schema allows it), the
Prometheus textfile an empty ``date`` label (Prometheus' absent value), text ``unknown``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuhost import datadir
from gpuhost.audit.host import unreachable_host
from gpuhost.audit.report import prom
from gpuhost.audit.report.json_report import build_report
from gpuhost.audit.report.table import closing_text
from tests.schema_check import assert_valid


@pytest.fixture(autouse=True)
def _undated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(datadir.ENV, str(tmp_path / "no-overlay"))
    monkeypatch.setattr(datadir, "shipped_date", lambda: None)


def test_json_report_has_null() -> None:
    hosts = [unreachable_host("h1", "refused")]
    report = build_report(hosts)
    assert report["data"] == {"date": None, "origin": "shipped with gpuhost"}
    assert_valid(report, "audit-report")


def test_prometheus_date_label_is_empty_not_none() -> None:
    parser = pytest.importorskip(
        "prometheus_client.parser", reason="prometheus-client (a dev dependency) is not installed"
    )
    hosts = [unreachable_host("h1", "refused")]
    text = prom.render(hosts, build_report(hosts)["summary"])
    assert "None" not in text
    families = {f.name: f for f in parser.text_string_to_metric_families(text)}
    (info,) = families["gpuhost_audit_data_info"].samples
    assert info.labels == {"date": "", "origin": "shipped with gpuhost"} and info.value == 1


def test_text_outputs_say_unknown() -> None:
    hosts = [unreachable_host("h1", "refused")]
    text = closing_text(hosts, json.loads(json.dumps(build_report(hosts))), False, False)
    assert "data: unknown (shipped with gpuhost)" in text and "None" not in text
    status = "\n".join(datadir.status_lines(Path("/nonexistent"), as_json=False))
    assert status.startswith("data: unknown (shipped with gpuhost)") and "None" not in status
