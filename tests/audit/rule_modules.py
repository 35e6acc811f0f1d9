"""The modules of the audit's rules package, for tests that read the rules' source."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def rule_modules() -> list[ModuleType]:
    """The registry and every module of the rules package (one per concern)."""
    import gpuhost.audit.rules as package

    return [package] + [
        importlib.import_module(f"{package.__name__}.{info.name}")
        for info in pkgutil.iter_modules(package.__path__)
    ]
