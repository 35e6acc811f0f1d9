"""``gpuhost parse FILE [--json]`` through gpuhost.cli.main (exit codes and output)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuhost.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "parsers"


def test_parse_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", str(FIXTURES / "smi-two-gpus-v12.xml"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "nvidia-smi-xml" and data["state"] == "ok"
    assert data["driver_version"] == "550.54.15" and data["cuda_version"] == "12.4"
    assert [g["name"] for g in data["gpus"]] == ["NVIDIA A100-SXM4-80GB"] * 2


def test_parse_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", str(FIXTURES / "proc-version-open.txt")]) == 0
    out = capsys.readouterr().out
    assert "kind: proc-driver-version" in out
    assert "kernel_module_version: 550.54.15" in out and "kernel_module_flavor: open" in out


def test_parse_error_state_is_not_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capture = tmp_path / "smi.txt"
    capture.write_text(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n"
    )
    assert main(["parse", str(capture), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["kind"], data["state"]) == ("nvidia-smi-error", "driver-not-loaded")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read file"),
        (b"\x7fELF\x02\x01\x01\x00\x00\xff\xfe\x00", "binary"),
        (b"just some notes\nnothing to see\n", "unrecognised output"),
        (b"", "empty"),
    ],
)
def test_bad_files_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None, message: str
) -> None:
    path = tmp_path / "capture.txt"
    if content is not None:
        path.write_bytes(content)
    assert main(["parse", str(path)]) == 2
    captured = capsys.readouterr()
    err_lines = captured.err.strip().splitlines()
    assert len(err_lines) == 1 and message in err_lines[0] and str(path) in err_lines[0]
    assert "Traceback" not in captured.err and captured.out == ""


def test_directory_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
