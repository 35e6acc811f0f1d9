"""What a host's fabric should be: the fabric of the node class (data/node_classes.yaml,
gpuhost.gpus.node_classes) its GPUs are, when it shows the class's full GPU count, with the
inventory's override (``gpuhost_node``, older ``gpuhost_fabric``; validated by
gpuhost.inventory.contract) over it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StrictBool, StrictFloat, StrictInt, with_config
from typing_extensions import TypedDict

from gpuhost.gpus.node_classes import (
    FABRIC_FIELDS,
    LINK_LAYERS,
    NodeClass,
    class_of,
    node_override,
)

__all__ = ["LINK_LAYERS", "FabricExpectation", "FabricOverride", "expectation", "node_class"]

OVERRIDE_KEYS = ("gpuhost_node", "gpuhost_fabric")
FIELDS = FABRIC_FIELDS


@with_config(ConfigDict(extra="forbid", strict=True))
class FabricOverride(TypedDict, total=False):
    """Inventory data ``gpuhost_fabric`` (the fabric half of ``gpuhost_node``; validated by
    gpuhost.inventory.contract)."""

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


def _expected(node_class: NodeClass) -> FabricExpectation | None:
    spec = node_class.fabric
    if spec is None:
        return None
    return FabricExpectation(
        name=node_class.name,
        ports=spec.ports,
        rate_gbps=spec.rate_gbps,
        link_layer=spec.link_layer,
        peermem=spec.peermem,
        source=spec.source,
        gpu=node_class.gpu_names,
        gpus=node_class.values.get("gpus"),
    )


def node_class(gpu_names: Sequence[str]) -> FabricExpectation | None:
    """The fabric of the node class every GPU belongs to, when the host shows its full count
    (a 2-GPU test box with H100 cards is no HGX node)."""
    if not gpu_names:
        return None
    found = class_of(gpu_names[0])
    if found is None or found.values.get("gpus") != len(gpu_names):
        return None
    if not all(found.has(name) for name in gpu_names):
        return None
    return _expected(found)


def expectation(gpu_names: Sequence[str], host_data: Mapping[str, Any]) -> FabricExpectation | None:
    """The host's expectation: its class with the inventory's override (``gpuhost_node``, older
    ``gpuhost_fabric``) over it (None: neither)."""
    found = node_class(gpu_names)
    override = node_override(host_data)
    given = {k: override[k] for k in FIELDS if k in override}
    if not given:
        return found
    if "rate_gbps" in given:
        given["rate_gbps"] = float(given["rate_gbps"])
    keys = [k for k in OVERRIDE_KEYS if any(f in (host_data.get(k) or {}) for f in FIELDS)]
    base = found or FabricExpectation(name="inventory")
    source = f"inventory data {' and '.join(keys)}" + (f" over {found.name}" if found else "")
    return replace(base, **given, source=source, required=True)
