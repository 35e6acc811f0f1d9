"""The GPUs' telemetry over a whole soak, judged (pure).

The on-host agent samples ``nvidia-smi --query-gpu=SAMPLE_FIELDS --format=csv,noheader,nounits``
every few seconds; ``parse_samples`` reads them (``gpuhost.parsers.nvidia_smi.parse_query_csv``)
into one ``Series`` per GPU, and ``judge_series`` says what went wrong during the soak: clock
event reasons active (the fault catalog's ``gpu.clocks.*`` rows and actions), the temperature at
or above the GPU's slowdown threshold, the spread between GPUs, power above the cap, ECC
errors counted. ``summary`` gives the measured values a record keeps.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from yaml import YAMLError

from gpuhost.datadir import data_path
from gpuhost.datafiles import load_yaml, read_file_text, yaml_problem
from gpuhost.errors import ConfigError, ParseError
from gpuhost.faults.gpu import catalog_finding
from gpuhost.findings import Finding
from gpuhost.parsers.nvidia_smi import parse_query_csv

#: nvidia-smi's clock event fields → the fault catalog's id (most specific first: a HW thermal
#: slowdown or power brake also shows HW slowdown, which is then not reported again)
CLOCK_EVENT_RULES = (
    ("clocks_event_reasons.hw_thermal_slowdown", "gpu.clocks.hw-thermal", "HW thermal slowdown"),
    (
        "clocks_event_reasons.hw_power_brake_slowdown",
        "gpu.clocks.power-brake",
        "HW power brake slowdown",
    ),
    ("clocks_event_reasons.hw_slowdown", "gpu.clocks.hw-slowdown", "HW slowdown"),
    ("clocks_event_reasons.sw_thermal_slowdown", "gpu.clocks.sw-thermal", "SW thermal slowdown"),
)
ACTIVE = "active"
#: nvidia-smi's other names of the fields read here (--help-query-gpu lists both)
ALIASES = {"clocks.sm": "clocks.current.sm", "clocks.max.sm": "clocks.max.sm"} | {
    name: name.replace("clocks_event_reasons.", "clocks_throttle_reasons.")  # before driver 535
    for name, _rule, _what in CLOCK_EVENT_RULES
}


#: what a reading of each numeric field can be at all (the agent asks ``nounits``: C, W, MHz, %,
#: counts): a percent is 0-100 and a count at least 0 by definition; no GPU reports a temperature
#: outside -50..200 C (silicon stops working far below that), draws or is capped at 5 kW or more,
#: or clocks at 10 GHz. A value outside, or not a finite number, is a stream that lies (a broken
#: or hostile host, a garbled line): the soak's telemetry gets no verdict from it.
READING_RANGES = {
    "temperature.gpu": (-50.0, 200.0),
    "power.draw": (0.0, 5000.0),
    "power.limit": (0.0, 5000.0),
    "clocks.sm": (0.0, 10000.0),
    "clocks.max.sm": (0.0, 10000.0),
    "utilization.gpu": (0.0, 100.0),
    "ecc.errors.corrected.volatile.total": (0.0, 2.0**64),
    "ecc.errors.uncorrected.volatile.total": (0.0, 2.0**64),
}
#: counters that only grow during a soak (volatile ECC counts reset only with the driver)
COUNTERS = ("ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total")


@dataclass(frozen=True)
class Sample:
    t: float
    values: Mapping[str, str | None]

    def get(self, name: str) -> str | None:
        return self.values.get(name, self.values.get(ALIASES.get(name, name)))

    def number(self, name: str) -> float | None:
        raw = self.get(name)
        try:
            return float(raw) if raw not in (None, "") else None
        except ValueError:
            return None


@dataclass(frozen=True)
class Series:
    """One GPU's samples in time order."""

    index: int
    bus_id: str
    samples: tuple[Sample, ...] = field(default_factory=tuple)

    @property
    def label(self) -> str:
        return f"GPU {self.index} ({self.bus_id})"

    def numbers(self, name: str) -> list[float]:
        return [v for s in self.samples if (v := s.number(name)) is not None]

    def growth(self, name: str) -> float | None:
        values = self.numbers(name)
        return values[-1] - values[0] if len(values) >= 2 else None


