"""What one acceptance run is about: the request and each host's part of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuhost.accept.judge import StageResult
from gpuhost.accept.options import AcceptOptions
from gpuhost.accept.remote import Remote
from gpuhost.checks_support.inventory import CheckHost


@dataclass(frozen=True)
class AcceptRequest:
    inventory: str
    limit: str | None
    options: AcceptOptions
    state_dir: Path
    json_path: str | None = None
    junit_path: str | None = None
    prom_path: str | None = None
    collective: bool = False
    parallel: int = 32


@dataclass
class HostRun:
    host: CheckHost
    remote: Remote
    doc: dict[str, Any] | None = None
    error: str | None = None
    stages: list[StageResult] = field(default_factory=list)
    last_progress: dict[str, float] = field(default_factory=dict)
