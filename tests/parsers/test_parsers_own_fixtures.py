"""Each parser on the project's own small fixtures (edge cases the shared captures lack)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.errors import ParseError
from gpuhost.parsers import container, cuda, driver, frameworks, packages, smi_misc, topo
from gpuhost.parsers.detect import detect_kind, parse_any
from gpuhost.parsers.nvidia_smi import parse_output, parse_query_csv, parse_query_text, parse_table

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "parsers"


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_query_text_fields() -> None:
    report = parse_query_text(read("smi-q-two-gpus.txt"))
    assert (report.driver_version, report.cuda_version, report.attached_gpus) == (
        "535.161.08",
        "12.2",
        2,
    )
    first, second = report.gpus
    assert first.name == "NVIDIA A100-SXM4-40GB" and first.pci_bus_id == "00000000:17:00.0"
    assert (first.mig.current, first.mig.pending) == (False, True)
    assert (first.pcie.gen_current, first.pcie.gen_max, first.pcie.width_max) == (3, 4, 16)
    assert (first.ecc.volatile_correctable, first.ecc.volatile_uncorrectable) == (4, 1)
    assert (first.ecc.aggregate_correctable, first.ecc.aggregate_uncorrectable) == (12, 1)
    assert first.retired_pages.single_bit is None
    assert first.remapped_rows == type(first.remapped_rows)(2, 1, True, False)
    assert (first.power.current, first.power.draw, first.power.max) == (400.0, 55.0, 400.0)
    assert first.clocks.applications_graphics == 1095 and first.clocks.max_graphics == 1410
    assert first.clocks.applications_clocks_supported is True
    assert second.persistence_mode is False and second.pci_bus_id == "00000000:31:00.0"
    assert second.clocks.applications_graphics is None
    assert second.clocks.applications_clocks_supported is False
    assert parse_output(read("smi-q-two-gpus.txt")) == report


def test_query_text_rejects_other_text() -> None:
    with pytest.raises(ParseError, match="expected nvidia-smi -q text"):
        parse_query_text("total 0\ndrwxr-xr-x 2 root root 40 .\n")


def test_table_fields_and_mig_devices() -> None:
    report = parse_table(read("smi-table-mig.txt"))
    assert (report.driver_version, report.cuda_version) == ("535.161.08", "12.2")
    first, second = report.gpus
    assert (first.index, first.persistence_mode, first.mig.current, first.mig.devices) == (
        0,
        True,
        True,
        2,
    )
    assert (first.power.draw, first.power.current, first.memory_total_mib) == (55.0, 400.0, 40960)
    assert second.ecc.volatile_uncorrectable == 3 and second.mig.current is False
    assert second.mig.devices == 0


def test_table_without_header_is_an_error() -> None:
    with pytest.raises(ParseError, match="NVIDIA-SMI"):
        parse_table("| 0 Tesla T4 Off | 00000000:00:04.0 Off | 0 |\n")


def test_query_csv_noheader_nounits() -> None:
    query = "nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader,nounits"
    rows = parse_query_csv("Tesla T4, 535.161.08, 15360\nTesla T4, 535.161.08, [N/A]\n", query)
    assert rows == [
        {"name": "Tesla T4", "driver_version": "535.161.08", "memory.total": "15360"},
        {"name": "Tesla T4", "driver_version": "535.161.08", "memory.total": None},
    ]


def test_query_csv_units_removed_and_bad_rows() -> None:
    text = "name, memory.total [MiB], utilization.gpu [%]\nTesla T4, 15360 MiB, 7 %\n"
    assert parse_query_csv(text, "name,memory.total,utilization.gpu") == [
        {"name": "Tesla T4", "memory.total": "15360", "utilization.gpu": "7"}
    ]
    with pytest.raises(ParseError, match="line 3"):
        parse_query_csv(text + "Tesla T4, 15360 MiB\n", "name,memory.total,utilization.gpu")
    with pytest.raises(ParseError, match="4 columns.*header of 3"):
        parse_query_csv(text, "name,memory.total,utilization.gpu,pstate")
    assert parse_query_csv("", "name") == []


def test_proc_version_open_and_proprietary() -> None:
    module = driver.parse_proc_version(read("proc-version-open.txt"))
    assert module is not None
    assert (module.version, module.flavor, module.arch) == ("550.54.15", "open", "x86_64")
    assert module.gcc_version == "12.2.0"
    proprietary = driver.parse_proc_version(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.08  Tue Mar  5 2024\n"
    )
    assert proprietary is not None and proprietary.flavor == "proprietary"
    assert proprietary.version == "535.161.08"
    assert driver.parse_proc_version("") is None
    with pytest.raises(ParseError, match="NVRM version"):
        driver.parse_proc_version("NVRM version: something else\n")


def test_nvcc_and_cudnn() -> None:
    text = "Cuda compilation tools, release 12.5, V12.5.82\nBuild cuda_12.5.r12.5/compiler.1_0\n"
    assert cuda.parse_nvcc_version(text) == "12.5.82"
    assert cuda.nvcc_release(text) == "12.5"
    assert cuda.parse_nvcc_version("") is None
    with pytest.raises(ParseError, match="nvcc"):
        cuda.parse_nvcc_version("bash: nvcc: command not found\n")
    header = "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 1\n#define CUDNN_PATCHLEVEL 0\n"
    assert cuda.parse_cudnn_header(header) == "9.1.0"
    with pytest.raises(ParseError, match="CUDNN_MAJOR"):
        cuda.parse_cudnn_header("#define CUDNN_MINOR 1\n")
    assert [cuda.cudnn_version_from_int(n) for n in (7605, 8902, 90100)] == [
        "7.6.5",
        "8.9.2",
        "9.1.0",
    ]


def test_dpkg_query_format() -> None:
    listed = packages.parse_dpkg_query(read("dpkg-query.txt"))
    assert [(p.name, p.version, p.status, p.arch) for p in listed] == [
        ("nvidia-driver", "535.161.08-1", "ii", None),
        ("nvidia-kernel-dkms", "535.161.08-1", "hi", "amd64"),
        ("libcuda1", "535.161.08-1", "ii", "i386"),
        ("nvidia-driver-470", "470.239.06-0ubuntu1", "rc", None),
    ]
    assert [p.installed for p in listed] == [True, True, True, False]
    assert [p.held for p in listed] == [False, True, False, False]
    assert packages.parse_dpkg_query("") == []
    with pytest.raises(ParseError, match="line 2"):
        packages.parse_dpkg_query("nvidia-driver\t1\tii\nthis is not a package line\n")


def test_apt_holds_and_rpm() -> None:
    assert packages.parse_apt_mark_showhold(read("apt-mark-showhold.txt")) == {
        "nvidia-driver",
        "libcuda1",
    }
    assert packages.parse_apt_mark_showhold("") == set()
    with pytest.raises(ParseError, match="apt-mark"):
        packages.parse_apt_mark_showhold("E: not a package name!\n")
    rpms = packages.parse_rpm_qa(read("rpm-qa.txt"))
    assert [(p.name, p.version) for p in rpms] == [
        ("nvidia-driver", "535.161.08-1.el9"),
        ("cuda-toolkit-12-2", "12.2.2-1"),
    ]
    with pytest.raises(ParseError, match="rpm"):
        packages.parse_rpm_qa("nvidia-driver 535\n")


def test_torch_probe() -> None:
    info = frameworks.parse_torch_probe(read("torch-probe.json"))
    assert info is not None
    assert (info.version, info.cuda, info.cudnn, info.cudnn_number) == (
        "2.3.1+cu121",
        "12.1",
        "8.9.2",
        8902,
    )
    assert info.arch_list == ["sm_80", "sm_90"] and info.error is None
    missing = frameworks.parse_torch_probe('{"torch": null, "error": "ModuleNotFoundError: x"}')
    assert missing is not None and missing.error == "ModuleNotFoundError: x"
    assert frameworks.parse_torch_probe("") is None
    for bad in ('{"torch": "2.3", "cudnn": "8902"}', "{not json", "no json at all", "[1, 2]"):
        with pytest.raises(ParseError, match="torch probe"):
            frameworks.parse_torch_probe(bad)


def test_collect_env_minimal() -> None:
    text = (
        "PyTorch version: 2.1.0+cu121\nCUDA used to build PyTorch: 12.1\n"
        "Is CUDA available: True\nCUDA runtime version: 12.1.105\n"
        "GPU models and configuration: \n"
        "GPU 0: NVIDIA A100-SXM4-40GB\nGPU 1: NVIDIA A100-SXM4-40GB\n"
        "\nNvidia driver version: 535.161.08\ncuDNN version: Probably one of the following:\n"
        "/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.2\n"
        "/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.8.9.2\n"
    )
    env = frameworks.parse_collect_env(text)
    assert env["torch_version"] == "2.1.0+cu121" and env["torch_cuda"] == "12.1"
    assert env["gpus"] == ["NVIDIA A100-SXM4-40GB"] * 2
    assert env["driver_version"] == "535.161.08" and env["cudnn"] == "8.9.2"
    assert env["cuda_available"] is True
    with pytest.raises(ParseError, match="collect_env"):
        frameworks.parse_collect_env("Collecting environment information...\n")


def test_container_toolkit() -> None:
    assert container.parse_nvidia_ctk_version("NVIDIA Container Toolkit CLI version 1.15.0\n") == (
        "1.15.0"
    )
    assert container.parse_nvidia_ctk_version("") is None
    with pytest.raises(ParseError, match="nvidia-ctk"):
        container.parse_nvidia_ctk_version("docker: command not found\n")
    info = container.parse_container_cli_info(
        "NVRM version:   535.161.08\nCUDA version:   12.2\n\nDevice Index:   0\n"
        "Model:          Tesla T4\nGPU UUID:       GPU-1\nBus Location:   00000000:00:04.0\n"
        "Architecture:   7.5\n"
    )
    assert info is not None and info.driver_version == "535.161.08"
    assert [(d.index, d.model, d.architecture) for d in info.devices] == [(0, "Tesla T4", "7.5")]


def test_topo_matrix_and_error() -> None:
    text = (
        "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
        "GPU0\t X \tNV4\t0-15\t0\nGPU1\tNV4\t X \t0-15\t0\n\nLegend:\n  X    = Self\n"
    )
    topology = topo.parse_topo(text)
    assert topology is not None and topology.devices == ["GPU0", "GPU1"]
    assert topology.links["GPU0"]["GPU1"] == "NV4" and topology.nvlink
    assert topology.cpu_affinity == {"GPU0": "0-15", "GPU1": "0-15"}
    refused = topo.parse_topo("ERROR: Option -m is missing its value.\n")
    assert refused is not None and refused.error and not refused.links
    with pytest.raises(ParseError, match="topo"):
        topo.parse_topo("\tGPU0\tGPU1\nGPU0\t X \tBANANA\n")


def test_smi_version_and_list() -> None:
    version = smi_misc.parse_smi_version(
        "NVIDIA-SMI version  : 610.57.04\nNVML version        : 610.57\n"
        'DRIVER version      : Deprecated, see "KMD version" instead\n'
        "KMD version         : 610.57.04\nCUDA UMD version    : 13.3\n"
    )
    assert version == {
        "smi_version": "610.57.04",
        "nvml_version": "610.57",
        "driver_version": "610.57.04",
        "cuda_version": "13.3",
    }
    gpus = smi_misc.parse_gpu_list(
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n  MIG 3g.40gb     Device  0: (UUID: MIG-1)\n"
    )
    assert gpus[0]["name"] == "NVIDIA H100 80GB HBM3"
    assert gpus[0]["mig_devices"] == [{"profile": "3g.40gb", "uuid": "MIG-1"}]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("smi-two-gpus-v12.xml", "nvidia-smi-xml"),
        ("smi-q-two-gpus.txt", "nvidia-smi-query-text"),
        ("smi-table-mig.txt", "nvidia-smi-table"),
        ("dpkg-query.txt", "dpkg"),
        ("rpm-qa.txt", "rpm-qa"),
        ("torch-probe.json", "torch-probe"),
        ("proc-version-open.txt", "proc-driver-version"),
    ],
)
def test_detect_own_fixtures(name: str, kind: str) -> None:
    assert detect_kind(read(name)) == kind
    assert parse_any(read(name))["kind"] == kind


def test_parse_any_keys() -> None:
    result = parse_any(read("smi-two-gpus-v12.xml"))
    assert result["state"] == "ok" and result["driver_version"] == "550.54.15"
    assert result["gpus"][0]["name"] == "NVIDIA A100-SXM4-80GB"
    module = parse_any(read("proc-version-open.txt"))
    assert (module["kernel_module_version"], module["kernel_module_flavor"]) == (
        "550.54.15",
        "open",
    )
    probe = parse_any(read("torch-probe.json"))
    assert (probe["torch_version"], probe["torch_cuda"]) == ("2.3.1+cu121", "12.1")


@pytest.mark.parametrize("text", ["", "   \n", "hello\nworld\n", "\x00\x01binary"])
def test_detect_rejects_unknown(text: str) -> None:
    with pytest.raises(ParseError):
        detect_kind(text)
