"""Root conftest: registers the lab's pytest plugin and skips `lab` tests where a lab cannot run.

Lab tests need root on Linux with systemd-nspawn (package systemd-container); elsewhere they are
skipped with that reason and the offline suite runs alone (also: pytest -m "not lab").
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

pytest_plugins = ["lab.plugin"]


def _lab_unavailable() -> str | None:
    if platform.system() != "Linux":
        return f"lab tests need Linux; this is {platform.system()}"
    if os.geteuid() != 0:
        return "lab tests need root (systemd-nspawn, network namespaces, mounts)"
    if shutil.which("systemd-nspawn") is None:
        return "lab tests need systemd-nspawn (package systemd-container; scripts/test installs it)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _lab_unavailable()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "lab" in item.keywords:
            item.add_marker(skip)
