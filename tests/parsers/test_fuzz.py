"""Fuzzing: every parser gives a result or ParseError, never another exception."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuhost.errors import ParseError
from gpuhost.parsers import (
    benchmarks,
    cdi,
    container,
    cuda,
    detect,
    driver,
    fabric,
    frameworks,
    packages,
    signing,
    smi_misc,
    topo,
)
from gpuhost.parsers import nvidia_smi as smi
from gpuhost.parsers.aer import parse_aer_counters
from gpuhost.parsers.firmware import parse_firmware_files, sysfs_value
from gpuhost.parsers.listening import parse_ss_listening
from gpuhost.parsers.profile_marker import parse_profile_marker
from gpuhost.parsers.smi_identity import parse_identity
from gpuhost.parsers.xid import xid_events
from gpuhost.slurm import parse_show_node

PARSERS: dict[str, Callable[[str], Any]] = {
    "parse_xml": smi.parse_xml,
    "parse_query_text": smi.parse_query_text,
    "parse_table": smi.parse_table,
    "parse_output": smi.parse_output,
    "parse_query_csv": lambda t: smi.parse_query_csv(t, "name,driver_version,memory.total"),
    "parse_query_csv_header": smi.parse_query_csv,
    "classify_error": smi.classify_error,
    "parse_proc_version": driver.parse_proc_version,
    "parse_nvrm_log": driver.parse_nvrm_log,
    "parse_nvcc_version": cuda.parse_nvcc_version,
    "parse_cudnn_header": cuda.parse_cudnn_header,
    "parse_dpkg_query": packages.parse_dpkg_query,
    "parse_apt_mark_showhold": packages.parse_apt_mark_showhold,
    "parse_rpm_qa": packages.parse_rpm_qa,
    "parse_offered": packages.parse_offered,
    "parse_collect_env": frameworks.parse_collect_env,
    "parse_torch_probe": frameworks.parse_torch_probe,
    "parse_torch_version_text": frameworks.parse_torch_version_text,
    "parse_nvidia_ctk_version": container.parse_nvidia_ctk_version,
    "parse_container_cli_info": container.parse_container_cli_info,
    "parse_topo": topo.parse_topo,
    "parse_smi_version": smi_misc.parse_smi_version,
    "parse_gpu_list": smi_misc.parse_gpu_list,
    "parse_nvlink_status": smi_misc.parse_nvlink_status,
    "parse_nvlink_errors": smi_misc.parse_nvlink_errors,
    "parse_aer_counters": parse_aer_counters,
    "xid_events": xid_events,
    "detect_kind": detect.detect_kind,
    "parse_any": detect.parse_any,
    "parse_profile_marker": parse_profile_marker,
    "parse_ss_listening": parse_ss_listening,
    "parse_show_node": parse_show_node,
    "parse_ib_sysfs": fabric.parse_ib_sysfs,
    "parse_firmware_files": parse_firmware_files,
    "sysfs_value": sysfs_value,
    "parse_ibstat": fabric.parse_ibstat,
    "parse_ibv_devinfo": fabric.parse_ibv_devinfo,
    "parse_lspci": fabric.parse_lspci,
    "parse_iommu": lambda t: fabric.parse_iommu(t, t),
    "parse_test_key": signing.parse_test_key,
    "parse_modinfo": signing.parse_modinfo,
    "parse_framework_conf": signing.parse_framework_conf,
    "parse_certificate_b64": lambda t: signing.parse_certificate_b64(t, "/var/lib/dkms/mok.pub"),
    "parse_signing_output": signing.parse_signing_output,
    "parse_cdi_spec": lambda t: cdi.parse_cdi_spec(t, "/etc/cdi/nvidia.yaml"),
    "parse_cdi_specs": cdi.parse_cdi_specs,
    "parse_identity": parse_identity,
    "parse_nvbandwidth": benchmarks.parse_nvbandwidth,
    "parse_perftest_bw": benchmarks.parse_perftest_bw,
}

OWN = Path(__file__).resolve().parents[1] / "fixtures" / "parsers"
CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"


def _samples() -> list[str]:
    files = sorted(p for p in OWN.glob("*") if p.is_file())
    # the module signing and CDI captures (their SOURCES.md notes are text samples too)
    files += sorted(p for d in ("secureboot", "cdi") for p in (OWN.parent / d).glob("*"))
    # the acceptance run's tool outputs (nvbandwidth, ib_write_bw, dcgmi, nccl-tests)
    files += sorted((OWN.parents[1] / "lab" / "accept" / "captures").glob("*"))
    # one capture per folder keeps the run short while covering every format
    files += [
        sorted(p for p in d.iterdir() if p.is_file())[0] for d in CAPTURES.iterdir() if d.is_dir()
    ]
    return [p.read_text(encoding="utf-8") for p in files]


SAMPLES = _samples()
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _call(parser: Callable[[str], Any], text: str) -> None:
    try:
        parser(text)
    except ParseError as exc:
        assert str(exc)  # a message, never empty


@pytest.mark.parametrize("name", sorted(PARSERS))
@FUZZ
@given(text=st.text(max_size=400))
def test_random_text(name: str, text: str) -> None:
    _call(PARSERS[name], text)


@pytest.mark.parametrize("name", sorted(PARSERS))
@FUZZ
@given(data=st.data())
def test_truncated_real_outputs(name: str, data: st.DataObject) -> None:
    sample = data.draw(st.sampled_from(SAMPLES))
    start = data.draw(st.integers(0, len(sample)))
    end = data.draw(st.integers(start, len(sample)))
    _call(PARSERS[name], sample[start:end])


@pytest.mark.parametrize("name", sorted(PARSERS))
@FUZZ
@given(raw=st.binary(max_size=400))
def test_random_bytes_decoded(name: str, raw: bytes) -> None:
    _call(PARSERS[name], raw.decode("latin-1"))
    _call(PARSERS[name], raw.decode("utf-8", errors="replace"))


@pytest.mark.parametrize("name", sorted(PARSERS))
@FUZZ
@given(data=st.data())
def test_mutated_real_outputs(name: str, data: st.DataObject) -> None:
    sample = data.draw(st.sampled_from(SAMPLES))
    lines = sample.split("\n")
    index = data.draw(st.integers(0, max(0, len(lines) - 1)))
    lines[index] = data.draw(st.text(max_size=80))
    _call(PARSERS[name], "\n".join(lines))
