"""A damaged or hostile GPU catalog or node-class table (a data folder another release or a
mirror wrote): every wrong type, non-finite or absurd number and missing field is one
ConfigError line naming the field, never a traceback later and never a value coerced into
something else (``float("nan")``, ``int(2.7)``, ``bool("no")``)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from gpuhost.datadir import data_path
from gpuhost.datafiles import load_yaml, read_file_text
from gpuhost.errors import ConfigError
from gpuhost.gpus.catalog import CATALOG_FILE, parse_catalog
from gpuhost.gpus.node_classes import CLASSES_FILE, parse_classes

NAN, INF = float("nan"), float("inf")


def _shipped(name: str) -> Any:
    return load_yaml(read_file_text(data_path(name), name))


def _first(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return next(row for row in rows if row.get(key))


def _fabric(value: Any, field: str) -> Callable[[Any], None]:
    return lambda d: _first(d["classes"], "fabric")["fabric"].__setitem__(field, value)


def _collective(value: Any, field: str) -> Callable[[Any], None]:
    return lambda d: _first(d["classes"], "collective")["collective"].__setitem__(field, value)


def _cls(value: Any, field: str) -> Callable[[Any], None]:
    return lambda d: d["classes"][0].__setitem__(field, value)


@pytest.mark.parametrize(
    "change",
    [
        _fabric(NAN, "rate_gbps"),
        _fabric(INF, "rate_gbps"),
        _fabric("400", "rate_gbps"),
        _fabric(True, "rate_gbps"),
        _fabric(10**30, "ports"),
        _fabric(2.7, "ports"),
        _fabric("4", "ports"),
        _fabric("no", "peermem"),
        _fabric(None, "peermem"),
        _collective(NAN, "reference_busbw_gbs"),
        _collective(INF, "reference_busbw_gbs"),
        _collective(1e308, "reference_busbw_gbs"),
        _collective("450", "reference_busbw_gbs"),
        _collective(["x"], "how"),
        _collective(None, "confidence"),
        _cls([1], "board"),
        _cls(5, "pci_ids"),
        _cls({"a": 1}, "pci_ids"),
        _cls(7, "name"),
        lambda d: d["classes"].append(copy.deepcopy(d["classes"][0])),
    ],
)
def test_a_hostile_node_class_table_is_one_config_line(change: Callable[[Any], None]) -> None:
    data = copy.deepcopy(_shipped(CLASSES_FILE))
    change(data)
    with pytest.raises(ConfigError) as err:
        parse_classes(data)
    assert "\n" not in str(err.value) and CLASSES_FILE in str(err.value)


def _gpu(field: str, value: Any) -> Callable[[Any], None]:
    return lambda d: d["gpus"][0].__setitem__(field, value)


def _chips(field: str, value: Any) -> Callable[[Any], None]:
    return lambda d: [chip.__setitem__(field, value) for chip in d["chips"].values()]


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["gpus"][0].pop("name"),
        _gpu("name", 5),
        _gpu("name", ""),
        _gpu("compute_capability", 9.0),
        _gpu("compute_capability", "nan"),
        _gpu("source", None),
        _gpu("table", ["x"]),
        lambda d: d["devices"].__setitem__("2330", "GH100"),
        lambda d: d["devices"].__setitem__("2330", ["GH100"]),
        lambda d: d["devices"].__setitem__("2330", [["GH100"], "x"]),
        lambda d: d["devices"].__setitem__("zz/../", ["GH100", "x"]),
        lambda d: d["devices"].__setitem__(2330, ["GH100", "x"]),
        _chips("compute_capability", "nan"),
        _chips("compute_capability", "99999999999999999999.1"),
        lambda d: [chip.pop("evidence") for chip in d["chips"].values()],
        _chips("evidence", "one string"),
        _chips("evidence", []),
        _chips("architecture", 5),
    ],
)
def test_a_hostile_gpu_catalog_is_one_config_line(change: Callable[[Any], None]) -> None:
    data = copy.deepcopy(_shipped(CATALOG_FILE))
    change(data)
    with pytest.raises(ConfigError) as err:
        parse_catalog(data, "data/gpu_catalog.yaml")
    assert "\n" not in str(err.value) and "gpu_catalog.yaml" in str(err.value)


def test_the_shipped_tables_parse() -> None:
    assert parse_classes(_shipped(CLASSES_FILE))
    assert parse_catalog(_shipped(CATALOG_FILE), CATALOG_FILE).devices