@dataclass(frozen=True)
class Limits:
    temperature_spread_c: float
    ecc_correctable_growth: float
    outlier_fraction: float
    clock_events: float


@functools.lru_cache(maxsize=1)
def load_limits() -> Limits:
    """data/acceptance.yaml's limits (read as every data file is: no FIFO, device or huge
    file); ConfigError naming a missing or bad one: not a finite number >= 0 (``.nan``, ``.inf``,
    a string, a list), a fraction above 1, a source not in ``sources``."""
    path = data_path("acceptance.yaml")
    try:
        raw = load_yaml(read_file_text(path, "acceptance limits"))
    except YAMLError as exc:
        raise ConfigError(f"{path}: {yaml_problem(exc)}") from None
    limits = raw.get("limits") if isinstance(raw, dict) else None
    sources = raw.get("sources") if isinstance(raw, dict) else None
    limits = limits if isinstance(limits, dict) else {}
    sources = sources if isinstance(sources, dict) else {}
    values: dict[str, float] = {}
    for name in (
        "temperature_spread_c",
        "ecc_correctable_growth",
        "outlier_fraction",
        "clock_events",
    ):
        row = limits.get(name)
        value = row.get("value") if isinstance(row, dict) else None
        source = row.get("source") if isinstance(row, dict) else None
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
            or (name == "outlier_fraction" and value > 1)
            or not isinstance(source, str)
            or source not in sources
        ):
            shown = "a fraction from 0 to 1" if name == "outlier_fraction" else "a number >= 0"
            raise ConfigError(
                f"{path}: limits.{name}: found {str(row)[:60]}; expected {shown} with a source "
                "of 'sources'"
            )
        values[name] = float(value)
    return Limits(**values)


def _sample_time(sample: Mapping[str, Any]) -> float:
    raw = sample.get("t") or 0
    try:
        t = float(raw)
    except (TypeError, ValueError):
        t = math.nan
    if isinstance(raw, bool) or not math.isfinite(t) or t < 0:
        raise ParseError(f"telemetry sample time {raw!r}: expected seconds into the soak (>= 0)")
    return t


def _checked_reading(sample: Sample, bus: str) -> None:
    """Every numeric reading of ``sample`` a finite number in its field's range (nvidia-smi's
    ``[N/A]``/``[Not Supported]`` is a reading not made, not a lie)."""
    for name, (low, high) in READING_RANGES.items():
        raw = sample.get(name)
        if raw in (None, "") or str(raw).startswith("["):
            continue
        try:
            value = float(str(raw))
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and low <= value <= high):
            raise ParseError(
                f"telemetry of {bus} at {sample.t:g} s: {name} {str(raw)[:40]!r}; expected a "
                f"number from {low:g} to {high:g}: the samples are not a GPU's readings"
            )


def _gpu_index(row: Mapping[str, Any], bus: str) -> int:
    raw = str(row.get("index") or "").strip()
    if not raw.isdigit() or len(raw) > 4:
        raise ParseError(f"telemetry of {bus}: index {raw[:40]!r}; expected the GPU's number")
    return int(raw)


def _check_counters(series: Series) -> None:
    for name in COUNTERS:
        values = series.numbers(name)
        for before, after in zip(values, values[1:], strict=False):
            if after < before:
                raise ParseError(
                    f"telemetry of {series.label}: {name} went down from {before:g} to "
                    f"{after:g} during the soak; expected a counter that only grows"
                )


