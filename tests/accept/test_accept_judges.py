"""The acceptance judges on real captures: telemetry over a sample series (nvidia-smi
--query-gpu rows of a real H100 at rest and under gpu-burn, utkuozdemir/nvidia_gpu_exporter),
the stage judges on real tool outputs (tests/lab/accept/captures, SOURCES.json), the GPUs'
identity in real -q -x captures, outliers, history and the gate's pure decisions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuhost.accept import gate, judge, telemetry
from gpuhost.accept.pairwise import ib_command, pairs
from gpuhost.accept.record import keep, outliers
from gpuhost.errors import ParseError
from gpuhost.parsers.benchmarks import parse_nvbandwidth, parse_perftest_bw
from gpuhost.parsers.smi_identity import parse_identity
from gpuhost.slurm import parse_show_node

REPO = Path(__file__).resolve().parents[2]
CSV = REPO / "tests/fixtures/captures/nvidia-smi-query-csv"
CAPTURES = REPO / "tests/lab/accept/captures"
H100 = "utku__linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01"
FIXTURES = REPO / "tests/fixtures"
LOAD_CSV = FIXTURES / "accept" / f"{H100}__query-gpu__load.csv"


def _capture(kind: str) -> tuple[str, str]:
    """(query fields, header + row) of the H100 capture at rest ("idle", the captures index's
    file) or under gpu-burn ("load", tests/fixtures/accept/, the same query: SOURCE.md)."""
    path = CSV / f"{H100}__idle.csv" if kind == "idle" else LOAD_CSV
    command = (CSV / f"{H100}__idle.csv.cmd").read_text()
    fields = command.split("--query-gpu=")[1].split()[0]
    return fields, path.read_text()


def _series(*rows: tuple[float, str], fields: str) -> list[telemetry.Series]:
    samples = [{"t": t, "rc": 0, "csv": text} for t, text in rows]
    return telemetry.parse_samples(samples, fields)


def test_a_real_series_at_rest_then_under_load_is_clean() -> None:
    fields, idle = _capture("idle")
    _fields, load = _capture("load")
    series = _series((0.0, idle), (2.0, load), fields=fields)
    (gpu,) = series
    assert [s.number("temperature.gpu") for s in gpu.samples] == [41, 59]
    assert telemetry.judge_series(series, {}, telemetry.load_limits()) == []
    (summary,) = telemetry.summary(series)
    assert summary["power_max_w"] == 631.95 and summary["power_cap_w"] == 700.0
    assert summary["sm_clock_median_mhz"] == 1980  # under load only (utilization above 0)


def test_hw_thermal_in_one_sample_is_the_catalog_fault_with_its_action() -> None:
    fields, idle = _capture("idle")
    _fields, load = _capture("load")
    names = [f.strip() for f in fields.split(",")]
    header, row = load.splitlines()
    cells = row.split(", ")
    cells[names.index("clocks_event_reasons.hw_slowdown")] = "Active"
    cells[names.index("clocks_event_reasons.hw_thermal_slowdown")] = "Active"
    hot = header + "\n" + ", ".join(cells) + "\n"
    series = _series((0.0, idle), (20.5, hot), (22.5, load), fields=fields)
    (finding,) = telemetry.judge_series(series, {}, telemetry.load_limits())
    assert (finding.rule, finding.action, finding.severity) == (
        "gpu.clocks.hw-thermal",
        "inspect-hardware",
        "error",
    )
    assert finding.message.startswith(
        "GPU 0 (00000000:00:09.0): HW thermal slowdown active in 1 of 3 samples, first at 20.5 s"
    )


def test_temperature_slowdown_spread_power_and_ecc_growth() -> None:
    limits = telemetry.load_limits()

    def gpu(
        index: int, temps: list[float], corr: list[int], power: float = 600
    ) -> telemetry.Series:
        samples = tuple(
            telemetry.Sample(float(t), {"temperature.gpu": str(temp), "power.draw": str(power),
                                        "power.limit": "700", "utilization.gpu": "100",
                                        "ecc.errors.corrected.volatile.total": str(c)})
            for t, (temp, c) in enumerate(zip(temps, corr, strict=True))
        )  # fmt: skip
        return telemetry.Series(index, f"0000000{index}:00.0", samples)

    healthy = [gpu(0, [60, 62], [0, 0]), gpu(1, [61, 63], [0, 0])]
    assert telemetry.judge_series(healthy, {}, limits) == []
    bad = [gpu(0, [60, 62], [0, 0]), gpu(1, [61, 89], [3, 5], power=705)]
    rules = sorted(f.rule for f in telemetry.judge_series(bad, {"00000001:00.0": 89}, limits))
    assert rules == ["accept.ecc.correctable-growth", "accept.power.over-cap",
                     "accept.temperature.slowdown", "accept.temperature.spread"]  # fmt: skip
    with pytest.raises(ParseError):
        telemetry.judge_series([], {}, limits)


def test_stage_judges_on_real_tool_outputs() -> None:
    def ran(name: str) -> dict:
        return {"result": {"rc": 0, "out": (CAPTURES / name).read_text(), "err": ""}}

    dcgm = judge.judge_dcgm(ran("dcgm__diag-json__8gpu__3.1.0.json") | {"level": 3})
    assert dcgm.verdict == "pass" and dcgm.measured["tests"] == 17
    nvb = judge.judge_nvbandwidth(ran("superbench__nvbandwidth_results.log"), 300.0)
    assert nvb.verdict == "fail"
    assert [line.split(":")[0] for line in nvb.lines] == [
        "host_to_device_memcpy_ce",
        "device_to_host_memcpy_ce",
    ]
    assert nvb.lines[0].endswith("slowest GPU 269.33 GB/s, below the floor 300 GB/s")
    assert (
        judge.judge_nvbandwidth(ran("superbench__nvbandwidth_results.log"), 32.0).verdict == "pass"
    )
    nccl = judge.judge_nccl(ran("superbench__nccl_allreduce.log"), 250.0)
    assert nccl.verdict == "fail" and nccl.measured["peak_busbw_gbs"] == 235.26
    assert judge.judge_nccl(ran("superbench__nccl_allreduce.log"), None).verdict == "pass"
    missing = {"result": {"rc": 127, "out": "", "err": "No such file"}}
    assert judge.judge_dcgm(missing).verdict == "could-not-run"
    assert judge.judge_nvbandwidth(missing, None).lines == (
        "nvbandwidth is not installed on the host",
    )


def test_soak_judge_mismatch_is_silent_data_corruption_and_no_torch_is_could_not_run() -> None:
    def worker(gpu: int, *lines: dict) -> dict:
        return {"rc": 0, "lines": [json.dumps({"gpu": gpu, **item}) for item in lines]}

    good = [
        {"started": True},
        {"t": 2, "tflops": 650.0},
        {"done": True, "iterations": 900, "mismatches": 0},
    ]
    bad = [
        {"started": True},
        {"t": 2, "tflops": 640.0},
        {"done": True, "iterations": 900, "mismatches": 2},
    ]
    soak = {"workers": [worker(0, *good), worker(1, *bad)], "duration": 60, "elapsed": 60}
    result = judge.judge_soak(soak, 247.0)
    assert result.verdict == "fail"
    assert result.lines == ("GPU 1: 2 of 900 GEMM results differ from the GPU's first result "
                            "(silent data corruption)",)  # fmt: skip
    slow = judge.judge_soak({"workers": [worker(0, *good)]}, 700.0)
    assert slow.lines == ("GPU 0: 650 TFLOPS, below the floor 700 TFLOPS",)
    none = {"workers": [worker(0, {"error": "PyTorch cannot be imported: No module named 'torch'",
                                   "kind": "no-framework"})]}  # fmt: skip
    assert judge.judge_soak(none, None).verdict == "could-not-run"


def test_identity_and_slowdown_threshold_from_real_xml() -> None:
    xml = (FIXTURES / "captures/nvidia-smi-xml/telegraf__a100-sxm4-v12.xml").read_text()
    (gpu,) = parse_identity(xml)
    assert (gpu.serial, gpu.vbios, gpu.slowdown_temp_c) == ("1650522003820", "92.00.36.00.02", 89.0)
    assert parse_identity("") == []
    with pytest.raises(ParseError):
        parse_identity("<!DOCTYPE x [<!ENTITY a 'b'>]><nvidia_smi_log/>")


def test_perftest_and_nvbandwidth_parsers() -> None:
    result = parse_perftest_bw((CAPTURES / "superbench__ib_loopback_8M_size.log").read_text())
    assert (result.message_bytes, result.average_gbits) == (8388608, 201.8)
    cases = parse_nvbandwidth((CAPTURES / "superbench__nvbandwidth_results.log").read_text())
    assert cases["device_to_host_memcpy_ce"].cells == (295.15, 312.11)
    assert "host_device_latency_sm" not in cases  # ns, not GB/s
    for junk in ("", "garbage\n", "Running x.\n"):
        with pytest.raises(ParseError):
            parse_nvbandwidth(junk)
        with pytest.raises(ParseError):
            parse_perftest_bw(junk)


def test_outliers_name_the_slow_gpu_against_the_runs_median() -> None:
    def record(host: str, rates: list[float]) -> dict:
        gpus = [{"gpu": i, "tflops_median": r} for i, r in enumerate(rates)]
        return {"host": host, "stages": [{"stage": "soak", "measured": {"gpus": gpus}}]}

    records = [record("a", [650, 652]), record("b", [649, 320])]
    model = {"a": "NVIDIA H100 80GB HBM3", "b": "NVIDIA H100 80GB HBM3"}
    named = outliers(records, model, 0.9)
    assert list(named) == ["b"]
    assert named["b"][0].startswith("b GPU 1: GEMM TFLOPS 320, below 0.9 x the median 650")
    assert outliers(records[:1], model, 0.9) == {}  # two values cannot say which one is low


def test_history_counts_runs_and_calls_out_a_lemon(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    for verdict in ("fail", "pass", "fail", "fail"):
        history = keep(state, {"host": "n1", "verdict": verdict})
    assert (history["runs"], history["failed"], history["lemon"]) == (4, 3, True)
    assert len((state / "acceptance" / "n1.jsonl").read_text().splitlines()) == 4


def test_gate_decisions() -> None:
    drained = parse_show_node((FIXTURES / "slurm/scontrol-show-node-drained.txt").read_text())
    idle = parse_show_node((FIXTURES / "slurm/scontrol-show-node-idle.txt").read_text())
    assert gate.not_drained({"n1": drained}) is None
    line = gate.not_drained({"n1": drained, "n2": idle})
    assert line is not None and line.startswith(
        "--gate slurm: n2 (Slurm node h1: IDLE+NOT_RESPONDING) not drained"
    )
    assert gate.final_reason("pass", None, False) is None
    assert gate.final_reason("pass", None, True) == "gpuhost: acceptance interrupted"
    reason = gate.final_reason(
        "fail", "telemetry: [gpu.clocks.hw-thermal] GPU 3 " + "x" * 300, False
    )
    assert reason is not None and reason.startswith("gpuhost: acceptance failed: telemetry:")
    assert len(reason) <= 200
    assert gate.taint_argv("n1", None)[-1] == "gpuhost.io/acceptance:NoSchedule-"


def test_pairs_make_a_ring_and_the_client_names_its_server() -> None:
    assert pairs(["a"]) == []
    assert pairs(["a", "b"]) == [("a", "b")]
    assert pairs(["a", "b", "c"]) == [("b", "a"), ("c", "b"), ("a", "c")]
    assert ib_command("mlx5_0", "10.0.0.2").endswith("-d mlx5_0 10.0.0.2")


def test_drivers_before_535_name_the_clock_events_throttle_reasons() -> None:
    sample = telemetry.Sample(
        3.0, {"clocks_throttle_reasons.hw_slowdown": "Active",
              "clocks_throttle_reasons.hw_power_brake_slowdown": "Active"},
    )  # fmt: skip
    (finding,) = telemetry.clock_event_findings(telemetry.Series(0, "00000000:18:00.0", (sample,)))
    assert finding.rule == "gpu.clocks.power-brake"  # the specific reason, not HW slowdown too


def test_the_kubernetes_gate_taints_before_and_removes_the_taint_only_on_a_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "kubectl.log"
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    kubectl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    gate.before("k8s", {"gpu1": "gpu1"})
    assert gate.after("k8s", "gpu1", "fail", "telemetry: ...", False) == (
        "Kubernetes node gpu1: tainted gpuhost.io/acceptance=fail:NoSchedule"
    )
    gate.after("k8s", "gpu1", "pass", None, True)  # interrupted: never cleared
    gate.after("k8s", "gpu1", "pass", None, False)
    assert log.read_text().splitlines() == [
        "taint node gpu1 gpuhost.io/acceptance=running:NoSchedule --overwrite",
        "taint node gpu1 gpuhost.io/acceptance=fail:NoSchedule --overwrite",
        "taint node gpu1 gpuhost.io/acceptance=interrupted:NoSchedule --overwrite",
        "taint node gpu1 gpuhost.io/acceptance:NoSchedule-",
    ]
