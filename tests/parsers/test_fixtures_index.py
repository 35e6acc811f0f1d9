"""Every captured output in tests/fixtures/captures is recognised and read correctly.

INDEX.json lists, per file, its category (the command) and the driver, CUDA and GPU names of the
machine it came from. Where the file itself shows them, what we read must match.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gpuhost.parsers.detect import detect_kind, parse_any

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / "tests" / "fixtures" / "captures"
INDEX = SHARED / "INDEX.json"

# INDEX category → the kind detect_kind must report.
KIND_OF_CATEGORY = {
    "nvidia-smi -q -x (XML)": {"nvidia-smi-xml"},
    "nvidia-smi -q (full text)": {"nvidia-smi-query-text"},
    "nvidia-smi -q (full text; stored as output of `nvidia-smi -a`)": {"nvidia-smi-query-text"},
    "nvidia-smi -q -d CLOCK": {"nvidia-smi-query-text"},
    "nvidia-smi -q -d POWER": {"nvidia-smi-query-text"},
    "nvidia-smi (default table)": {"nvidia-smi-table"},
    "nvidia-smi error": {"nvidia-smi-error"},
    'kernel log (NVRM) accompanying "No devices were found"': {"kernel-log"},
    "nvidia-smi --query-gpu=... --format=csv": {"nvidia-smi-csv"},
    "nvidia-smi --query-gpu=... --format=csv,nounits": {"nvidia-smi-csv"},
    "nvidia-smi --query-compute-apps=... --format=csv": {"nvidia-smi-csv"},
    "nvidia-smi --help-query-gpu": {"nvidia-smi-help-query"},
    "nvidia-smi -L": {"nvidia-smi-list"},
    "nvidia-smi nvlink -s": {"nvidia-smi-nvlink"},
    "nvidia-smi --version": {"nvidia-smi-version"},
    "nvidia-smi dmon": {"nvidia-smi-dmon"},
    # a topo capture can be nvidia-smi refusing the option (Windows: exit code 255)
    "nvidia-smi topo -m": {"nvidia-smi-topo", "nvidia-smi-usage-error"},
    "/proc/driver/nvidia/version": {"proc-driver-version"},
    "nvcc --version": {"nvcc-version"},
    "cudnn_version.h excerpt": {"cudnn-header"},
    "dpkg -l '*nvidia*'": {"dpkg"},
    "python -m torch.utils.collect_env": {"torch-collect-env"},
    "torch/driver/nvcc version summary (user-composed paste)": {"torch-version"},
    "torch.backends.cudnn.version() (REPL)": {"torch-version"},
    "nvidia-ctk --version": {"nvidia-ctk-version"},
    "nvidia-container-cli -V": {"nvidia-container-cli-version"},
    "nvidia-container-cli info": {"nvidia-container-cli-info"},
}
# Kinds whose output states the driver / CUDA version / GPU names itself.
DRIVER_KINDS = {
    "nvidia-smi-xml",
    "nvidia-smi-query-text",
    "nvidia-smi-table",
    "nvidia-smi-version",
    "nvidia-smi-csv",
    "torch-collect-env",
    "torch-version",
    "nvidia-container-cli-info",
}
CUDA_KINDS = DRIVER_KINDS - {"nvidia-smi-csv", "torch-collect-env", "torch-version"}
NAME_KINDS = {
    "nvidia-smi-xml",
    "nvidia-smi-query-text",
    "nvidia-smi-table",
    "nvidia-smi-csv",
    "nvidia-smi-list",
    "nvidia-smi-nvlink",
    "torch-collect-env",
    "nvidia-container-cli-info",
}
# Where INDEX describes the machine differently from what the tool prints, with the reason.
NAME_EXCEPTIONS = {
    # INDEX names the board; nvidia-container-cli prints the model "Xavier"
    "container-toolkit/nvidia-container-cli-info__jetson-xavier__null-fields.txt": ["Xavier"],
}
VERSION_AT_START_RE = re.compile(r"^(\d+(?:\.\d+)+)(?=$|\s)")
PLAIN_VERSION_RE = re.compile(r"^\d+(?:\.\d+)+$")
COUNTED_NAME_RE = re.compile(r"^(?:(\d+)x\s+)?(.+)$")
BUILD_RUNTIME_RE = re.compile(r"^(?P<build>\S+) \(build\); runtime (?P<runtime>.+)$")


def _entries() -> list[dict[str, Any]]:
    if not INDEX.exists():
        return []
    return list(json.loads(INDEX.read_text()))


ENTRIES = _entries()


def _read(entry: dict[str, Any]) -> str:
    return (SHARED / entry["file"]).read_bytes().decode("utf-8")


def expected_names(gpu: str | None) -> list[str] | None:
    """INDEX's gpu field as a list of names, or None when it is not a list of names."""
    if gpu is None:
        return None
    if gpu.strip().lower() == "none":
        return []
    text = re.sub(r"\s*\([^()]*(?:\([^()]*\)[^()]*)*\)\s*$", "", gpu).strip()
    if not text or re.match(r"^\d+ GPUs\b", text) or text.startswith("("):
        return None
    names: list[str] = []
    for part in re.split(r"\s+\+\s+|,\s+", text):
        match = COUNTED_NAME_RE.match(part.strip())
        assert match
        names += [match.group(2).strip()] * int(match.group(1) or 1)
    return names


