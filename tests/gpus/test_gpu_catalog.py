"""The GPU catalog (data/gpu_catalog.yaml): every GPU of NVIDIA's CUDA GPU tables and every
NVIDIA data-centre GPU of the PCI ID database resolves to its compute capability, by name and by
PCI device ID; what is not sourced is said so in one line, never guessed."""

from __future__ import annotations

import re

import pytest

from gpuhost.gpus.catalog import identify, load_catalog, pci_id_of
from gpuhost.gpus.names import mobile_key, normalise_name
from gpuhost.matrix import load_matrix
from gpuhost.matrix.gpus import gpu_info, unknown_gpu_hint

CATALOG = load_catalog()
TABLE_GPUS = [(row["name"], row["compute_capability"]) for row in CATALOG.gpus]
# A data-centre GPU as the PCI database names it: Tesla boards, the A/H/B/L accelerators and the
# HGX/DGX boards.
DATA_CENTRE = re.compile(r"^(Tesla\b|[ABHL]\d{1,3}[A-Z]?\b|A\d+X\b|GH200|GB[23]00|HGX\b|DGX\b)")
# Data-centre GPUs of the database that no source we read gives a compute capability: cc 1.x
# Teslas (G80, GT200: before every table NVIDIA still publishes) and the B100 (GB102: not in
# NVIDIA's table). They must say "unknown", which test_unsourced_data_centre_gpus_say_so checks.
UNSOURCED_DATA_CENTRE = {"0197", "05e7", "29bc"}


def _names(text: str) -> list[str]:
    inner = text.split("[", 1)[1].rstrip("] ") if "[" in text else ""
    return [n.strip() for n in inner.split(" / ") if n.strip()]


def _data_centre_devices() -> list[str]:
    return sorted(
        device_id
        for device_id, (_, text) in CATALOG.devices.items()
        if any(DATA_CENTRE.match(n) for n in _names(text))
    )


@pytest.mark.parametrize(("name", "cc"), TABLE_GPUS, ids=[n for n, _ in TABLE_GPUS])
def test_every_cuda_table_gpu_resolves_by_name(name, cc):
    sku = identify(name)
    assert sku is not None and sku.compute_capability == cc, (name, sku)


def _devices_named(name: str) -> list[str]:
    """The devices a table name is matched with: the same model name, else the same name without
    the laptop words (as the generator matches them)."""
    found = CATALOG.device_keys.get(normalise_name(name), ())
    return list(found or CATALOG.device_mobile_keys.get(mobile_key(name), ()))


def _disagreeing() -> set[str]:
    """The devices whose table row disagrees with the rest of its chip (kept in the catalog)."""
    found = set()
    for chip in CATALOG.chips.values():
        for seen in chip.get("disagreeing", []):
            found.add(re.search(r"= 10de:([0-9a-f]{4}) ", seen).group(1))
    return found


def test_every_cuda_table_gpu_resolves_by_its_pci_device_ids():
    wrong, checked = [], 0
    disagreeing = _disagreeing()
    for name, cc in TABLE_GPUS:
        for device_id in _devices_named(name):
            checked += 1
            sku = identify(f"10de:{device_id}")
            if device_id not in disagreeing and (sku is None or sku.compute_capability != cc):
                wrong.append((name, cc, device_id, sku))
    assert checked > 200 and not wrong
    # NVIDIA's legacy table and the PCI database disagree on these few GPUs only: their chip's
    # other GPUs decide, and the catalog keeps the disagreement in view.
    assert disagreeing == {"13b4", "13f8", "13f9", "13fa", "11c7", "129a"}


def test_every_data_centre_gpu_of_the_pci_database_has_its_compute_capability():
    devices = _data_centre_devices()
    assert len(devices) > 100
    missing = [d for d in devices if identify(f"10de:{d}").compute_capability is None]
    assert set(missing) == UNSOURCED_DATA_CENTRE, [CATALOG.devices[d] for d in missing]
    for device_id in devices:
        if device_id in UNSOURCED_DATA_CENTRE:
            continue
        for name in _names(CATALOG.devices[device_id][1]):
            if "Reserved" in name or "Engineering" in name:
                continue
            sku = identify(name)
            assert sku is None or sku.compute_capability is not None, (device_id, name)


def test_unsourced_data_centre_gpus_say_so():
    line = identify("10de:0197").unknown_line
    assert line == (
        "unknown GPU 0x0197: known to the PCI database as G80GL [Tesla C870] "
        "(no compute capability sourced)"
    )
    assert identify("10de:ffff").unknown_line.startswith(
        "unknown GPU 0xffff: not in the PCI database (PCI ID database "
    )


