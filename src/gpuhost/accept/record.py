"""The acceptance record of one node, the fleet outliers, and each node's history.

``build_record`` (pure): host, verdict, stages with measured values and floors, serials (board,
GPUs), firmware (BIOS, VBIOS, GSP, HCA) from the agent's document. ``outliers`` (pure): GPUs and
nodes of the same GPU model well below the run's median (``Limits.outlier_fraction``).
``keep`` appends a record to ``<state>/acceptance/HOST.jsonl`` (state-folder rules; one line per
run) and returns the node's history: runs, failures, the lemon count.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuhost import __version__
from gpuhost.accept.judge import FAIL, StageResult
from gpuhost.locks import lock_file_name
from gpuhost.parsers.smi_identity import parse_identity
from gpuhost.safeio import read_regular, write_atomic
from gpuhost.statedir import checked_folder

SCHEMA = 1
HISTORY_MAX_BYTES = 8 * 1024 * 1024
#: a node that failed this many acceptance runs is called out as a lemon
LEMON_FAILURES = 3


def identity(doc: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(serials, firmware) from the agent's inventory stage (empty where it did not run or
    its document is malformed: judged COULD-NOT-RUN by the inventory stage)."""
    try:
        return _identity(doc)
    except (TypeError, AttributeError, ValueError):
        return _identity({})


def _identity(doc: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    inventory = (doc.get("stages") or {}).get("inventory") or {}
    xml = inventory.get("smi_xml") or {}
    try:
        gpus = parse_identity(str(xml.get("out") or "")) if xml.get("rc") == 0 else []
    except Exception:  # noqa: BLE001 - a damaged XML leaves the identity empty, judged elsewhere
        gpus = []
    dmi = inventory.get("firmware") or {}
    serials = {
        "board": dmi.get("board_serial"),
        "product": dmi.get("product_serial"),
        "gpus": [{"bus_id": g.bus_id, "serial": g.serial, "uuid": g.uuid} for g in gpus],
    }
    firmware = {
        "bios": dmi.get("bios"),
        "bios_date": dmi.get("bios_date"),
        "vbios": sorted({g.vbios for g in gpus if g.vbios}),
        "gsp": sorted({g.gsp_firmware for g in gpus if g.gsp_firmware}),
        "hca": [
            {"device": h.get("device"), "fw_ver": h.get("fw_ver")}
            for h in inventory.get("hca") or []
        ],
    }
    return serials, firmware


def build_record(
    host: str,
    verdict: str,
    stages: Sequence[StageResult],
    doc: Mapping[str, Any] | None,
    interrupted: bool,
    error: str | None = None,
) -> dict[str, Any]:
    serials, firmware = identity(doc or {})
    return {
        "schema": SCHEMA,
        "host": host,
        "verdict": verdict,
        "interrupted": interrupted,
        "error": error,
        "started": (doc or {}).get("started"),
        "finished": (doc or {}).get("finished") or time.time(),
        "gpuhost_version": __version__,
        "stages": [s.to_dict() for s in stages],
        "outliers": [],
        "serials": serials,
        "firmware": firmware,
    }


def _values(records: Sequence[Mapping[str, Any]], model_of: Mapping[str, str]) -> list[tuple]:
    """(model, what, who, value): per-GPU GEMM TFLOPS and median SM clock, per-node NCCL
    busbw."""
    found = []
    for record in records:
        host, model = record["host"], model_of.get(record["host"])
        if not model:
            continue
        for stage in record["stages"]:
            measured = stage.get("measured") or {}
            if stage["stage"] == "soak":
                for gpu in measured.get("gpus") or []:
                    if gpu.get("tflops_median") is not None:
                        found.append(
                            (
                                model,
                                "GEMM TFLOPS",
                                f"{host} GPU {gpu['gpu']}",
                                float(gpu["tflops_median"]),
                            )
                        )
            elif stage["stage"] == "telemetry":
                for gpu in measured.get("gpus") or []:
                    if gpu.get("sm_clock_median_mhz") is not None:
                        found.append(
                            (
                                model,
                                "SM clock MHz under load",
                                f"{host} GPU {gpu['gpu']}",
                                float(gpu["sm_clock_median_mhz"]),
                            )
                        )
            elif stage["stage"] == "nccl" and measured.get("peak_busbw_gbs") is not None:
                found.append((model, "NCCL busbw GB/s", host, float(measured["peak_busbw_gbs"])))
    return found


def outliers(
    records: Sequence[Mapping[str, Any]], model_of: Mapping[str, str], fraction: float
) -> dict[str, list[str]]:
    """{host: lines} for each GPU/node below ``fraction`` x the median of the same model and
    measure in this run (a measure needs 3 values: two cannot say which one is low)."""
    groups: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for model, what, who, value in _values(records, model_of):
        groups.setdefault((model, what), []).append((who, value))
    named: dict[str, list[str]] = {}
    for (model, what), values in groups.items():
        if len(values) < 3:
            continue
        ordered = sorted(v for _, v in values)
        median = ordered[len(ordered) // 2]
        for who, value in values:
            if value < fraction * median:
                host = who.split(" GPU ")[0]
                named.setdefault(host, []).append(
                    f"{who}: {what} {value:g}, below {fraction:g} x the median {median:g} of "
                    f"the {len(values)} {model} in this run"
                )
    return named


def history_file(state_dir: Path, host: str) -> Path:
    return state_dir / "acceptance" / f"{lock_file_name(host).removesuffix('.lock')}.jsonl"


def keep(state_dir: Path, record: Mapping[str, Any]) -> dict[str, Any]:
    """Append ``record`` to the host's history; the history's counts (this run included)."""
    folder = checked_folder(state_dir / "acceptance", create=True)
    path = folder / history_file(state_dir, str(record["host"])).name
    old = ""
    if path.exists():
        old = read_regular(
            path, "acceptance history", follow=False, owned=True, limit=HISTORY_MAX_BYTES
        ).decode("utf-8", errors="replace")
    lines = [line for line in old.splitlines() if line.strip()]
    lines.append(json.dumps(record, sort_keys=True))
    verdicts = []
    for line in lines:
        try:
            verdicts.append(json.loads(line).get("verdict"))
        except ValueError:
            continue
    text = "\n".join(lines[-500:]) + "\n"
    write_atomic(path, text.encode("utf-8"), 0o600)
    failed = sum(1 for v in verdicts if v == FAIL)
    return {
        "runs": len(verdicts),
        "failed": failed,
        "lemon": failed >= LEMON_FAILURES,
        "file": str(path),
    }
