"""One host's acceptance stages judged from the agent's document (pure).

``judge_host(doc, host_data, options)`` → ``[StageResult]`` in stage order. A stage whose tool
is missing, whose output cannot be read or that was never reached is COULD-NOT-RUN with the
reason; it never passes. Floors come from the caller (``floors``: the user's, per stage unit,
``options.FLOOR_UNITS``); where none is given, a stage's measured value is recorded with "no
floor" and judged for correctness only. The stage's verdict is the worst of its findings: any
error or warning fails it (acceptance tolerates no clock event, no new ECC error).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from gpuhost.accept import telemetry
from gpuhost.accept.options import AGENT_STAGES, AcceptOptions
from gpuhost.checks_support.stress import dcgm_failures, dcgm_outcomes
from gpuhost.errors import ParseError
from gpuhost.faults.judge import FaultInputs, finding_line, judge
from gpuhost.faults.node_class import expectation_for
from gpuhost.findings import Finding
from gpuhost.matrix.peaks import smoke_references
from gpuhost.parsers.aer import AerCounters, parse_gpu_aer
from gpuhost.parsers.benchmarks import parse_nvbandwidth
from gpuhost.parsers.nccl_tests import parse_nccl_tests
from gpuhost.parsers.nvidia_smi import SmiReport, parse_output
from gpuhost.parsers.smi_identity import parse_identity
from gpuhost.parsers.smi_misc import parse_nvlink_errors, parse_nvlink_status
from gpuhost.parsers.xid import xid_events

T = TypeVar("T")
PASS, FAIL, COULD_NOT_RUN, SKIPPED = "pass", "fail", "could-not-run", "skipped"
NOT_INSTALLED = 127
#: nvbandwidth testcases a floor in GB/s applies to (host <-> each GPU, copy engine)
NVBANDWIDTH_FLOOR_CASES = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce")


@dataclass(frozen=True)
class StageResult:
    stage: str
    verdict: str
    lines: tuple[str, ...] = ()
    measured: Mapping[str, Any] = field(default_factory=dict)
    floors: Mapping[str, Any] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "verdict": self.verdict,
            "lines": list(self.lines),
            "measured": dict(self.measured),
            "floors": dict(self.floors),
            "findings": [
                {"rule": f.rule, "severity": f.severity, "message": f.message, "action": f.action}
                for f in self.findings
            ],
        }


def could_not_run(stage: str, why: str) -> StageResult:
    return StageResult(stage, COULD_NOT_RUN, (why,))


def _tool_problem(result: Mapping[str, Any] | None, tool: str) -> str | None:
    """Why ``tool``'s run gives no data (not installed, timed out, interrupted), else None."""
    if not result:
        return f"{tool} did not run"
    rc = result.get("rc")
    if rc == NOT_INSTALLED:
        return f"{tool} is not installed on the host"
    if rc == 124:
        return f"{tool} did not finish in time"
    if rc == 130:
        return f"{tool} was interrupted"
    return None


def _tail(result: Mapping[str, Any]) -> str:
    text = (str(result.get("out") or "") + str(result.get("err") or "")).strip()
    return text.splitlines()[-1][:200] if text else f"exit {result.get('rc')}"


def _from_findings(stage: str, findings: Sequence[Finding], **extra: Any) -> StageResult:
    bad = tuple(f for f in findings if f.severity in ("error", "warning"))
    lines = tuple(finding_line(f) for f in bad)
    return StageResult(stage, FAIL if bad else PASS, lines, findings=bad, **extra)


def smi_report(stage_doc: Mapping[str, Any]) -> SmiReport | None:
    """The nvidia-smi -q -x report of a stage (None: nvidia-smi gave none)."""
    result = stage_doc.get("smi_xml") or {}
    if result.get("rc") != 0:
        return None
    report = parse_output(str(result.get("out") or ""))
    return report if report.ok and report.gpus else None


