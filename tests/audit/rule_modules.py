"""The modules of the audit's rules package, for tests that read the rules' source."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def rule_modules() -> list[ModuleType]:
    """The registry, every module of the rules package (one per concern) and the per-GPU fault
    judgements the GPU rules call (``gpuhost.faults.gpu``)."""
    import gpuhost.audit.rules as package
    import gpuhost.faults.gpu as fault_judgements

    return [
        package,
        *(
            importlib.import_module(f"{package.__name__}.{info.name}")
            for info in pkgutil.iter_modules(package.__path__)
        ),
        fault_judgements,
    ]