def parse_samples(samples: Sequence[Mapping[str, Any]], fields: str) -> list[Series]:
    """The agent's samples → one Series per GPU (by bus id, in index order). A sample whose
    nvidia-smi failed is left out; a sample that is not the query's CSV, a reading that is no
    GPU's (not finite, out of its field's range, a counter going down), a GPU twice in one
    sample or two GPUs with one index is a ParseError (COULD-NOT-RUN: no verdict from a lie)."""
    by_bus: dict[str, list[Sample]] = {}
    index_of: dict[str, int] = {}
    for sample in samples:
        if not isinstance(sample, Mapping):
            raise ParseError(f"telemetry sample {str(sample)[:40]!r}: expected an object")
        if sample.get("rc") != 0 or not str(sample.get("csv") or "").strip():
            continue
        text = str(sample["csv"])
        t = _sample_time(sample)
        # the agent asks noheader,nounits; a capture with nvidia-smi's header (and units) reads too
        header = text.lstrip().startswith(fields.split(",")[0].strip() + ",")
        fmt = "csv" if header else "csv,noheader"
        rows = parse_query_csv(text, f"--query-gpu={fields} --format={fmt}")
        seen: set[str] = set()
        for row in rows:
            bus = str(row.get("pci.bus_id") or "?")
            if bus in seen:
                raise ParseError(f"telemetry at {t:g} s: GPU {bus} twice in one sample")
            seen.add(bus)
            index = index_of.setdefault(bus, _gpu_index(row, bus))
            if list(index_of.values()).count(index) > 1:
                raise ParseError(f"telemetry at {t:g} s: two GPUs with index {index}")
            reading = Sample(t, row)
            _checked_reading(reading, bus)
            by_bus.setdefault(bus, []).append(reading)
    all_series = sorted(
        (Series(index_of[bus], bus, tuple(found)) for bus, found in by_bus.items()),
        key=lambda s: s.index,
    )
    for series in all_series:
        _check_counters(series)
    return all_series


def _is_active(value: str | None) -> bool:
    return (value or "").strip().lower() == ACTIVE


def clock_event_findings(series: Series) -> list[Finding]:
    """One finding per clock event reason seen active in any sample (the most specific)."""
    findings = []
    seen_specific = False
    for name, rule, what in CLOCK_EVENT_RULES:
        active = [s for s in series.samples if _is_active(s.get(name))]
        if not active or (rule == "gpu.clocks.hw-slowdown" and seen_specific):
            continue
        seen_specific = seen_specific or rule in ("gpu.clocks.hw-thermal", "gpu.clocks.power-brake")
        findings.append(
            catalog_finding(
                rule,
                f"{series.label}: {what} active in {len(active)} of {len(series.samples)} "
                f"samples, first at {active[0].t:g} s into the soak; expected not active "
                "during the whole soak",
                found=f"{series.label}: {what} from {active[0].t:g} s",
                expected="no clock event reason active during the soak",
                severity="error",
            )
        )
    return findings


def _finding(rule: str, message: str, found: str, expected: str, action: str) -> Finding:
    return Finding(rule, "error", message, found=found, expected=expected, action=action)


def temperature_findings(
    all_series: Sequence[Series], slowdown_c: Mapping[str, float], limits: Limits
) -> list[Finding]:
    """A GPU at or above its slowdown temperature (``slowdown_c`` by bus id, from nvidia-smi -q
    -x; a GPU without one is judged by its HW thermal slowdown reason alone) and the spread of
    the GPUs' highest temperatures."""
    findings = []
    peaks: dict[str, float] = {}
    for series in all_series:
        temps = series.numbers("temperature.gpu")
        if not temps:
            continue
        peaks[series.label] = max(temps)
        limit = slowdown_c.get(series.bus_id)
        if limit is not None and max(temps) >= limit:
            findings.append(
                _finding(
                    "accept.temperature.slowdown",
                    f"{series.label}: reached {max(temps):g} C, at or above its slowdown "
                    f"temperature {limit:g} C",
                    f"{max(temps):g} C",
                    f"below {limit:g} C",
                    "inspect-hardware",
                )
            )
    if len(peaks) >= 2:
        hottest = max(peaks, key=lambda k: peaks[k])
        coolest = min(peaks, key=lambda k: peaks[k])
        spread = peaks[hottest] - peaks[coolest]
        if spread > limits.temperature_spread_c:
            findings.append(
                _finding(
                    "accept.temperature.spread",
                    f"{hottest} peaked at {peaks[hottest]:g} C, {spread:g} C above {coolest} "
                    f"({peaks[coolest]:g} C); expected at most {limits.temperature_spread_c:g} C "
                    "between the GPUs of a node",
                    f"spread {spread:g} C",
                    f"at most {limits.temperature_spread_c:g} C",
                    "inspect-hardware",
                )
            )
    return findings


