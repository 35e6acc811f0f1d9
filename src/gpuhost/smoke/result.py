"""The smoke script's JSON document, validated into typed objects.

``parse_result`` checks the shape of a document printed by ``gpuhost/smoke/script.py`` (schema
version, field types) and returns a :class:`SmokeResult`; anything malformed raises ONE
:class:`~gpuhost.errors.ParseError` listing every bad field by its path.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuhost.errors import ParseError
from gpuhost.smoke.script import OUTCOMES, SCHEMA

MAX_PROBLEMS_SHOWN = 8


@dataclass(frozen=True)
class Check:
    """One check as the script reported it."""

    name: str
    outcome: str
    reason: str
    device: int | None = None
    value: Any = None
    numbers: Mapping[str, float | None] = field(default_factory=dict)

    def number(self, key: str) -> float | None:
        value = self.numbers.get(key)
        return None if value is None else float(value)


@dataclass(frozen=True)
class Device:
    """A GPU as the framework sees it."""

    index: int
    name: str
    capability: str


@dataclass(frozen=True)
class SmiGpu:
    """A GPU as ``nvidia-smi`` lists it."""

    index: int
    name: str
    compute_cap: str | None = None
    mig_devices: int = 0


@dataclass(frozen=True)
class FrameworkResult:
    name: str
    installed: bool
    reason: str
    version: str | None
    cuda: str | None
    cudnn: str | None
    arch_list: tuple[str, ...]
    devices: tuple[Device, ...]
    checks: tuple[Check, ...]

    def device(self, index: int | None) -> Device | None:
        return next((d for d in self.devices if d.index == index), None)


@dataclass(frozen=True)
class SmokeResult:
    schema: int
    host: str
    python_executable: str
    python_version: str
    smi_available: bool
    smi_reason: str
    driver_version: str | None
    driver_cuda: str | None
    gpus: tuple[SmiGpu, ...]
    frameworks: Mapping[str, FrameworkResult]


class _Validator:
    """Collects every problem as 'path: found X, expected Y'."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def bad(self, path: str, found: Any, expected: str) -> None:
        shown = json.dumps(found)[:60] if _jsonable(found) else type(found).__name__
        self.problems.append(f"{path}: found {shown}, expected {expected}")

    def obj(self, parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any] | None:
        value = parent.get(key)
        if not isinstance(value, Mapping):
            self.bad(_join(path, key), value, "an object")
            return None
        return value

    def list_of_obj(self, parent: Mapping[str, Any], key: str, path: str) -> list[Any]:
        value = parent.get(key)
        if not isinstance(value, list):
            self.bad(_join(path, key), value, "a list")
            return []
        return value

    def text(
        self, parent: Mapping[str, Any], key: str, path: str, optional: bool = False
    ) -> str | None:
        value = parent.get(key)
        if value is None and optional:
            return None
        if not isinstance(value, str):
            self.bad(_join(path, key), value, "a string or null" if optional else "a string")
            return None if optional else ""
        return value

    def integer(
        self, parent: Mapping[str, Any], key: str, path: str, optional: bool = False
    ) -> int | None:
        value = parent.get(key)
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.bad(_join(path, key), value, "an integer or null" if optional else "an integer")
            return None
        return value

    def flag(self, parent: Mapping[str, Any], key: str, path: str) -> bool:
        value = parent.get(key)
        if not isinstance(value, bool):
            self.bad(_join(path, key), value, "true or false")
            return False
        return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _check(v: _Validator, raw: Any, path: str) -> Check | None:
    if not isinstance(raw, Mapping):
        v.bad(path, raw, "a check object")
        return None
    before = len(v.problems)
    name = v.text(raw, "name", path) or ""
    if isinstance(raw.get("name"), str) and not name.strip():
        v.problems.append(f"{path}.name: empty, expected a check name")
    outcome = raw.get("outcome")
    if outcome not in OUTCOMES:
        v.bad(f"{path}.outcome", outcome, "one of " + ", ".join(OUTCOMES))
    reason = v.text(raw, "reason", path) or ""
    device = v.integer(raw, "device", path, optional=True)
    numbers_raw = raw.get("numbers", {})
    numbers: dict[str, float | None] = {}
    if numbers_raw is None:
        numbers_raw = {}
    if not isinstance(numbers_raw, Mapping):
        v.bad(f"{path}.numbers", numbers_raw, "an object of numbers")
    else:
        for key, number in numbers_raw.items():
            if number is None:
                numbers[str(key)] = None
            elif isinstance(number, bool) or not isinstance(number, (int, float)):
                v.bad(f"{path}.numbers.{key}", number, "a number or null")
            elif not math.isfinite(number):  # NaN passed every threshold comparison
                v.bad(f"{path}.numbers.{key}", number, "a finite number or null")
            else:
                numbers[str(key)] = float(number)
    if len(v.problems) != before:
        return None
    return Check(name, str(outcome), reason, device, raw.get("value"), numbers)


