"""Inputs a bad-input probe found still ending in a traceback (or worse): each is now one line,
exit 2, naming the file and what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.errors import ConfigError
from gpuhost.upgrade.providers import make_provider
from tests.robustness.conftest import assert_one_line, gpuhost

# YAML that parses but whose values PyYAML cannot build: it raised ValueError (not YAMLError)
UNBUILDABLE_YAML = [
    ("cudnn: 2024-13-45\n", "month must be in 1..12"),
    ("schema: !!int x\n", "invalid literal"),
    ("branch: " + "9" * 5000 + "\n", "digits"),
]


@pytest.mark.parametrize(("text", "said"), UNBUILDABLE_YAML)
def test_a_profiles_file_with_a_value_yaml_cannot_build(tmp_path: Path, text, said) -> None:
    profiles = tmp_path / "site.yaml"
    profiles.write_text("schema: 1\nprofiles:\n  p:\n    " + text.replace("\n", "\n    "))
    flat = tmp_path / "flat.yaml"
    flat.write_text(text)
    for file in (profiles, flat):
        run = gpuhost("matrix", "profile", "list", "--profiles", str(file))
        assert_one_line(run, 2, f"{file}: not valid YAML", "a value YAML cannot build", said)


def test_a_provider_config_with_an_impossible_date(tmp_path: Path) -> None:
    config = tmp_path / "provider.yaml"
    config.write_text("type: command\ncommand: echo {host}\nwhen: 2024-13-01\n")
    inv = tmp_path / "inv.py"
    inv.write_text("hosts = ['n1.invalid']\n")
    run = gpuhost(
        "snapshot",
        "take",
        str(inv),
        "--provider-config",
        str(config),
        "--state-dir",
        str(tmp_path / "state"),
    )
    assert_one_line(run, 2, f"{config}: provider config is not valid YAML", "month must be")


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ({"timeout_s": "abc"}, "timeout_s is 'abc', expected a number of seconds above 0"),
        ({"timeout_s": [1]}, "timeout_s is [1]"),
        ({"timeout_s": float("nan")}, "timeout_s is nan"),
        ({"timeout_s": -1}, "timeout_s is -1"),
        ({"command": "echo {host"}, "is not a valid template (expected '}'"),
        ({"command": "echo {host.x}"}, "is not a valid template"),
        ({"command": "echo {nope}"}, "is not a valid template ('nope')"),
    ],
)
def test_a_bad_command_provider_is_refused_when_read(config, said) -> None:
    """timeout_s went through float() unguarded (a traceback before any host was touched); a
    broken command template passed and failed only when the snapshot ran."""
    with pytest.raises(ConfigError) as err:
        make_provider({"type": "command", "command": "echo {host}", **config}, "pc.yaml")
    assert str(err.value).startswith("pc.yaml: ") and said in str(err.value)


def test_a_good_command_provider_keeps_literal_braces() -> None:
    provider = make_provider({"type": "command", "command": "echo {host} {{x}}", "timeout_s": 5})
    assert provider.argv("h1", "l", "i")[2] == "echo h1 {x}"


# JSON that json.loads refuses with ValueError (a number of 5000 digits: Python's int limit) or
# RecursionError (deep nesting): only JSONDecodeError was expected, so these were tracebacks
HUGE = "9" * 5000
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("value", [HUGE, DEEP], ids=["huge-number", "deep-nesting"])
def test_state_files_with_json_python_cannot_read_are_one_error(tmp_path: Path, value) -> None:
    from gpuhost.readers import read_json
    from gpuhost.upgrade.journal import read_records
    from gpuhost.upgrade.snapshot import load_snapshot

    snapshot = tmp_path / "snap.json"
    snapshot.write_text('{"schema": 1, "host": "h1", "x": ' + value + "}")
    journal = tmp_path / "run.jsonl"
    journal.write_text('{"kind": "run", "x": ' + value + "}\n")
    report = tmp_path / "report.json"
    report.write_text('{"schema": 1, "hosts": ' + value + "}")
    for read, path in ((load_snapshot, snapshot), (read_records, journal)):
        with pytest.raises(ConfigError) as err:
            read(path)
        assert str(err.value).startswith(str(path)) and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=f"^{report}: JSON"):
        read_json(report, "a report")
    run = gpuhost("report", "html", str(report), "-o", str(tmp_path / "x.html"))
    assert_one_line(run, 2, str(report))
    run = gpuhost("smoke", "judge", str(report))
    assert_one_line(run, 2, str(report), "not one JSON document")


CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"


@pytest.mark.parametrize(
    ("capture", "old", "new"),
    [
        (  # a clock of 400 digits: float() gives inf, int(inf) raised OverflowError
            "nvidia-smi-clocks/garylvov__4x-rtx3090-3090ti__580.65.06__q-d-CLOCK.txt",
            ": 210 MHz",
            ": 1" + "0" * 400 + " MHz",
        ),
        (  # cuDNN's version as 5000 digits: int() raised ValueError (Python's digit limit)
            "torch-version/zanghu__cudnn-version-repl__7605.txt",
            "7605",
            "9" * 5000,
        ),
    ],
)
def test_parse_of_a_doctored_capture_never_raises(tmp_path: Path, capture, old, new) -> None:
    text = (CAPTURES / capture).read_text(encoding="utf-8")
    assert old in text
    doctored = tmp_path / "capture.txt"
    doctored.write_text(text.replace(old, new, 1), encoding="utf-8")
    run = gpuhost("parse", str(doctored))
    assert "Traceback" not in run.err and run.code in (0, 2), run.err


def test_smoke_run_with_an_interpreter_printing_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    """The smoke runner decoded the interpreter's output strictly: UnicodeDecodeError."""
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nprintf '\\377\\376 not json \\200'\nexit 0\n")
    fake.chmod(0o755)
    run = gpuhost("smoke", "run", "--python", str(fake))
    assert "Traceback" not in run.err and run.code in (1, 2), run.err
    assert run.err.count("\n") == 1, run.err