@pytest.mark.parametrize(
    ("asked", "cc"),
    [
        ("NVIDIA RTX A3000 Laptop GPU", "8.6"),
        ("NVIDIA GeForce RTX 5090 D", "12.0"),
        ("Quadro M1000M", "5.0"),
        ("Quadro P5200", "6.1"),
        ("Quadro P3200 Mobile", "6.1"),
        ("GeForce GTX 980M", "5.2"),
        ("GeForce 940M", "5.0"),
        ("NVIDIA H100 80GB HBM3", "9.0"),
        ("NVIDIA B300 SXM6 AC", "10.3"),
        ("Tesla K40m", "3.5"),
        ("NVIDIA RTX 2000 Ada Gene...", "8.9"),
        ("10de:2330", "9.0"),
        ("0x233010DE", "9.0"),
        ("10de:2b87", "12.0"),
    ],
)
def test_names_and_ids_the_hardware_reports(asked, cc):
    assert identify(asked).compute_capability == cc


def test_a_name_sold_on_chips_of_unsourced_compute_capability_is_not_guessed():
    # GeForce GT 730 is a GK107, a GK208B and a GF108 in the database: not one answer.
    assert identify("GeForce GT 730") is None
    assert identify("Graphics Device") is None
    said = unknown_gpu_hint(load_matrix(), "GeForce GT 730")
    assert said.startswith("the PCI database has more than one GPU of that name (10de:0f02 GF108")
    assert "10de:1287 GK208B (cc 3.5)" in said and said.endswith("as lspci -n prints it)")


@pytest.mark.parametrize(
    ("text", "pci_id"),
    [
        ("10de:2330", "10de:2330"),
        ("0x233010DE", "10de:2330"),
        ("10DE:2B85", "10de:2b85"),
        ("H100", None),
        ("4090", None),
        ("0x2330", None),
    ],
)
def test_pci_id_forms(text, pci_id):
    assert pci_id_of(text) == pci_id


def test_the_matrix_takes_a_pci_id_and_a_gpu_only_the_catalog_knows():
    matrix = load_matrix()
    by_id = gpu_info(matrix, "10de:2330")
    assert (by_id.model, by_id.compute_capability, by_id.pci_id) == (
        "NVIDIA H100",
        "9.0",
        "10de:2330",
    )
    laptop = gpu_info(matrix, "NVIDIA RTX A5000 Laptop GPU")
    assert (laptop.compute_capability, laptop.architecture) == ("8.6", "Ampere")
    assert gpu_info(matrix, "10de:0197") is None


def test_the_audit_identifies_a_gpu_by_the_pci_id_nvidia_smi_reports() -> None:
    """nvidia-smi named this GTX 1660 Ti "Graphics Device" (telegraf capture); its XML's
    pci_device_id 218410DE is a TU116 in the PCI database, Turing (cc 7.5)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "audit"))
    from probe_text import capture, host_with

    from gpuhost.audit.host import AuditSettings, audit_host
    from gpuhost.facts.build import host_facts_from_text

    text = host_with(nvidia_smi=capture("nvidia-smi-xml/telegraf__gtx-1660-ti.xml"))
    facts = host_facts_from_text(text)
    (gpu,) = facts.driver.smi.gpus
    assert (gpu.name, gpu.pci_device_id) == ("Graphics Device", "10de:2184")
    report = audit_host("h", facts, {}, AuditSettings(matrix=load_matrix(), profiles={}))
    assert "matrix.gpu.unknown" not in {f.rule for f in report.findings}
    info = gpu_info(load_matrix(), "Graphics Device (PCI 10de:2184)")
    assert (info.compute_capability, info.architecture, info.pci_id) == (
        "7.5",
        "Turing",
        "10de:2184",
    )


def test_nvidia_smi_text_reports_the_device_id_too() -> None:
    from pathlib import Path

    from gpuhost.parsers.nvidia_smi import parse_output

    path = Path(__file__).resolve().parents[1] / "fixtures" / "captures" / "nvidia-smi-q-text"
    report = parse_output((path / "thamada-gls__GH200__550.127.05.txt").read_text())
    assert [g.pci_device_id for g in report.gpus] == ["10de:2342"]
    assert identify(report.gpus[0].pci_device_id).compute_capability == "9.0"
