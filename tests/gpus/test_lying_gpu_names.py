"""A GPU name in nvidia-smi's output that lies: one carrying a ``(PCI 10de:XXXX)`` label of
another GPU (the text the audit adds itself to name a GPU by its ID: catalog.labelled), control
characters, or a name of 200,000 characters. The PCI ID nvidia-smi reports decides the GPU; a
name never smuggles in an ID; a name is one printable line of a bounded length. Captures:
tests/fixtures/captures (telegraf's GTX 1660 Ti XML, thamada-gls's A10 -q text), with the
product name replaced."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuhost.errors import ParseError
from gpuhost.gpus.catalog import identify, labelled, pci_id_in
from gpuhost.parsers.nvidia_smi import parse_output
from gpuhost.parsers.smi_model import GpuInfo

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"
XML = (CAPTURES / "nvidia-smi-xml" / "telegraf__gtx-1660-ti.xml").read_text()
TEXT = (CAPTURES / "nvidia-smi-q-text" / "thamada-gls__A10__550.90.12.txt").read_text()
H100 = "10de:2330"
LIES = [
    f"NVIDIA H100 80GB HBM3 (PCI {H100})",
    "Graphics Device (pci 0x233010de)",
    f"Graphics Device ( PCI {H100} )\x1b[2J",
    "A" * 200_000,
    "GPU\x00\x07\r\nstate: ok",
    "GPU\x07\x1b]0;title\x07 (PCI 10de:2330",
]


def _xml(name: str, device_id: str | None) -> str:
    text = re.sub(r"<product_name>.*?</product_name>", f"<product_name>{name}</product_name>", XML)
    return re.sub(r"<pci_device_id>.*?</pci_device_id>",
                  f"<pci_device_id>{device_id or 'N/A'}</pci_device_id>", text)  # fmt: skip


def _text(name: str) -> str:
    return re.sub(r"(Product Name\s*:).*", lambda m: f"{m.group(1)} {name}", TEXT, count=1)


def _parsed(text: str) -> list[GpuInfo]:
    """The GPUs of ``text``; [] for what the parser refuses in one line (XML with a control
    character is not well-formed, a NUL is binary data)."""
    try:
        return parse_output(text).gpus
    except ParseError as exc:
        assert "\n" not in str(exc)
        return []


def _checked(name: str | None, real_id: str | None) -> None:
    assert name is not None
    assert not re.search(r"\(\s*pci", name, re.IGNORECASE)
    assert name.isprintable() and len(name) <= 256
    found = pci_id_in(labelled(name, real_id))
    assert found == real_id, f"{name[:80]!r} reads as {found}"
    if real_id is None:
        sku = identify(labelled(name, None))
        assert sku is None or sku.pci_id != H100


@pytest.mark.parametrize("lie", LIES)
@pytest.mark.parametrize("device_id", ["218410DE", None])
def test_a_lying_name_in_nvidia_smi_xml_never_names_another_gpu(
    lie: str, device_id: str | None
) -> None:
    for gpu in _parsed(_xml(lie, device_id)):
        _checked(gpu.name, "10de:2184" if device_id else None)


@pytest.mark.parametrize("lie", LIES)
def test_a_lying_name_in_nvidia_smi_q_text_never_names_another_gpu(lie: str) -> None:
    for gpu in _parsed(_text(lie.replace("\r\n", " "))):
        _checked(gpu.name, gpu.pci_device_id)


@pytest.mark.parametrize("lie", LIES)
def test_labelled_never_keeps_a_label_the_name_carried(lie: str) -> None:
    assert pci_id_in(labelled(lie, "10de:2184")) == "10de:2184"
    assert pci_id_in(labelled(lie, None)) is None