def judge_inventory(stage_doc: Mapping[str, Any], host_data: Mapping[str, Any]) -> StageResult:
    """The node against its node class (GPUs, memory, NVLink, PCIe) and the GPU fault catalog,
    at rest; ECC must be enabled."""
    problem = _tool_problem(stage_doc.get("smi_xml"), "nvidia-smi")
    report = None if problem else smi_report(stage_doc)
    if report is None:
        return could_not_run(
            "inventory",
            problem or f"nvidia-smi shows no GPU: {_tail(stage_doc.get('smi_xml') or {})}",
        )
    name = report.gpus[0].name
    expect = expectation_for(name, host_data.get("gpuhost_expect"), len(report.gpus))
    nvlink = stage_doc.get("nvlink_status") or {}
    links = parse_nvlink_status(str(nvlink.get("out") or "")) if nvlink.get("rc") == 0 else None
    findings = judge(FaultInputs(report, nvlink=links or None, expect=expect))
    ecc_off = [g for g in report.gpus if g.ecc.mode_current is False]
    findings += [
        Finding(
            "accept.ecc-mode",
            "error",
            f"GPU {g.index} ({g.pci_bus_id}): ECC is disabled; expected enabled",
            found="ECC disabled",
            expected="ECC enabled",
            action="reset-gpu",
        )
        for g in ecc_off
    ]
    measured = {
        "gpu_model": name,
        "gpus": len(report.gpus),
        "node_class": expect.name if expect else None,
        "driver": report.driver_version,
    }
    result = _from_findings("inventory", findings, measured=measured)
    if result.verdict == PASS:
        result = replace(
            result,
            lines=(
                f"{len(report.gpus)} x {name} as node class "
                f"{expect.name if expect else '?'} expects",
            ),
        )
    if expect is None:
        return StageResult(
            "inventory",
            COULD_NOT_RUN if result.verdict == PASS else result.verdict,
            result.lines + (f"no node class for {name!r}: give inventory data gpuhost_expect",),
            measured,
            findings=result.findings,
        )
    return result


def judge_dcgm(stage_doc: Mapping[str, Any] | None) -> StageResult:
    result = (stage_doc or {}).get("result")
    problem = _tool_problem(result, "dcgmi")
    if problem:
        return could_not_run("dcgm", problem)
    assert result is not None
    try:
        outcomes = dcgm_outcomes(str(result.get("out") or ""))
    except ParseError as exc:
        return could_not_run("dcgm", f"dcgmi diag: {exc}")
    failed = dcgm_failures(outcomes)
    measured = {"level": (stage_doc or {}).get("level"), "tests": len(outcomes)}
    if failed:
        return StageResult("dcgm", FAIL, tuple(o.line() for o in failed[:20]), measured)
    return StageResult("dcgm", PASS, (f"{len(outcomes)} results, none failed",), measured)


def _parsed(stage_doc: Mapping[str, Any] | None, tool: str, parse: Callable[[str], T]) -> T | str:
    """The tool's output parsed, or why there is nothing to judge (a COULD-NOT-RUN line)."""
    result = (stage_doc or {}).get("result")
    problem = _tool_problem(result, tool)
    if problem or result is None:
        return problem or f"{tool} did not run"
    try:
        return parse(str(result.get("out") or ""))
    except ParseError as exc:
        return str(exc)


def judge_nvbandwidth(stage_doc: Mapping[str, Any] | None, floor: float | None) -> StageResult:
    cases = _parsed(stage_doc, "nvbandwidth", parse_nvbandwidth)
    if isinstance(cases, str):
        return could_not_run("nvbandwidth", cases)
    measured = {name: {"sum_gbs": c.sum_gbs, "min_gbs": c.min_gbs} for name, c in cases.items()}
    floors = {"host_device_min_gbs": floor} if floor else {}
    judged = [cases[n] for n in NVBANDWIDTH_FLOOR_CASES if n in cases]
    if floor is None:
        return StageResult(
            "nvbandwidth", PASS, ("no floor given (--floor nvbandwidth=N GB/s)",), measured
        )
    if not judged:
        return could_not_run("nvbandwidth", "no host<->device copy testcase in the output")
    low = [c for c in judged if (c.min_gbs or 0) < floor]
    lines = tuple(
        f"{c.name}: slowest GPU {c.min_gbs:g} GB/s, below the floor {floor:g} GB/s" for c in low
    ) or tuple(f"{c.name}: slowest GPU {c.min_gbs:g} GB/s (floor {floor:g})" for c in judged)
    return StageResult("nvbandwidth", FAIL if low else PASS, lines, measured, floors)


