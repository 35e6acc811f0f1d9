"""`gpuhost report html` and `gpuhost audit --html`: one page written; bad input is one line."""

from __future__ import annotations

import json

from gpuhost.audit.report import html
from gpuhost.cli import main
from tests.reports.fleet_data import fleet_report


def test_report_html_writes_one_self_contained_page(tmp_path, capsys):
    source = tmp_path / "r.json"
    report = fleet_report(3)
    source.write_text(json.dumps(report))
    out = tmp_path / "r.html"
    assert main(["report", "html", str(source), "-o", str(out)]) == 0
    page = out.read_text()
    assert "default-src 'none'" in page  # the page may fetch nothing
    assert "<script src" not in page and "<link" not in page and "http://" not in page
    assert json.dumps(html.page_data(report)["hosts"], separators=(",", ":")) in page
    assert f"{out}: 3 host(s)" in capsys.readouterr().out


def test_report_html_bad_input_is_one_line(tmp_path, capsys):
    source = tmp_path / "r.json"
    source.write_text('{"schema": 7}')
    assert main(["report", "html", str(source), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "schema 1" in err and str(source) in err
    source.write_text(json.dumps(fleet_report(1)))
    assert main(["report", "html", str(source), "-o", str(tmp_path / "no" / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write" in err


def test_host_names_cannot_inject_markup():
    report = fleet_report(1)
    report["hosts"][0]["name"] = "</script><script>alert(1)</script>"
    page = html.render(report)
    assert "</script><script>alert(1)" not in page


def test_audit_html_option(tmp_path):
    out = tmp_path / "audit.html"
    assert main(["audit", "-q", "--python", "/no/such/python", "--html", str(out)]) == 0
    page = out.read_text()
    assert '"localhost"' in page and "gpuhost fleet report" in page


def test_html_page_data_is_compact_for_big_fleets():
    # hosts point at their stack group; their facts are not embedded
    data = html.page_data(fleet_report(50))
    assert len(data["hosts"]) == 50 and "facts" not in str(data["hosts"][:1])
