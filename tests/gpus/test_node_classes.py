"""The node classes (data/node_classes.yaml): one table of boards for the fault judgement, the
fabric and the collective floors, found by PCI ID or name, and one inventory override."""

from __future__ import annotations

import pytest

from gpuhost.errors import ConfigError
from gpuhost.fabric.expected import node_class as fabric_class
from gpuhost.faults.node_class import expectation_for
from gpuhost.gpus.node_classes import (
    class_of,
    load_classes,
    node_override,
    override_conflict,
    override_problem,
    parse_classes,
)
from gpuhost.inventory.contract import host_problems

H100 = "NVIDIA H100 80GB HBM3"


def test_one_table_defines_each_board_once() -> None:
    names = [c.name for c in load_classes()]
    assert len(names) == len(set(names))
    h100 = class_of(H100)
    assert h100 is not None and h100.name == "hgx-h100-8gpu"
    assert h100.values["gpus"] == 8 and h100.fabric is not None and h100.collective is not None
    # the fault judgement and the fabric read the same row
    assert expectation_for(H100, None, 8).name == fabric_class([H100] * 8).name == h100.name


@pytest.mark.parametrize(
    ("gpu", "board"),
    [
        ("10de:2330", "hgx-h100-8gpu"),  # what lspci -n / nvidia-smi -q report
        ("0x233010DE", "hgx-h100-8gpu"),
        ("nvidia h100 80gb hbm3", "hgx-h100-8gpu"),
        ("A100-SXM4-80GB", "hgx-a100-8gpu"),  # the SKU name without NVIDIA
        ("NVIDIA A100-SXM4-40GB", "hgx-a100-8gpu"),
        ("NVIDIA H100 PCIe", None),  # another SKU: no HGX board
        ("10de:2331", None),
        ("Tesla T4", None),
    ],
)
def test_a_class_is_found_by_pci_id_or_sku_name(gpu: str, board: str | None) -> None:
    found = class_of(gpu)
    assert (found.name if found else None) == board


def test_one_override_with_the_older_spellings_beneath_it() -> None:
    data = {
        "gpuhost_expect": {"gpus": 4},
        "gpuhost_fabric": {"ports": 4},
        "gpuhost_node": {"rate_gbps": 200, "memory_mib": 81559},
    }
    assert node_override(data) == {"gpus": 4, "ports": 4, "rate_gbps": 200, "memory_mib": 81559}
    assert override_conflict(data) is None
    expect = expectation_for(H100, node_override(data), 4)
    assert (expect.gpus, expect.memory_mib) == (4, 81559)
    clash = {"gpuhost_expect": {"gpus": 4}, "gpuhost_node": {"gpus": 8}}
    line = "gpuhost_node.gpus is 8 but gpuhost_expect.gpus is 4: set it once, in gpuhost_node"
    assert override_conflict(clash) == line
    assert host_problems(clash) == [line]


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ({"gpus": -1}, "gpus: expected a whole number from 0"),
        ({"ports": "8"}, "ports: expected a whole number from 0 to 4096, found '8'"),
        ({"link_layer": "IB"}, "link_layer: expected InfiniBand or Ethernet, found 'IB'"),
        ({"gpu": 8}, "unknown key 'gpu', expected one of gpus, memory_mib"),
        ([8], "expected a mapping of gpus"),
    ],
)
def test_a_bad_override_is_one_line(value: object, said: str) -> None:
    assert said in str(override_problem(value))
    assert any(said in p for p in host_problems({"gpuhost_node": value}))


BASE = {
    "schema": 2,
    "sources": {"s": {"url": "https://x", "title": "t"}},
    "classes": [{"name": "b", "gpu_names": ["X"], "gpus": 8, "sources": ["s"]}],
}


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"fabric": {"ports": 8, "rate_gbps": 400, "link_layer": "IB", "peermem": True,
                     "source": "s"}}, "fabric.link_layer: expected InfiniBand or Ethernet"),
        ({"collective": {"reference_busbw_gbs": -3, "source": "s", "confidence": "primary",
                         "how": "h"}}, "collective.reference_busbw_gbs: expected a number of GB/s"),
        ({"collective": {"reference_busbw_gbs": 3, "source": "t", "confidence": "primary",
                         "how": "h"}}, "classes[0].collective.source: expected a key of sources"),
        ({"pci_ids": ["2330"]}, "pci_ids: expected lists of names, 10de:XXXX IDs"),
        ({"gpus": "8"}, "classes[0]: gpus: expected a whole number"),
    ],
)  # fmt: skip
def test_a_damaged_class_is_one_line(change: dict[str, object], said: str) -> None:
    data = {**BASE, "classes": [{**BASE["classes"][0], **change}]}  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=said.replace("[", r"\[").replace("]", r"\]")):
        parse_classes(data)


def test_the_pci_id_finds_the_class_where_the_name_does_not() -> None:
    assert class_of("Graphics Device (PCI 10de:2330)").name == "hgx-h100-8gpu"
    assert class_of("NVIDIA H100 80GB HBM3 (PCI 10de:2330)").name == "hgx-h100-8gpu"
    assert class_of("Graphics Device (PCI 10de:2331)") is None