def name_matches(parsed: str, expected: str) -> bool:
    """Equal, or nvidia-smi's table shortened the name with "..."."""
    if parsed.endswith("..."):
        return expected.startswith(parsed[:-3].rstrip())
    return parsed == expected


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_fixture_is_recognised_and_read(entry: dict[str, Any]) -> None:
    text = _read(entry)
    kind = detect_kind(text)
    assert kind in KIND_OF_CATEGORY[entry["category"]], entry["category"]
    result = parse_any(text)
    assert result["kind"] == kind
    json.dumps(result)

    driver = entry.get("driver") or ""
    driver_match = VERSION_AT_START_RE.match(driver)
    if kind in DRIVER_KINDS and driver_match and (kind != "nvidia-smi-csv" or result["rows"]):
        if kind == "nvidia-smi-csv" and "driver_version" not in result["rows"][0]:
            pass  # this query did not ask for driver_version
        else:
            assert result["driver_version"] == driver_match.group(1)
    if kind == "proc-driver-version":
        assert driver_match and result["kernel_module_version"] == driver_match.group(1)
    if kind == "dpkg" and driver_match:
        versions = [p["version"] for p in result["packages"] if p["status"] == "ii"]
        assert any(v and v.startswith(driver_match.group(1)) for v in versions)
    if kind == "torch-collect-env" and driver == "Could not collect":
        assert result["driver_version"] is None

    cuda = entry.get("cuda") or ""
    if kind in CUDA_KINDS and "state" in result and cuda == "Not Found":
        assert result["cuda_version"] is None
    if kind in CUDA_KINDS and PLAIN_VERSION_RE.match(cuda):
        if "-d CLOCK" in entry["category"] and "CUDA Version" not in text:
            pass  # the 2018 driver printed no CUDA version in -q output
        else:
            assert result["cuda_version"] == cuda
    if kind == "nvcc-version":
        assert result["cuda_version"] == cuda
    if kind == "torch-collect-env":
        build_runtime = BUILD_RUNTIME_RE.match(cuda)
        assert build_runtime, cuda
        assert result["torch_cuda"] == build_runtime.group("build")
        runtime = build_runtime.group("runtime")
        assert result["cuda_runtime"] == (None if runtime == "Could not collect" else runtime)

    names = NAME_EXCEPTIONS.get(entry["file"]) or expected_names(entry.get("gpu"))
    if kind in NAME_KINDS and names == []:
        assert not result.get("gpus")
    if kind in NAME_KINDS and names and result.get("gpus"):
        parsed = [g["name"] for g in result["gpus"]]
        if all(n is None for n in parsed):  # partial -q -d outputs print no product name
            assert len(parsed) == len(names)
        elif kind in ("nvidia-smi-csv",):  # rows per process: distinct GPUs
            assert Counter(parsed) == Counter(set(names))
        else:
            assert len(parsed) == len(names), (parsed, names)
            unmatched = list(names)
            for name in parsed:
                hit = next((n for n in unmatched if name_matches(name, n)), None)
                assert hit is not None, (name, names)
                unmatched.remove(hit)


def test_index_covers_every_fixture_file() -> None:
    listed = {e["file"] for e in ENTRIES}
    on_disk = {
        str(p.relative_to(SHARED))
        for p in SHARED.rglob("*")
        if p.is_file() and p.name not in ("INDEX.json", "README.md") and p.suffix != ".cmd"
    }
    assert on_disk <= listed, sorted(on_disk - listed)


@pytest.mark.parametrize(
    "entry",
    [e for e in ENTRIES if (SHARED / (e["file"] + ".cmd")).exists()],
    ids=lambda e: e["file"],
)
def test_query_csv_with_its_command(entry: dict[str, Any]) -> None:
    from gpuhost.parsers.nvidia_smi import parse_query_csv
    from gpuhost.parsers.smi_csv import query_fields

    command = (SHARED / (entry["file"] + ".cmd")).read_text()
    rows = parse_query_csv(_read(entry), command)
    fields, _ = query_fields(command)
    assert rows and all(list(row) == fields for row in rows)