@pytest.mark.parametrize("command", [["check", "--tier", "static"], ["audit", "-q"]])
def test_an_output_path_that_cannot_be_written_is_refused_before_any_work(
    tmp_path: Path, command
) -> None:
    """check --junit: a file in the path gave pytest's traceback, a missing folder was created."""
    (tmp_path / "afile").write_text("")
    for path, said in (
        ("afile/x.xml", "cannot write (folder afile is not a folder)"),
        ("nosuch/x.xml", "cannot write (folder nosuch does not exist)"),
        (".", "cannot write (it is a folder; expected a file path)"),
    ):
        run = gpuhost(*command, "--junit", path, cwd=tmp_path)
        if command[0] == "check" and path == ".":  # click's own path check answers first
            assert run.code == 2 and "'.' is a directory" in run.err, run.err
            continue
        assert_one_line(run, 2, f"--junit {path}: {said}")
    assert not (tmp_path / "nosuch").exists()


def test_a_host_name_the_terminal_cannot_encode_is_escaped(tmp_path: Path) -> None:
    """Under PYTHONIOENCODING=ascii a host named 'gpu-日' ended the audit in UnicodeEncodeError
    (terminal progress line). 127.0.0.1 port 1 refuses: the host is reported unreachable."""
    import os
    import subprocess
    import sys

    inv = tmp_path / "inv.py"
    inv.write_text(
        "hosts = [('gpu-\\u65e5', {'ssh_hostname': '127.0.0.1', 'ssh_port': 1})]\n",
        encoding="utf-8",
    )
    env = dict(os.environ, PYTHONIOENCODING="ascii", NO_COLOR="1")
    proc = subprocess.run(
        [sys.executable, "-m", "gpuhost", "audit", str(inv), "--connect-timeout", "2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in proc.stderr and "UnicodeEncodeError" not in proc.stderr
    assert proc.returncode == 1 and "gpu-\\u65e5" in proc.stdout, proc.stdout + proc.stderr


def test_profile_values_the_probe_found_accepted_are_refused(tmp_path: Path) -> None:
    """fabric_manager: 1 (1 == True), clocks true / -5, pins matrix check cannot judge, and
    profile names YAML reads as a number or null were all accepted."""
    profiles = tmp_path / "site.yaml"
    profiles.write_text(
        "schema: 1\n"
        "profiles:\n"
        "  5: {description: x}\n"
        "  mine:\n"
        "    description: mine\n"
        "    os: [debian-12]\n"
        "    source: debian-nonfree\n"
        "    driver: {version: 535.261.03, branch: 535, kernel_module: proprietary}\n"
        '    cuda: {versions: ["11.8"], default: "11.8"}\n'
        "    fabric_manager: 1\n"
        '    frameworks: ["torch>=2.8", "jax==1"]\n'
        "    clocks: {policy: explicit, graphics_mhz: true, memory_mhz: -5}\n",
        encoding="utf-8",
    )
    run = gpuhost("matrix", "profile", "list", "--profiles", str(profiles))
    assert_one_line(
        run,
        2,
        "profiles.5: a profile name must be text",
        "profiles.mine.fabric_manager: 1 is not true, false or auto",
        'profiles.mine.frameworks[0]: "torch>=2.8" is not NAME or NAME==VERSION',
        "profiles.mine.frameworks[1]: 'jax==1': expected an exact pin of torch or tensorflow",
        "profiles.mine.clocks.graphics_mhz: True is not a clock in MHz",
        "profiles.mine.clocks.memory_mhz: -5 is not a clock in MHz",
    )


def test_a_report_without_hosts_is_refused_by_merge_and_html(tmp_path: Path) -> None:
    """merge said 'verdict: ok' and html 'unreachable' for a report listing no host."""
    import json

    from gpuhost.cli import main

    report = tmp_path / "r.json"
    assert main(["audit", "-q", "--python", "/usr/bin/python3", "--json", str(report)]) == 0
    doc = json.loads(report.read_text())
    doc["hosts"] = []
    report.write_text(json.dumps(doc))
    for command in (["report", "merge", str(report)], ["report", "html", str(report)]):
        run = gpuhost(*command, "-o", str(tmp_path / "out"))
        assert_one_line(run, 2, f"{report}: the report lists no hosts")
