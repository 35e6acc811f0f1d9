"""Published peaks per GPU model (``data/gpu_peaks.yaml``): the smoke test's performance references.

``load_peaks()`` validates the file (every row names a known source and confidence, numbers are
positive, a GPU name belongs to one row only) and ``smoke_references(peaks, names)`` turns the rows
matching the GPU names of a smoke result into the judge's
:class:`~gpuhost.smoke.judge.PerfReference` per metric:

- ``matmul_tflops_fp16``: the dense FP16 tensor peak;
- ``h2d_gbps`` / ``d2h_gbps``: the per-direction rate of the PCIe link the datasheet names;
- no ``nccl_busbw_gbps``: a datasheet's NVLink figure is a per-GPU total whose share in an
  all-reduce depends on the board's topology, so it is shown, never judged against.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpuhost.errors import MatrixError
from gpuhost.gpus.names import sku_key
from gpuhost.matrix.load import CONFIDENCES
from gpuhost.matrix.model import Source
from gpuhost.matrix.yamlfile import read_mapping
from gpuhost.smoke.judge import Expectations, PerfReference, gpu_names, has_failures, judge
from gpuhost.smoke.report import report_lines
from gpuhost.smoke.result import SmokeResult, parse_result_text

RATIO_METRICS = ("matmul_tflops_fp16", "h2d_gbps", "d2h_gbps")
TFLOPS_FIELDS = ("fp16_tensor_tflops", "bf16_tensor_tflops", "tf32_tensor_tflops")


@dataclass(frozen=True)
class GpuPeak:
    """One GPU model's published peaks (dense tensor TFLOP/s, GB/s); None = no source gives it."""

    model: str
    names: tuple[str, ...]
    source: str
    confidence: str
    fp16_tensor_tflops: float | None = None
    bf16_tensor_tflops: float | None = None
    tf32_tensor_tflops: float | None = None
    sparse_halved: bool = False
    memory_gbps: float | None = None
    nvlink_gbps: float | None = None
    pcie_gen: str | None = None
    pcie_width: int | None = None
    pcie_gbps_per_direction: float | None = None
    note: str = ""


@dataclass(frozen=True)
class Peaks:
    sources: Mapping[str, Source]
    gpus: tuple[GpuPeak, ...]
    min_ratio: Mapping[str, float]
    no_reference: tuple[tuple[str, str], ...]
    lanes: Mapping[str, tuple[float, str]]

    def find(self, name: str) -> GpuPeak | None:
        """The row whose ``names`` hold ``name`` as a SKU (gpuhost.gpus.names.sku_key: case,
        spaces, '-', '_' and a leading "NVIDIA" ignored)."""
        wanted = sku_key(name)
        return next((g for g in self.gpus if wanted in {sku_key(n) for n in g.names}), None)


def default_peaks_path() -> str:
    return str(resources.files("gpuhost") / "data" / "gpu_peaks.yaml")


def load_peaks(path: str | None = None) -> Peaks:
    """The peaks file (default: the shipped one, cached); MatrixError lists every bad field."""
    return _default() if path is None else _load(path)


@functools.lru_cache(maxsize=1)
def _default() -> Peaks:
    return _load(default_peaks_path())


def _number(row: Mapping[str, Any], key: str, where: str, problems: list[str]) -> float | None:
    value = row.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        problems.append(f"{where}.{key}: found {value!r}, expected a positive number")
        return None
    return float(value)


def text_field(row: Mapping[str, Any], key: str, where: str, problems: list[str]) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where}.{key}: found {value!r}, expected a non-empty string")
        return ""
    return value


def read_sources(data: Mapping[str, Any], problems: list[str]) -> dict[str, Source]:
    raw = data.get("sources")
    if not isinstance(raw, dict):
        problems.append(f"sources: found {type(raw).__name__}, expected a mapping")
        return {}
    found: dict[str, Source] = {}
    for key, row in raw.items():
        if not isinstance(row, dict):
            problems.append(f"sources.{key}: expected a mapping with url and title")
            continue
        found[str(key)] = Source(
            str(key),
            text_field(row, "url", f"sources.{key}", problems),
            text_field(row, "title", f"sources.{key}", problems),
        )
    return found


def cited(
    row: Mapping[str, Any], where: str, sources: Mapping[str, Source], problems: list[str]
) -> tuple[str, str]:
    source = text_field(row, "source", where, problems)
    if source and source not in sources:
        problems.append(f"{where}.source: {source!r} is not a key of sources")
    confidence = row.get("confidence")
    if confidence not in CONFIDENCES:
        problems.append(
            f"{where}.confidence: found {confidence!r}, expected one of {', '.join(CONFIDENCES)}"
        )
    return source, str(confidence)