def judge_nccl(stage_doc: Mapping[str, Any] | None, floor: float | None) -> StageResult:
    run = _parsed(stage_doc, "all_reduce_perf (nccl-tests)", parse_nccl_tests)
    if isinstance(run, str):
        return could_not_run("nccl", run)
    measured = {"peak_busbw_gbs": run.peak_busbw, "wrong": run.wrong}
    floors = {"busbw_gbs": floor} if floor else {}
    lines: list[str] = list(run.failures)
    if run.wrong:
        lines.append(f"{run.wrong} wrong element(s) in all_reduce results")
    if run.peak_busbw is None and not lines:
        return could_not_run("nccl", "all_reduce_perf printed no result row")
    if floor is not None and (run.peak_busbw or 0) < floor:
        lines.append(f"peak bus bandwidth {run.peak_busbw} GB/s, below the floor {floor:g} GB/s")
    if lines:
        return StageResult("nccl", FAIL, tuple(lines), measured, floors)
    said = "" if floor else " (no floor given: --floor nccl=N GB/s)"
    return StageResult("nccl", PASS, (f"peak busbw {run.peak_busbw} GB/s{said}",), measured, floors)


def _worker_lines(worker: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for line in worker.get("lines") or []:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            out.append(item)
    return out


#: no single GPU multiplies at 100 PFLOPS (the fastest dense FP16 GEMM of 2025 is about 2.3):
#: a rate above it, or one that is not a finite number above 0, is no measurement
MAX_GEMM_TFLOPS = 100_000.0


def judge_soak(soak: Mapping[str, Any] | None, floor: float | None) -> StageResult:
    """Every GPU ran its GEMM loop for the budget, every result equal to its first (bit for
    bit), its throughput at or above the floor (TFLOPS) where one is given."""
    if not soak:
        return could_not_run("soak", "the soak did not run")
    if soak.get("error"):
        return could_not_run("soak", str(soak["error"]))
    per_gpu, lines, unable = [], [], []
    for worker in soak.get("workers") or []:
        items = _worker_lines(worker)
        errors = [i for i in items if i.get("error")]
        done = next((i for i in items if i.get("done")), None)
        rates = [float(i["tflops"]) for i in items if isinstance(i.get("tflops"), (int, float))]
        gpu = next((i.get("gpu") for i in items), None)
        absurd = [r for r in rates if not (math.isfinite(r) and 0 < r <= MAX_GEMM_TFLOPS)]
        if absurd:  # NaN, inf, 0, negative, 1e308: a measurement no GPU makes
            lines.append(
                f"GPU {gpu}: {absurd[0]!r} TFLOPS is no measurement; expected a rate above 0 "
                f"and at most {MAX_GEMM_TFLOPS:g}"
            )
            rates = [r for r in rates if r not in absurd]
        if errors and errors[0].get("kind") in ("no-framework", "no-gpu"):
            unable.append(f"GPU {gpu}: {errors[0]['error']}")
            continue
        if errors or done is None:
            why = (
                errors[0]["error"]
                if errors
                else f"the GEMM loop ended early (exit {worker.get('rc')})"
            )
            lines.append(f"GPU {gpu}: {why}")
        if done and done.get("mismatches"):
            lines.append(
                f"GPU {gpu}: {done['mismatches']} of {done.get('iterations')} GEMM results "
                "differ from the GPU's first result (silent data corruption)"
            )
        median = sorted(rates)[len(rates) // 2] if rates else None
        if floor is not None and median is not None and median < floor:
            lines.append(f"GPU {gpu}: {median:g} TFLOPS, below the floor {floor:g} TFLOPS")
        per_gpu.append(
            {
                "gpu": gpu,
                "tflops_median": median,
                "tflops_min": min(rates) if rates else None,
                "iterations": done.get("iterations") if done else None,
                "mismatches": done.get("mismatches") if done else None,
            }
        )
    measured = {
        "gpus": per_gpu,
        "elapsed_s": soak.get("elapsed"),
        "duration_s": soak.get("duration"),
    }
    floors = {"tflops": floor} if floor else {}
    if unable and not lines:
        return StageResult("soak", COULD_NOT_RUN, tuple(unable[:3]), measured, floors)
    if lines or unable:
        return StageResult("soak", FAIL, tuple(lines + unable), measured, floors)
    if not per_gpu:
        return could_not_run("soak", "no GPU reported a GEMM result")
    return StageResult(
        "soak", PASS, (f"{len(per_gpu)} GPUs, results bit-identical",), measured, floors
    )


def _new_xids(soak: Mapping[str, Any]) -> list[Any]:
    def lines(side: str) -> list[str]:
        got = (soak.get(side) or {}).get("xid_log") or {}
        return str(got.get("out") or "").splitlines()

    before = set(lines("before"))
    return xid_events("\n".join(line for line in lines("after") if line not in before))


def _aer_growth(soak: Mapping[str, Any]) -> dict[str, dict[str, AerCounters]]:
    def read(side: str) -> dict[str, dict[str, AerCounters]]:
        got = (soak.get(side) or {}).get("aer") or {}
        return parse_gpu_aer(str(got.get("out") or "")) if got.get("rc") == 0 else {}

    before, after = read("before"), read("after")
    grown: dict[str, dict[str, AerCounters]] = {}
    for device, files in after.items():
        for kind, counters in files.items():
            old = before.get(device, {}).get(kind)
            delta = counters.total - (old.total if old else 0)
            if delta > 0:
                grown.setdefault(device, {})[kind] = AerCounters(counters.kind, {}, delta)
    return grown


def _nvlink_growth(soak: Mapping[str, Any]) -> list[dict[str, Any]]:
    def read(side: str) -> list[dict[str, Any]]:
        got = (soak.get(side) or {}).get("nvlink_errors") or {}
        return parse_nvlink_errors(str(got.get("out") or "")) if got.get("rc") == 0 else []

    before = {g.get("index"): g for g in read("before")}
    grown = []
    for gpu in read("after"):
        old = before.get(gpu.get("index"), {}).get("links") or {}
        links = {
            link: {
                name: count - (old.get(link) or {}).get(name, 0) for name, count in values.items()
            }
            for link, values in (gpu.get("links") or {}).items()
        }
        grown.append({**gpu, "links": links})
    return grown


def judge_telemetry(soak: Mapping[str, Any] | None) -> StageResult:
    """The soak's samples (clock events, temperature, power, ECC) and what changed between
    before and after: Xid events (fault catalog), retired/remapped rows, AER and NVLink errors."""
    if not soak or soak.get("error") or not soak.get("samples"):
        return could_not_run("telemetry", "no soak, so no telemetry to judge")
    try:
        series = telemetry.parse_samples(soak["samples"], str(soak.get("fields") or ""))
        after = smi_report(soak.get("after") or {})
        identity = parse_identity(
            str(((soak.get("after") or {}).get("smi_xml") or {}).get("out") or "")
        )
        slowdown = {i.bus_id: i.slowdown_temp_c for i in identity if i.bus_id and i.slowdown_temp_c}
        findings = telemetry.judge_series(series, slowdown, telemetry.load_limits())
        at_end = judge(
            FaultInputs(
                after,
                xid=_new_xids(soak),
                nvlink_errors=_nvlink_growth(soak),
                aer=_aer_growth(soak),
            )
        )
        # clock events are judged over the whole series above; the end's report says them again
        findings += [f for f in at_end if not f.rule.startswith("gpu.clocks.")]
    except ParseError as exc:
        return could_not_run("telemetry", str(exc))
    gpus = telemetry.summary(series)
    measured = {"gpus": gpus, "samples": len(soak["samples"])}
    result = _from_findings("telemetry", findings, measured=measured)
    if result.verdict == PASS:
        hottest = max((g["temperature_max_c"] or 0 for g in gpus), default=0)
        said = (
            f"{len(series)} GPUs, {measured['samples']} samples: no clock event, no new ECC, "
            f"Xid, AER or NVLink error; hottest {hottest:g} C"
        )
        result = replace(result, lines=(said,))
    return result


def data_floors(gpu_name: str | None) -> dict[str, tuple[float, str]]:
    """The floors the data gives for a GPU model: GEMM TFLOPS and host<->GPU GB/s, each the
    smoke test's fraction of the published peak (data/gpu_peaks.yaml, sourced); {} for a model
    the data has no row for."""
    if not gpu_name:
        return {}
    refs = smoke_references([gpu_name]).get(gpu_name) or {}
    found = {}
    for stage, metric in (("gemm", "matmul_tflops_fp16"), ("nvbandwidth", "h2d_gbps")):
        ref = refs.get(metric)
        if ref is not None and ref.min_ratio:
            found[stage] = (round(ref.peak * ref.min_ratio, 2), f"{ref.min_ratio:g} x {ref.source}")
    return found


def _floors(
    doc: Mapping[str, Any], given: Mapping[str, float]
) -> tuple[dict[str, float], dict[str, str]]:
    """(floor per stage, where it comes from): the data's, the user's over them."""
    report = smi_report((doc.get("stages") or {}).get("inventory") or {})
    name = report.gpus[0].name if report is not None else None
    found = data_floors(name)
    floors = {stage: value for stage, (value, _origin) in found.items()}
    origins = {stage: origin for stage, (_value, origin) in found.items()}
    floors.update(given)  # the user's floor wins
    origins.update(dict.fromkeys(given, "--floor (the user's)"))
    return floors, origins


#: what a judge raises reading a document whose values have other types than the agent writes
#: (a list where an object belongs, text where a number does): a damaged or lying answer
MALFORMED = (TypeError, AttributeError, ValueError, KeyError, IndexError, OverflowError)


def _guarded(stage: str, judge_one: Callable[[], StageResult]) -> StageResult:
    try:
        return judge_one()
    except MALFORMED as exc:
        return could_not_run(
            stage,
            f"the agent's result is malformed ({type(exc).__name__}: {str(exc)[:100]}); no "
            "verdict from it",
        )


def judge_host(
    doc: Mapping[str, Any], host_data: Mapping[str, Any], options: AcceptOptions
) -> list[StageResult]:
    """The agent-run stages of one host (ib and collective are judged across hosts); a stage
    whose part of the document is malformed is COULD-NOT-RUN with that line."""
    stages = doc.get("stages") or {}
    if not isinstance(stages, Mapping):
        stages = {name: "malformed" for name in AGENT_STAGES}
    try:
        floors, origins = _floors(doc, options.floors)
    except MALFORMED:  # the data's floors need the inventory stage, judged malformed below
        floors, origins = dict(options.floors), dict.fromkeys(options.floors, "--floor")
    judged = {
        "inventory": lambda: judge_inventory(stages.get("inventory") or {}, host_data),
        "dcgm": lambda: judge_dcgm(stages.get("dcgm")),
        "soak": lambda: judge_soak(stages.get("soak"), floors.get("gemm")),
        "telemetry": lambda: judge_telemetry(stages.get("soak")),
        "nvbandwidth": lambda: judge_nvbandwidth(
            stages.get("nvbandwidth"), floors.get("nvbandwidth")
        ),
        "nccl": lambda: judge_nccl(stages.get("nccl"), floors.get("nccl")),
    }
    out = []
    for name, run in judged.items():
        if not options.runs(name):
            out.append(StageResult(name, SKIPPED, ("skipped (--skip)",)))
        elif name not in stages and name != "telemetry":
            why = "interrupted before this stage" if doc.get("interrupted") else "not run"
            out.append(could_not_run(name, why))
        else:
            out.append(_guarded(name, run))
    by_stage = {"soak": "gemm", "nvbandwidth": "nvbandwidth", "nccl": "nccl"}
    return [
        replace(r, measured={**r.measured, "floor_source": origins[by_stage[r.stage]]})
        if by_stage.get(r.stage) in origins and r.floors
        else r
        for r in out
    ]


def host_verdict(stages: Sequence[StageResult]) -> str:
    verdicts = {s.verdict for s in stages}
    if FAIL in verdicts:
        return FAIL
    if COULD_NOT_RUN in verdicts or not (verdicts - {SKIPPED}):
        return COULD_NOT_RUN
    return PASS