def power_and_ecc_findings(series: Series, limits: Limits) -> list[Finding]:
    findings = []
    over = [
        s
        for s in series.samples
        if (draw := s.number("power.draw")) is not None
        and (cap := s.number("power.limit")) is not None
        and draw > cap
    ]
    if over:
        findings.append(
            _finding(
                "accept.power.over-cap",
                f"{series.label}: drew {over[0].number('power.draw'):g} W above its "
                f"{over[0].number('power.limit'):g} W cap at {over[0].t:g} s",
                f"{len(over)} samples above the cap",
                "power draw at or below the enforced power limit",
                "inspect-hardware",
            )
        )
    unc = series.growth("ecc.errors.uncorrected.volatile.total")
    if unc:
        findings.append(
            catalog_finding(
                "gpu.ecc-uncorrectable",
                f"{series.label}: {unc:g} uncorrectable ECC error(s) during the soak",
                found=f"+{unc:g} uncorrectable",
                expected="no uncorrectable ECC error",
            )
        )
    corr = series.growth("ecc.errors.corrected.volatile.total")
    if corr is not None and corr > limits.ecc_correctable_growth:
        findings.append(
            _finding(
                "accept.ecc.correctable-growth",
                f"{series.label}: {corr:g} correctable ECC error(s) during the soak; expected at "
                f"most {limits.ecc_correctable_growth:g}",
                f"+{corr:g} correctable",
                f"at most {limits.ecc_correctable_growth:g}",
                "watch",
            )
        )
    return findings


def judge_series(
    all_series: Sequence[Series], slowdown_c: Mapping[str, float], limits: Limits
) -> list[Finding]:
    """Every telemetry problem of the soak; [] when nothing went wrong. No series at all is
    a ParseError (the caller says COULD-NOT-RUN: no data, no verdict)."""
    if not all_series or not any(s.samples for s in all_series):
        raise ParseError("no telemetry sample could be read during the soak")
    findings: list[Finding] = []
    for series in all_series:
        findings += clock_event_findings(series)
        findings += power_and_ecc_findings(series, limits)
    findings += temperature_findings(all_series, slowdown_c, limits)
    return findings


def summary(all_series: Sequence[Series]) -> list[dict[str, Any]]:
    """Per GPU: samples, highest temperature, highest power and its cap, lowest and median SM
    clock under load (the samples with a utilization above 0; all where none has), ECC growth
    (None where not reported)."""
    out = []
    for series in all_series:
        temps, power = series.numbers("temperature.gpu"), series.numbers("power.draw")
        busy = [s for s in series.samples if (s.number("utilization.gpu") or 0) > 0]
        loaded = Series(series.index, series.bus_id, tuple(busy)) if busy else series
        caps, clocks = series.numbers("power.limit"), sorted(loaded.numbers("clocks.sm"))
        out.append(
            {
                "gpu": series.index,
                "bus_id": series.bus_id,
                "samples": len(series.samples),
                "temperature_max_c": max(temps) if temps else None,
                "power_max_w": max(power) if power else None,
                "power_cap_w": max(caps) if caps else None,
                "sm_clock_min_mhz": clocks[0] if clocks else None,
                "sm_clock_median_mhz": clocks[len(clocks) // 2] if clocks else None,
                "ecc_corrected_growth": series.growth("ecc.errors.corrected.volatile.total"),
                "ecc_uncorrected_growth": series.growth("ecc.errors.uncorrected.volatile.total"),
            }
        )
    return out
