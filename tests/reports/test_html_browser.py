"""The HTML fleet report in a real headless browser (Debian's chromium + chromedriver, selenium).

The page must render with no console message of level SEVERE and fetch nothing (its CSP forbids
it; the Resource Timing list stays empty) for a 1-host and a 2,000-host report, and its filters
must narrow the findings table. A screenshot is kept: tests write it next to the report; with
GPUHOST_UPDATE_SCREENSHOT=1 the 40-host one replaces docs/img/fleet-report.png.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from gpuhost.audit.report import html, json_report
from tests.reports.fleet_data import fleet_report, host_name
from tests.schema_check import assert_valid

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="Debian's chromium and chromium-driver are not installed "
    "(scripts/test installs them when run as root)",
)
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "fleet-report.png"


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def open_report(browser, report: dict, path: Path) -> float:
    """Write the page, load it, wait for its script; return seconds until ready."""
    assert_valid(report, "audit-report")
    path.write_text(html.render(report), encoding="utf-8")
    browser.get_log("browser")  # drop messages of earlier pages
    start = time.monotonic()
    browser.get(path.as_uri())
    while browser.execute_script("return document.body.getAttribute('data-ready')") != "1":
        assert time.monotonic() - start < 30, "page script did not finish in 30 s"
        time.sleep(0.05)
    return time.monotonic() - start


def wait_for(browser, expression: str, value: object, seconds: float = 10) -> None:
    """Poll a JavaScript expression until it equals ``value`` (the filters wait for typing to
    pause before they re-render)."""
    start = time.monotonic()
    while browser.execute_script(f"return {expression}") != value:
        assert time.monotonic() - start < seconds, f"{expression} never became {value!r}"
        time.sleep(0.05)


def assert_clean(browser) -> None:
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0


def texts(browser, css: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [e.text for e in browser.find_elements(By.CSS_SELECTOR, css)]


def attrs(browser, css: str, name: str) -> list[str]:
    """An attribute of every element matching ``css``, in one round trip."""
    return browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]),"
        " e => e.getAttribute(arguments[1]))",
        css,
        name,
    )


def select(browser, element_id: str, value: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element(By.ID, element_id)).select_by_value(value)


def test_one_host_report(browser, tmp_path):
    report = fleet_report(1)
    open_report(browser, report, tmp_path / "one.html")
    assert_clean(browser)
    cards = dict(
        (c.split("\n")[1], c.split("\n")[0]) for c in texts(browser, "#verdicts .card")[1:]
    )
    assert cards == {v: str(n) for v, n in report["summary"]["verdicts"].items()}
    rows = texts(browser, "#findings tbody tr")
    assert len(rows) == len(report["hosts"][0]["findings"]) > 0
    assert "no single majority" in browser.page_source or "every reachable host" in (
        browser.page_source
    )


def test_two_thousand_hosts_render_filter_and_show_a_stack(browser, tmp_path):
    from selenium.webdriver.common.by import By

    report = fleet_report(2000)
    seconds = open_report(browser, report, tmp_path / "fleet.html")
    assert_clean(browser)
    assert seconds < 10
    summary = report["summary"]
    assert texts(browser, "#verdicts .card.total b") == ["2000"]
    assert texts(browser, "#verdicts .card.unreachable b") == [
        str(summary["verdicts"]["unreachable"])
    ]
    bars = browser.find_elements(By.CSS_SELECTOR, "#stack-chart .bar")
    assert [b.find_element(By.CLASS_NAME, "n").text for b in bars] == [
        str(g["count"]) for g in summary["stacks"]
    ]
    total = sum(len(h["findings"]) for h in report["hosts"])
    assert f"of {total} matching findings shown" in texts(browser, "#f-count")[0]

    # rule filter: only that rule, every one of its findings
    select(browser, "f-rule", "host.unreachable")
    rules = attrs(browser, "#findings tbody tr", "data-rule")
    assert set(rules) == {"host.unreachable"}
    assert len(rules) == summary["rules"]["host.unreachable"] == summary["unreachable"]
    # + severity, then a host name with dots
    select(browser, "f-rule", "")
    select(browser, "f-severity", "warning")
    warning_rows = attrs(browser, "#findings tbody tr", "data-severity")
    assert set(warning_rows) == {"warning"}
    name = host_name(1)
    browser.find_element(By.ID, "f-host").send_keys(name)
    wait_for(
        browser, "document.querySelector('#findings tbody').dataset.filter", f"|warning|{name}"
    )
    rows = attrs(browser, "#findings tbody tr", "data-host")
    (host,) = [h for h in report["hosts"] if h["name"] == name]
    assert rows == [name] * sum(1 for f in host["findings"] if f["severity"] == "warning")
    assert 0 < len(rows) < len(warning_rows)

    # a host's stack on demand; an outlier's differing field is highlighted
    outlier = summary["outliers"][0]
    browser.find_element(By.ID, "h-filter").send_keys(outlier["host"])
    wait_for(browser, "document.querySelectorAll('#hosts .host').length", 1)
    browser.find_element(By.CSS_SELECTOR, f'#hosts .host[data-host="{outlier["host"]}"]').click()
    detail = browser.find_element(By.ID, "host-stack").text
    assert outlier["host"] in detail and "(outlier)" in detail
    differing = texts(browser, "#host-stack td.differs")
    assert differing == [d["found"] for d in outlier["differs"].values()]
    # a stack group's hosts
    bars[1].click()
    assert f"{summary['stacks'][1]['count']} host(s)" in texts(browser, "#stack-detail h3")[0]
    assert_clean(browser)


def test_screenshot_of_a_40_host_fleet(browser, tmp_path):
    report = fleet_report(40, unreachable_every=19)
    open_report(browser, report, tmp_path / "fleet40.html")
    assert_clean(browser)
    shot = tmp_path / "fleet-report.png"
    assert browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("GPUHOST_UPDATE_SCREENSHOT") == "1":
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)


def test_host_names_that_are_object_properties_keep_their_group(browser, tmp_path):
    """A host named like a JavaScript object property ('constructor', '__proto__', 'toString')
    was an outlier in the page's lookups (a plain {} has them); its chip and row said so."""
    base = fleet_report(3, unreachable_every=1000)
    names = ["__proto__", "constructor", "toString"]
    entries = [dict(host, name=name) for host, name in zip(base["hosts"], names, strict=True)]
    report = json_report.report_from_entries(entries, {"inventory": "inv.py"}, "2025-01-01")
    outliers = sorted(o["host"] for o in report["summary"]["outliers"])
    assert "constructor" not in outliers and "toString" not in outliers
    open_report(browser, report, tmp_path / "names.html")
    assert sorted(attrs(browser, "#hosts .host", "data-host")) == sorted(names)
    assert sorted(attrs(browser, "#hosts .host.outlier", "data-host")) == outliers
    assert not {"constructor", "toString"} & set(
        attrs(browser, "#findings tbody tr.outlier", "data-host")
    )
    assert_clean(browser)