def _framework(v: _Validator, name: str, raw: Any, path: str) -> FrameworkResult | None:
    if not isinstance(raw, Mapping):
        v.bad(path, raw, "a framework object")
        return None
    before = len(v.problems)
    installed = v.flag(raw, "installed", path)
    reason = v.text(raw, "reason", path) or ""
    version = v.text(raw, "version", path, optional=True)
    cuda = v.text(raw, "cuda", path, optional=True)
    cudnn = v.text(raw, "cudnn", path, optional=True)
    arch_list: list[str] = []
    for position, entry in enumerate(v.list_of_obj(raw, "arch_list", path)):
        if isinstance(entry, str):
            arch_list.append(entry)
        else:
            v.bad(f"{path}.arch_list[{position}]", entry, "a string like 'sm_90'")
    devices: list[Device] = []
    for position, entry in enumerate(v.list_of_obj(raw, "devices", path)):
        where = f"{path}.devices[{position}]"
        if not isinstance(entry, Mapping):
            v.bad(where, entry, "a device object")
            continue
        index = v.integer(entry, "index", where)
        dev_name = v.text(entry, "name", where)
        capability = v.text(entry, "capability", where)
        if index is not None and dev_name is not None and capability is not None:
            devices.append(Device(index, dev_name, capability))
    checks: list[Check] = []
    raw_checks = v.list_of_obj(raw, "checks", path)
    for position, entry in enumerate(raw_checks):
        check = _check(v, entry, f"{path}.checks[{position}]")
        if check is not None:
            checks.append(check)
    if isinstance(raw.get("checks"), list) and not raw_checks:
        v.problems.append(f"{path}.checks: empty, expected at least the 'import' check")
    if len(v.problems) != before:
        return None
    return FrameworkResult(
        name,
        installed,
        reason,
        version,
        cuda,
        cudnn,
        tuple(arch_list),
        tuple(devices),
        tuple(checks),
    )


def parse_result(doc: object, source: str = "smoke result") -> SmokeResult:
    """Validate a decoded smoke document; raise one ParseError naming every bad field."""
    if not isinstance(doc, Mapping):
        raise ParseError(
            f"{source}: malformed smoke-test result: found {type(doc).__name__}, "
            "expected a JSON object"
        )
    schema = doc.get("schema")
    if schema != SCHEMA or isinstance(schema, bool):
        raise ParseError(
            f"{source}: smoke-test result has schema {json.dumps(schema)}, this gpuhost reads "
            f"schema {SCHEMA}; run the smoke script shipped with this gpuhost"
        )
    v = _Validator()
    host = v.text(doc, "host", "") or ""
    executable = py_version = smi_reason = ""
    driver_version = driver_cuda = None
    smi_available = False
    python = v.obj(doc, "python", "")
    if python is not None:
        executable = v.text(python, "executable", "python") or ""
        py_version = v.text(python, "version", "python") or ""
    smi = v.obj(doc, "nvidia_smi", "")
    if smi is not None:
        smi_available = v.flag(smi, "available", "nvidia_smi")
        smi_reason = v.text(smi, "reason", "nvidia_smi") or ""
        driver_version = v.text(smi, "driver_version", "nvidia_smi", optional=True)
        driver_cuda = v.text(smi, "cuda_version", "nvidia_smi", optional=True)
    gpus: list[SmiGpu] = []
    for position, entry in enumerate(v.list_of_obj(doc, "gpus", "")):
        where = f"gpus[{position}]"
        if not isinstance(entry, Mapping):
            v.bad(where, entry, "a GPU object")
            continue
        index = v.integer(entry, "index", where)
        name = v.text(entry, "name", where)
        cap = v.text(entry, "compute_cap", where, optional=True)
        mig = v.integer(entry, "mig_devices", where, optional=True)
        if index is not None and name is not None:
            gpus.append(SmiGpu(index, name, cap, mig or 0))
    frameworks: dict[str, FrameworkResult] = {}
    raw_frameworks = v.obj(doc, "frameworks", "") or {}
    for fw_name, raw in raw_frameworks.items():
        parsed = _framework(v, str(fw_name), raw, f"frameworks.{fw_name}")
        if parsed is not None:
            frameworks[str(fw_name)] = parsed
    if v.problems:
        shown = "; ".join(v.problems[:MAX_PROBLEMS_SHOWN])
        more = len(v.problems) - MAX_PROBLEMS_SHOWN
        tail = f" (and {more} more)" if more > 0 else ""
        raise ParseError(f"{source}: malformed smoke-test result: {shown}{tail}")
    return SmokeResult(
        schema=SCHEMA,
        host=host,
        python_executable=executable,
        python_version=py_version,
        smi_available=smi_available,
        smi_reason=smi_reason,
        driver_version=driver_version,
        driver_cuda=driver_cuda,
        gpus=tuple(gpus),
        frameworks=frameworks,
    )


def parse_result_text(text: str, source: str = "smoke result") -> SmokeResult:
    """Parse the script's stdout: exactly one JSON document."""
    if not text.strip():
        raise ParseError(f"{source}: empty output, expected the smoke script's JSON document")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        first = text.strip().splitlines()[0][:80]
        raise ParseError(
            f"{source}: not one JSON document ({exc}); output starts with {first!r}"
        ) from None
    return parse_result(doc, source)
