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


def test_report_html_dash_is_standard_output(tmp_path, capsys, monkeypatch):
    """``-o -`` is standard output, as for report merge and audit --json/--html (it wrote a file
    named '-'); the summary line then goes to standard error."""
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "r.json"
    source.write_text(json.dumps(fleet_report(2)))
    assert main(["report", "html", str(source), "-o", "-"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("<!DOCTYPE html>") and captured.out.rstrip().endswith("</html>")
    assert captured.err == "-: 2 host(s), verdict " + fleet_report(2)["summary"]["verdict"] + "\n"
    assert not (tmp_path / "-").exists()


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


def test_merged_report_renders(tmp_path, capsys):
    report = fleet_report(6)
    paths = []
    for index, hosts in enumerate((report["hosts"][:3], report["hosts"][3:])):
        path = tmp_path / f"shard{index}.json"
        path.write_text(json.dumps(dict(report, hosts=hosts)))
        paths.append(str(path))
    merged = tmp_path / "merged.json"
    assert main(["report", "merge", *paths, "-o", str(merged)]) in (0, 1)
    out = tmp_path / "merged.html"
    assert main(["report", "html", str(merged), "-o", str(out)]) == 0
    data = html.page_data(json.loads(merged.read_text()))
    assert data["meta"]["merged_from"] == paths and len(data["hosts"]) == 6
    assert '"merged_from":' in out.read_text()
