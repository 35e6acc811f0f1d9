"""nvidia-smi XML and error outputs (own small fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.errors import ParseError
from gpuhost.parsers.nvidia_smi import classify_error, parse_output, parse_xml

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "parsers"


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_xml_two_gpus_all_fields() -> None:
    report = parse_xml(read("smi-two-gpus-v12.xml"))
    assert report.state == "ok"
    assert (report.driver_version, report.cuda_version) == ("550.54.15", "12.4")
    assert [g.name for g in report.gpus] == ["NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"]
    first, second = report.gpus
    assert first.uuid == "GPU-11111111-2222-3333-4444-555555555555"
    assert first.pci_bus_id == "00000000:07:00.0"
    assert first.persistence_mode is True
    assert (first.mig.current, first.mig.pending, first.mig.devices) == (True, False, 1)
    assert (first.ecc.mode_current, first.ecc.mode_pending) == (True, True)
    assert first.ecc.volatile_correctable == 3
    assert first.ecc.aggregate_uncorrectable == 2
    assert first.remapped_rows.correctable == 1 and first.remapped_rows.pending is True
    assert first.clocks.applications_graphics == 1410
    assert first.clocks.applications_clocks_supported is True
    assert first.clocks.max_mem == 1593
    assert first.power.current == 400.0 and first.power.min == 100.0
    assert (first.pcie.gen_current, first.pcie.gen_max) == (4, 4)
    assert (first.pcie.width_current, first.pcie.width_max) == (8, 16)
    assert second.persistence_mode is False
    assert second.clocks.applications_graphics is None
    assert second.clocks.applications_clocks_supported is False
    assert second.ecc.volatile_correctable is None


def test_xml_to_dict_is_json_ready() -> None:
    import json

    data = parse_xml(read("smi-two-gpus-v12.xml")).to_dict()
    assert json.loads(json.dumps(data))["gpus"][0]["clocks"]["max_mem"] == 1593


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("Failed to initialize NVML: Driver/library version mismatch\n", "driver-library-mismatch"),
        (
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.\n",
            "driver-not-loaded",
        ),
        ("No devices were found\n", "no-devices"),
        ("Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost.\n", "gpu-lost"),
        ("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system.\n", "nvml-missing"),
        ("Failed to initialize NVML: Unknown Error\n", "unknown-error"),
    ],
)
def test_error_states(text: str, state: str) -> None:
    assert classify_error(text) == state
    report = parse_xml(text)
    assert report.state == state and report.gpus == []
    assert parse_output(text).state == state


def test_mismatch_keeps_nvml_version() -> None:
    text = (
        "Failed to initialize NVML: Driver/library version mismatch\n"
        "NVML library version: 550.144\n"
    )
    assert parse_xml(text).nvml_version == "550.144"


def test_not_an_error() -> None:
    assert classify_error(read("smi-two-gpus-v12.xml")) is None
    assert classify_error("hello world") is None


def test_empty_output_is_absent_not_error() -> None:
    report = parse_xml("  \n")
    assert report.state == "absent" and report.gpus == []


@pytest.mark.parametrize(
    "text",
    [
        "<nvidia_smi_log><gpu id='x'><product_name>A</product_name>",  # truncated
        "<other_root/>",
        "hello world",
        '<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY a "aaaa">]>\n'
        "<nvidia_smi_log>&a;</nvidia_smi_log>",
        "\x00\x01\x02binary\x00",
    ],
)
def test_bad_xml_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="expected nvidia-smi"):
        parse_xml(text)
