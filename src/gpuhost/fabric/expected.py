"""What a host's fabric should be: the node class of data/fabric_classes.yaml its GPUs match,
with inventory data ``gpuhost_fabric`` over it (validated by gpuhost.inventory.contract)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Annotated, Any, Literal

import yaml
from pydantic import ConfigDict, Field, StrictBool, StrictFloat, StrictInt, with_config
from typing_extensions import TypedDict

from gpuhost.datafiles import load_yaml
from gpuhost.errors import ConfigError

DATA_FILE = "fabric_classes.yaml"
OVERRIDE_KEY = "gpuhost_fabric"
FIELDS = ("ports", "rate_gbps", "link_layer", "peermem")
LINK_LAYERS = ("InfiniBand", "Ethernet")


@with_config(ConfigDict(extra="forbid", strict=True))
class FabricOverride(TypedDict, total=False):
    """Inventory data ``gpuhost_fabric`` (validated by gpuhost.inventory.contract)."""

    ports: Annotated[StrictInt, Field(ge=0, le=4096)]
    rate_gbps: Annotated[StrictInt | StrictFloat, Field(gt=0, le=1e6, allow_inf_nan=False)]
    link_layer: Literal["InfiniBand", "Ethernet"]
    peermem: StrictBool


@dataclass(frozen=True)
class FabricExpectation:
    """``ports``/``rate_gbps``/``link_layer`` None: not judged; ``source``: the class row's
    source, or the inventory key; ``required``: the inventory asks for a fabric (a node class
    alone judges only a host that has RDMA ports: a GPU server built without one is no fault)."""

    name: str
    ports: int | None = None
    rate_gbps: float | None = None
    link_layer: str | None = None
    peermem: bool = False
    source: str = ""
    gpu: tuple[str, ...] = ()
    gpus: int | None = None
    required: bool = False


def _row(raw: Any, index: int) -> FabricExpectation:
    where = f"{DATA_FILE}: classes[{index}]"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping, found {type(raw).__name__}")
    try:
        row = FabricExpectation(
            name=str(raw["name"]),
            ports=int(raw["ports"]),
            rate_gbps=float(raw["rate_gbps"]),
            link_layer=str(raw["link_layer"]),
            peermem=bool(raw["peermem"]),
            source=str(raw["source"]),
            gpu=tuple(str(word) for word in raw["gpu"]),
            gpus=int(raw["gpus"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: missing or bad field ({exc})") from None
    if row.link_layer not in LINK_LAYERS or not row.source.strip():
        raise ConfigError(f"{where}: expected link_layer in {LINK_LAYERS} and a source")
    return row


@cache
def load_classes() -> tuple[FabricExpectation, ...]:
    text = resources.files("gpuhost.data").joinpath(DATA_FILE).read_text(encoding="utf-8")
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{DATA_FILE}: not valid YAML ({exc})") from None
    rows = data.get("classes") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise ConfigError(f"{DATA_FILE}: expected a 'classes' list")
    return tuple(_row(raw, i) for i, raw in enumerate(rows))


def node_class(gpu_names: Sequence[str]) -> FabricExpectation | None:
    """The first class whose words every GPU name has and whose count is the host's."""
    if not gpu_names:
        return None
    for row in load_classes():
        if row.gpus == len(gpu_names) and all(
            all(word.lower() in name.lower() for word in row.gpu) for name in gpu_names
        ):
            return row
    return None


def expectation(gpu_names: Sequence[str], host_data: Mapping[str, Any]) -> FabricExpectation | None:
    """The host's expectation: its class with ``gpuhost_fabric`` over it (None: neither)."""
    found = node_class(gpu_names)
    override = host_data.get(OVERRIDE_KEY)
    if not isinstance(override, Mapping) or not override:
        return found
    given = {k: override[k] for k in FIELDS if k in override}
    if "rate_gbps" in given:
        given["rate_gbps"] = float(given["rate_gbps"])
    base = found or FabricExpectation(name="inventory")
    source = f"inventory data {OVERRIDE_KEY}" + (f" over {found.name}" if found else "")
    return replace(base, **given, source=source, required=True)
