"""What ``gpuhost accept`` was asked, checked before any host is touched (pure).

``parse_duration("4h")`` → 14400.0; ``check_stages(["dcgm"])`` → the skipped stage names;
``parse_floor("nccl=350GB/s")`` → ("nccl", 350.0). Each bad value is one ConfigError line naming
the option, what was found and what is expected (exit 2).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpuhost.errors import ConfigError

#: every stage in run order; ``telemetry`` is judged from the soak's samples
STAGES = (
    "inventory",
    "dcgm",
    "soak",
    "telemetry",
    "nvbandwidth",
    "nccl",
    "ib",
    "collective",
)
#: stages run by the on-host agent (accept/agent.py)
AGENT_STAGES = ("inventory", "dcgm", "soak", "nvbandwidth", "nccl")
#: the floors a user can give, each in its one unit (the unit the tool reports)
FLOOR_UNITS = {"gemm": "TFLOPS", "nvbandwidth": "GB/s", "nccl": "GB/s", "ib": "Gb/s"}
DCGM_LEVELS = (3, 4)
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_FLOOR_RE = re.compile(r"^([a-z]+)=(\d+(?:\.\d+)?)\s*([A-Za-z/]+)$")
#: the shortest soak that samples anything (two sample intervals)
MIN_DURATION_S = 10.0
#: the longest: a burn-in of more than 30 days is a typo (an hour's number given in days)
MAX_DURATION_S = 30 * 86400.0


def parse_duration(text: str) -> float:
    """``60s``, ``90m``, ``4h``, ``1d`` or plain seconds → seconds (a positive, finite time)."""
    match = _DURATION_RE.match(str(text))
    number = float(match.group(1)) if match else math.nan
    if not match or not math.isfinite(number) or number <= 0:
        raise ConfigError(f"--duration {text!r}: expected a positive time such as 60s, 90m or 4h")
    seconds = number * _UNIT_SECONDS[(match.group(2) or "s").lower()]
    if not seconds <= MAX_DURATION_S:  # inf too (a number too large to be one)
        raise ConfigError(
            f"--duration {str(text)[:40]!r}: expected at most {MAX_DURATION_S / 86400:g}d"
        )
    if seconds < MIN_DURATION_S:
        raise ConfigError(
            f"--duration {text!r}: expected at least {MIN_DURATION_S:g}s (the soak samples the "
            "GPUs every few seconds)"
        )
    return seconds


def check_stages(skip: Iterable[str]) -> frozenset[str]:
    """The ``--skip`` names, each one of ``STAGES``."""
    skipped = frozenset(skip)
    unknown = sorted(skipped - set(STAGES))
    if unknown:
        raise ConfigError(
            f"--skip {unknown[0]!r}: no such stage; expected one of {', '.join(STAGES)}"
        )
    return skipped


def parse_floor(text: str) -> tuple[str, float]:
    """``STAGE=NUMBER UNIT`` (``nccl=350GB/s``, ``gemm=600TFLOPS``, ``ib=380Gb/s``)."""
    match = _FLOOR_RE.match(text.strip())
    shown = ", ".join(f"{k}=N{u}" for k, u in FLOOR_UNITS.items())
    if not match or match.group(1) not in FLOOR_UNITS:
        raise ConfigError(f"--floor {text!r}: expected STAGE=NUMBER UNIT, one of {shown}")
    stage, number, unit = match.group(1), float(match.group(2)), match.group(3)
    if unit != FLOOR_UNITS[stage]:
        raise ConfigError(
            f"--floor {text!r}: {stage} is measured in {FLOOR_UNITS[stage]}, not {unit}"
        )
    if not math.isfinite(number) or number <= 0:
        raise ConfigError(f"--floor {text!r}: expected a number above 0")
    return stage, number


@dataclass(frozen=True)
class AcceptOptions:
    """One acceptance run's settings (all checked)."""

    duration_s: float = 3600.0
    skip: frozenset[str] = frozenset()
    floors: dict[str, float] = field(default_factory=dict)
    dcgm_level: int = 3
    interval_s: float = 2.0
    gate: str | None = None  # None | "slurm" | "k8s"

    def runs(self, stage: str) -> bool:
        if stage == "telemetry":
            return "soak" not in self.skip and stage not in self.skip
        return stage not in self.skip

    def agent_stages(self) -> list[str]:
        return [s for s in AGENT_STAGES if self.runs(s)]


def accept_options(
    duration: str,
    skip: Iterable[str],
    floors: Iterable[str],
    dcgm_level: int = 3,
    gate: str | None = None,
) -> AcceptOptions:
    """Every option checked; the first problem is the ConfigError."""
    seconds = parse_duration(duration)
    skipped = check_stages(skip)
    if skipped >= set(STAGES):
        raise ConfigError(
            f"--skip: every stage skipped; expected at least one of {', '.join(STAGES)} to run"
        )
    given: dict[str, float] = {}
    for text in floors:
        stage, number = parse_floor(text)
        if given.get(stage, number) != number:
            raise ConfigError(
                f"--floor {text!r}: {stage} already has the floor {given[stage]:g}; "
                "expected one floor per stage"
            )
        skipped_stage = "soak" if stage == "gemm" else stage
        if skipped_stage in skipped:
            raise ConfigError(
                f"--floor {text!r}: the {skipped_stage} stage is skipped (--skip), so the floor "
                "would judge nothing; expected a floor for a stage that runs"
            )
        given[stage] = number
    if dcgm_level not in DCGM_LEVELS:
        raise ConfigError(f"--dcgm-level {dcgm_level}: expected 3 or 4")
    interval = min(10.0, max(1.0, seconds / 30))
    return AcceptOptions(seconds, skipped, given, dcgm_level, interval, gate)
