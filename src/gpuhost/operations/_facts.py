"""``fact``: ``host.get_fact`` read once per host and arguments during pyinfra's prepare stage.

Nothing runs on a host while its deploy is being prepared, so a fact read by several operations
(``DebPackages``, ``AptHolds``, the nvidia-smi report, the marker file...) has the same value each
time: one SSH round trip instead of one per operation. In every other stage (execute, where an
operation must see what the earlier ones changed) it is exactly ``host.get_fact``.
"""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from pyinfra import host
from pyinfra.api import Host

from gpuhost.pyinfra_adapter import current_host, is_preparing

_PREPARED: WeakKeyDictionary[Host, dict[tuple[Any, str], Any]] = WeakKeyDictionary()


def _key(cls: type, kwargs: dict[str, Any]) -> tuple[Any, str]:
    return (cls, repr(sorted((k, repr(v)) for k, v in kwargs.items())))


def fact(cls: Any, **kwargs: Any) -> Any:
    """The fact's value; during the prepare stage read from the host only the first time."""
    target = current_host()
    if target is None or not is_preparing(target):
        if target is not None and target in _PREPARED:
            del _PREPARED[target]  # execute stage: never reuse what prepare read
        return host.get_fact(cls, **kwargs)
    cache = _PREPARED.setdefault(target, {})
    key = _key(cls, kwargs)
    if key not in cache:
        cache[key] = host.get_fact(cls, **kwargs)
    return cache[key]
