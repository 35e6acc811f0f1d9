"""``gpuhost accept`` against input that lies: an operator's careless options, a damaged
data/acceptance.yaml, and a host whose agent document or telemetry stream lies (NaN, negative,
huge, truncated, text where a number belongs, a GPU twice, a counter going down). Before, these
passed silently (NaN temperatures and TFLOPS compare false against every limit), crashed with a
traceback (a list where an object belongs), or ran for ever (a duration too large to be a
number). Now a bad option or data file is one line and exit 2 before any host is touched, and a
lying host is COULD-NOT-RUN (or FAIL) with one line: never PASS.

The sample row is the agent's query (``accept/agent.SAMPLE_FIELDS``, noheader, nounits) with the
values of the real H100 capture under load (tests/fixtures/accept/, SOURCE.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuhost.accept import judge, telemetry
from gpuhost.accept.agent import SAMPLE_FIELDS
from gpuhost.accept.options import STAGES, AcceptOptions, accept_options
from gpuhost.accept.record import build_record
from gpuhost.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
FIELDS = SAMPLE_FIELDS.split(",")
LOADED = {
    "index": "0", "pci.bus_id": "00000000:00:09.0", "temperature.gpu": "59",
    "power.draw": "631.95", "power.limit": "700.00", "clocks.sm": "1980",
    "clocks.max.sm": "1980", "utilization.gpu": "100",
    "clocks_event_reasons.hw_slowdown": "Not Active",
    "clocks_event_reasons.hw_thermal_slowdown": "Not Active",
    "clocks_event_reasons.hw_power_brake_slowdown": "Not Active",
    "clocks_event_reasons.sw_thermal_slowdown": "Not Active",
    "ecc.errors.corrected.volatile.total": "0", "ecc.errors.uncorrected.volatile.total": "0",
}  # fmt: skip


def _row(**changed: str) -> str:
    values = {**LOADED, **{k.replace("__", "."): v for k, v in changed.items()}}
    return ", ".join(values[f] for f in FIELDS)


def _soak(*samples: tuple[object, str]) -> dict:
    return {"fields": SAMPLE_FIELDS, "samples": [{"t": t, "rc": 0, "csv": c} for t, c in samples]}


def test_the_honest_stream_passes() -> None:
    result = judge.judge_telemetry(_soak((0, _row()), (2, _row())))
    assert result.verdict == judge.PASS, result


def _gpu2(**changed: str) -> str:
    return _row(**{"index": "1", "pci__bus_id": "00000000:00:0A.0", **changed})


LIES = {
    "temperature NaN": [(0, _row(temperature__gpu="nan")), (2, _row())],
    "temperature inf": [(0, _row()), (2, _row(temperature__gpu="inf"))],
    "temperature negative": [(0, _row(temperature__gpu="-300"))],
    "temperature huge": [(0, _row(temperature__gpu="1e308"))],
    "temperature text": [(0, _row(temperature__gpu="hot"))],
    "power negative": [(0, _row(power__draw="-5"))],
    "power cap NaN": [(0, _row(power__limit="NaN"))],
    "utilization over 100": [(0, _row(utilization__gpu="250"))],
    "clock huge": [(0, _row(clocks__sm="99999999"))],
    "ECC NaN": [(0, _row(ecc__errors__uncorrected__volatile__total="nan"))],
    "ECC going down": [
        (0, _row(ecc__errors__corrected__volatile__total="5")),
        (2, _row(ecc__errors__corrected__volatile__total="2")),
    ],
    "a GPU twice in one sample": [(0, _row() + "\n" + _row())],
    "two GPUs, one index": [(0, _row() + "\n" + _gpu2(index="0"))],
    "index text": [(0, _row(index="zero"))],
    "truncated row": [(0, _row().rsplit(",", 3)[0])],
    "time NaN": [("NaN", _row())],
    "time negative": [(-5, _row())],
    "time text": [("soon", _row())],
}


@pytest.mark.parametrize("samples", list(LIES.values()), ids=list(LIES))
def test_a_lying_telemetry_stream_gets_no_verdict(samples) -> None:
    result = judge.judge_telemetry(_soak(*samples))

    assert result.verdict == judge.COULD_NOT_RUN, result
    assert len(result.lines) == 1 and result.lines[0], result


def _doc(**stages: object) -> dict:
    return {"stages": stages, "started": 1.0, "finished": 2.0}


MALFORMED = {
    "stages a list": {"stages": ["inventory"]},
    "soak a list": _doc(soak=[1, 2]),
    "workers text": _doc(soak={"workers": "many", "samples": []}),
    "samples an object": _doc(soak={"samples": {"t": 0}, "fields": SAMPLE_FIELDS}),
    "sample a number": _doc(soak={"samples": [7], "fields": SAMPLE_FIELDS}),
    "inventory a string": _doc(inventory="lots of GPUs"),
    "smi_xml a list": _doc(inventory={"smi_xml": ["<xml/>"]}),
    "dcgm result a number": _doc(dcgm={"result": 5, "level": 3}),
    "nccl a list": _doc(nccl=["busbw 1e308"]),
}


@pytest.mark.parametrize("doc", list(MALFORMED.values()), ids=list(MALFORMED))
def test_a_malformed_agent_document_is_could_not_run_never_a_crash_or_pass(doc) -> None:
    stages = judge.judge_host(doc, {}, AcceptOptions(duration_s=60))
    record = build_record("n1", judge.host_verdict(stages), stages, doc, False)

    assert judge.host_verdict(stages) != judge.PASS
    assert json.dumps(record)  # the record is written as it is
    assert all(s.lines for s in stages if s.verdict == judge.COULD_NOT_RUN)


@pytest.mark.parametrize("rate", [float("nan"), float("inf"), -3.0, 0.0, 1e308])
def test_a_gemm_rate_no_gpu_makes_fails_the_soak(rate: float) -> None:
    line = json.dumps({"gpu": 0, "tflops": rate})  # json writes NaN/Infinity, as Python's does
    done = json.dumps({"gpu": 0, "done": True, "iterations": 10, "mismatches": 0})
    soak = {"workers": [{"rc": 0, "lines": [line, done]}]}

    result = judge.judge_soak(soak, None)

    assert result.verdict == judge.FAIL, result
    assert "TFLOPS is no measurement" in result.lines[0]


@pytest.mark.parametrize(
    ("duration", "skip", "floors", "said"),
    [
        ("9" * 300 + "d", [], [], "expected at most 30d"),
        ("31d", [], [], "expected at most 30d"),
        ("1h", list(STAGES), [], "every stage skipped"),
        ("1h", [], ["nccl=300GB/s", "nccl=30GB/s"], "nccl already has the floor 300"),
        ("1h", ["nccl"], ["nccl=300GB/s"], "the nccl stage is skipped"),
        ("1h", ["soak"], ["gemm=600TFLOPS"], "the soak stage is skipped"),
    ],
)
def test_careless_options_are_one_line(duration, skip, floors, said) -> None:
    with pytest.raises(ConfigError) as caught:
        accept_options(duration, skip, floors)
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_the_same_floor_twice_is_fine() -> None:
    assert accept_options("1h", [], ["nccl=300GB/s", "nccl=300GB/s"]).floors == {"nccl": 300.0}


DAMAGED_LIMITS = {
    "NaN": "temperature_spread_c: {value: .nan, source: h100-acceptance}",
    "inf": "temperature_spread_c: {value: .inf, source: h100-acceptance}",
    "text": "temperature_spread_c: {value: '5', source: h100-acceptance}",
    "a list": "temperature_spread_c: [5]",
    "fraction over 1": "outlier_fraction: {value: 9, source: nccl-tests-footer}",
    "source a list": "clock_events: {value: 0, source: [nvml-clock-events]}",
}


def _limits_file(folder: Path, change: str) -> Path:
    shipped = (REPO / "src/gpuhost/data/acceptance.yaml").read_text()
    name = change.split(":")[0]
    lines = shipped.splitlines()
    start = lines.index(f"  {name}:")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("  ") and
                not lines[i].startswith("    ")), len(lines))  # fmt: skip
    path = folder / "acceptance.yaml"
    path.write_text("\n".join([*lines[:start], f"  {change}", *lines[end:]]) + "\n")
    return path


@pytest.mark.parametrize("change", list(DAMAGED_LIMITS.values()), ids=list(DAMAGED_LIMITS))
def test_a_damaged_limits_file_is_one_line(tmp_path, monkeypatch, change) -> None:
    path = _limits_file(tmp_path, change)
    monkeypatch.setattr(telemetry, "data_path", lambda _name: path)
    telemetry.load_limits.cache_clear()
    try:
        with pytest.raises(ConfigError) as caught:
            telemetry.load_limits()
    finally:
        telemetry.load_limits.cache_clear()
    assert str(caught.value).startswith(f"{path}: limits.{change.split(':')[0]}: found ")


def test_a_limits_file_that_is_a_fifo_never_blocks(tmp_path, monkeypatch) -> None:
    fifo = tmp_path / "acceptance.yaml"
    os.mkfifo(fifo)
    monkeypatch.setattr(telemetry, "data_path", lambda _name: fifo)
    telemetry.load_limits.cache_clear()
    try:
        with pytest.raises(ConfigError):
            telemetry.load_limits()
    finally:
        telemetry.load_limits.cache_clear()


def test_the_cli_refuses_a_careless_duration_before_any_host(tmp_path) -> None:
    # loopback, a port nothing listens on: were the option let through, no packet leaves
    inventory = tmp_path / "inv.py"
    inventory.write_text('hosts = [("gpu1", {"ssh_hostname": "127.0.0.1", "ssh_port": 1})]\n')
    proc = subprocess.run(
        [sys.executable, "-m", "gpuhost", "accept", str(inventory), "--duration", "9" * 300 + "d",
         "--state-dir", str(tmp_path / "s")],
        capture_output=True, text=True, cwd=REPO, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "expected at most 30d" in proc.stderr