def _lanes(
    data: Mapping[str, Any], sources: Mapping[str, Source], problems: list[str]
) -> dict[str, tuple[float, str]]:
    raw = data.get("pcie_lane_gbps")
    if not isinstance(raw, dict):
        problems.append("pcie_lane_gbps: expected a mapping of PCIe generation to {gbps, source}")
        return {}
    lanes: dict[str, tuple[float, str]] = {}
    for gen, row in raw.items():
        where = f"pcie_lane_gbps.{gen}"
        if not isinstance(row, dict):
            problems.append(f"{where}: expected a mapping with gbps, source, confidence")
            continue
        source, _ = cited(row, where, sources, problems)
        gbps = _number(row, "gbps", where, problems)
        if gbps is not None:
            lanes[str(gen)] = (gbps, source)
    return lanes


def _gpu(
    row: Any,
    where: str,
    sources: Mapping[str, Source],
    lanes: Mapping[str, tuple[float, str]],
    problems: list[str],
) -> GpuPeak | None:
    if not isinstance(row, dict):
        problems.append(f"{where}: expected a mapping")
        return None
    before = len(problems)
    model = text_field(row, "model", where, problems)
    names_raw = row.get("names")
    if (
        not isinstance(names_raw, list)
        or not names_raw
        or not all(isinstance(n, str) and n.strip() for n in names_raw)
    ):
        problems.append(f"{where}.names: found {names_raw!r}, expected a list of GPU names")
        names_raw = []
    source, confidence = cited(row, where, sources, problems)
    tflops = {key: _number(row, key, where, problems) for key in TFLOPS_FIELDS}
    sparse = row.get("sparse_halved", False)
    if not isinstance(sparse, bool):
        problems.append(f"{where}.sparse_halved: found {sparse!r}, expected true or false")
    gen = width = per_direction = None
    pcie = row.get("pcie")
    if pcie is not None:
        if not isinstance(pcie, dict):
            problems.append(f"{where}.pcie: expected a mapping with gen and width")
        else:
            gen = str(pcie.get("gen"))
            width = pcie.get("width")
            if gen not in lanes:
                problems.append(
                    f"{where}.pcie.gen: found {pcie.get('gen')!r}, expected one of "
                    + ", ".join(sorted(lanes))
                )
            if width not in (1, 2, 4, 8, 16) or isinstance(width, bool):
                problems.append(f"{where}.pcie.width: found {width!r}, expected 1, 2, 4, 8 or 16")
            if gen in lanes and isinstance(width, int):
                per_direction = lanes[gen][0] * width
    if len(problems) != before:
        return None
    return GpuPeak(
        model=model,
        names=tuple(names_raw),
        source=source,
        confidence=confidence,
        fp16_tensor_tflops=tflops["fp16_tensor_tflops"],
        bf16_tensor_tflops=tflops["bf16_tensor_tflops"],
        tf32_tensor_tflops=tflops["tf32_tensor_tflops"],
        sparse_halved=bool(sparse),
        memory_gbps=_number(row, "memory_gbps", where, problems),
        nvlink_gbps=_number(row, "nvlink_gbps", where, problems),
        pcie_gen=gen,
        pcie_width=width if isinstance(width, int) else None,
        pcie_gbps_per_direction=per_direction,
        note=str(row.get("note", "")),
    )


def _ratios(data: Mapping[str, Any], problems: list[str]) -> dict[str, float]:
    raw = data.get("min_ratio")
    if not isinstance(raw, dict):
        problems.append("min_ratio: expected a mapping of metric to a fraction")
        return {}
    ratios: dict[str, float] = {}
    for metric, value in raw.items():
        if metric not in RATIO_METRICS:
            problems.append(
                f"min_ratio.{metric}: unknown metric, expected one of {', '.join(RATIO_METRICS)}"
            )
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            problems.append(f"min_ratio.{metric}: found {value!r}, expected a fraction in (0, 1]")
        else:
            ratios[str(metric)] = float(value)
    return ratios


