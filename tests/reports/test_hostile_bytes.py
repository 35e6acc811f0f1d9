"""Every byte from a host is data (issue 29): terminal controls a host can put in its uname -r,
GPU name, file contents or error text are shown escaped on every terminal writer, JUnit XML
stays well-formed, and gpuhost's own colours and status line still work."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

import pytest

from gpuhost.audit.host import failed_host
from gpuhost.audit.report import junit
from gpuhost.cli import main
from gpuhost.escape import EscapingStream, terminal_text
from gpuhost.terminal import FleetProgress, style
from tests.reports.fleet_data import fleet_report

HOSTILE = "6.1\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\r\bX\x9b31m\u202egpj.exe\x00"
CONTROLS = ("\x1b", "\x07", "\r", "\b", "\x9b", "\u202e", "\x00")


def _clean(text: str) -> None:
    for char in CONTROLS:
        assert char not in text, f"{char!r} reached the terminal"


def test_terminal_text_shows_every_control_escaped():
    shown = terminal_text(HOSTILE)
    _clean(shown)
    assert shown.startswith("6.1\\u001b]0;pwned\\u0007\\u001b]52;c;")
    assert "\\r\\bX\\u009b31m\\u202egpj.exe\\u0000" in shown
    assert terminal_text("a\tb\nc") == "a\tb\nc"
    assert terminal_text("a\tb\nc", one_line=True) == "a\\tb\\nc"


def test_every_invisible_or_obeyed_character_is_escaped():
    """The rule, not a list of examples: every character Unicode calls a control (Cc), format
    character (Cf: zero-width, soft hyphen, invisible tags, bidi), line/paragraph separator or
    surrogate/private use is shown escaped; before, a host's zero-width space or tag characters
    (invisible on the terminal: 'nvidia\u200b-driver' looks like the real one) passed."""
    import sys
    import unicodedata

    unsafe = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co"}
    missed = [
        f"U+{code:04X}"
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) in unsafe
        and chr(code) not in "\n\t"
        and chr(code) in terminal_text(chr(code))
    ]
    assert missed == []
    assert terminal_text("nvidia\u200b-driver \U000e0041") == "nvidia\\u200b-driver \\U000e0041"
    assert terminal_text("H100 80GB HBM3 \u00e9\u4e2d") == "H100 80GB HBM3 \u00e9\u4e2d"


def test_the_stream_escapes_host_bytes_but_keeps_gpuhosts_own_controls(monkeypatch):
    raw = io.StringIO()
    raw.isatty = lambda: True  # type: ignore[method-assign]
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    stream = EscapingStream(raw)
    stream.write(style("ERROR", stream, fg="red") + " " + HOSTILE + "\n")
    fleet = FleetProgress(2, "audit", stream=stream, live=True)
    fleet.start()
    fleet.host_done("h1: " + HOSTILE, failing=False)
    out = raw.getvalue()
    assert out.startswith("\x1b[31mERROR\x1b[0m 6.1\\u001b]0;pwned")
    assert "\r\x1b[Kh1: 6.1\\u001b" in out  # the status line is erased, the host's CR is shown
    assert out.count("\x1b") == 3 and out.count("\r") == 1
    assert not hasattr(stream, "buffer")  # nothing can write around it


def test_report_merge_and_error_lines_show_host_bytes_escaped(tmp_path, capsys):
    report = fleet_report(2)
    report["hosts"][0]["name"] = "gpu\x1b]0;x\x07"
    source = tmp_path / "a.json"
    source.write_text(json.dumps(report))
    main(["report", "merge", str(source), str(source), "-o", str(tmp_path / "m.json")])
    captured = capsys.readouterr()
    _clean(captured.out + captured.err)
    assert main(["snapshot", "list", "gpu\x1b]52;c;eA==\x07\r", "--state-dir",
                 str(tmp_path / "s")]) == 0
    captured = capsys.readouterr()
    _clean(captured.out + captured.err)
    assert "gpu" in captured.out


def test_snapshot_diff_shows_file_contents_escaped(tmp_path, capsys):
    from upgrade.test_state_safety import _doc

    from gpuhost.upgrade.snapshot import SnapshotStore

    store = SnapshotStore(tmp_path / "snapshots")
    a, b = _doc(sid="20250101T000000Z"), _doc(sid="20250102T000000Z")
    record = b["files"]["/etc/apt/preferences.d/gpuhost-nvidia"]
    record["content"] = "Pin: " + HOSTILE.replace("\x00", "") + "\n"
    import hashlib

    record["sha256"] = hashlib.sha256(record["content"].encode()).hexdigest()
    store.save(a)
    store.save(b)
    code = main(["snapshot", "diff", "n1/20250101T000000Z", "n1", "--state-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1 and "Pin: 6.1\\u001b]0;pwned" in out
    _clean(out)


def test_junit_xml_stays_well_formed_with_host_bytes():
    text = junit.render([failed_host("gpu\x1b.dc1", "probe printed " + HOSTILE + "\ud800")])
    root = ET.fromstring(text.split("\n", 1)[1])  # raises on ill-formed XML
    assert root.find("testsuite").get("name") == "gpu\\u001b.dc1"
    text.encode("utf-8")  # no lone surrogate left


@pytest.mark.parametrize("where", ["stdout", "stderr"])
def test_streams_are_restored_after_a_command(where, capsys):
    import sys

    before = getattr(sys, where)
    main(["--version"])
    assert getattr(sys, where) is before