def _load(path: str) -> Peaks:
    data = read_mapping(path, "sources, pcie_lane_gbps, min_ratio and gpus")
    problems: list[str] = []
    if data.get("schema") != 1:
        problems.append(f"schema: found {data.get('schema')!r}, expected 1")
    sources = read_sources(data, problems)
    lanes = _lanes(data, sources, problems)
    ratios = _ratios(data, problems)
    rows = data.get("gpus")
    gpus: list[GpuPeak] = []
    owner: dict[str, str] = {}
    for i, row in enumerate(rows if isinstance(rows, list) else []):
        gpu = _gpu(row, f"gpus[{i}]", sources, lanes, problems)
        if gpu is None:
            continue
        for name in gpu.names:
            key = sku_key(name)
            if key in owner and owner[key] != gpu.model:
                problems.append(f"gpus[{i}].names: {name!r} is also a name of {owner[key]!r}")
            owner[key] = gpu.model
        gpus.append(gpu)
    if not isinstance(rows, list):
        problems.append("gpus: expected a list of GPU rows")
    skipped = data.get("no_reference", [])
    no_reference: list[tuple[str, str]] = []
    for i, row in enumerate(skipped if isinstance(skipped, list) else []):
        if isinstance(row, dict):
            where = f"no_reference[{i}]"
            no_reference.append(
                (
                    text_field(row, "model", where, problems),
                    text_field(row, "reason", where, problems),
                )
            )
        else:
            problems.append(f"no_reference[{i}]: expected a mapping with model and reason")
    if problems:
        raise MatrixError(path, problems)
    return Peaks(sources, tuple(gpus), ratios, tuple(no_reference), lanes)


def references(
    peak: GpuPeak, peaks: Peaks, min_ratio: float | None = None
) -> dict[str, PerfReference]:
    """The smoke judge's references for one model; ``min_ratio`` overrides the data's fractions."""
    source = peaks.sources[peak.source]
    cite = f"{source.url} ({peak.confidence})"
    found: dict[str, PerfReference] = {}
    if peak.fp16_tensor_tflops is not None:
        dense = " dense (datasheet's sparse figure halved)" if peak.sparse_halved else " dense"
        found["matmul_tflops_fp16"] = PerfReference(
            peak.fp16_tensor_tflops,
            f"{peak.model} FP16 tensor{dense}, {cite}",
            min_ratio if min_ratio is not None else peaks.min_ratio.get("matmul_tflops_fp16"),
        )
    if peak.pcie_gbps_per_direction is not None:
        lane_source = peaks.sources[peaks.lanes[str(peak.pcie_gen)][1]].url
        link = (
            f"{peak.model} PCIe Gen{peak.pcie_gen} x{peak.pcie_width} per direction, {cite}; "
            f"lane rate: {lane_source}"
        )
        for metric in ("h2d_gbps", "d2h_gbps"):
            found[metric] = PerfReference(
                peak.pcie_gbps_per_direction,
                link,
                min_ratio if min_ratio is not None else peaks.min_ratio.get(metric),
            )
    return found


def smoke_references(
    names: Iterable[str], peaks: Peaks | None = None, min_ratio: float | None = None
) -> dict[str, dict[str, PerfReference]]:
    """GPU name (as given) -> metric -> reference, for every name a row of the peaks knows."""
    table = peaks if peaks is not None else load_peaks()
    found: dict[str, dict[str, PerfReference]] = {}
    for name in names:
        row = table.find(name)
        if row is not None:
            found[name] = references(row, table, min_ratio)
    return found


def smoke_expectations(
    result: SmokeResult, gpus: int | None, driver_cuda: str | None, min_ratio: float | None
) -> Expectations:
    """What ``gpuhost smoke`` judges a result against: the expectation options and the GPUs'
    published peaks (``min_ratio`` overrides the data's fractions)."""
    return Expectations(
        gpu_count=gpus,
        driver_max_cuda=driver_cuda,
        min_ratio=min_ratio,
        references=smoke_references(gpu_names(result), min_ratio=min_ratio),
    )


def judge_smoke_document(
    text: str,
    source: str,
    gpus: int | None,
    driver_cuda: str | None,
    min_ratio: float | None,
    as_json: bool,
) -> tuple[list[str], bool]:
    """``gpuhost smoke run|judge``: parse a smoke script's JSON document, judge it against the
    expectation options and the GPUs' published peaks (``min_ratio`` overrides the data's
    fractions); the verdicts' lines and whether a check FAILed."""
    result = parse_result_text(text, source)
    verdicts = judge(result, smoke_expectations(result, gpus, driver_cuda, min_ratio))
    return report_lines(result, verdicts, as_json), has_failures(verdicts)
