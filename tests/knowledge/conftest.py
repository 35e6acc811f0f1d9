"""The data directory of one test: empty, the process's loaded data forgotten before and
after."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuhost import datadir

from .served import clear_loaded


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "data"
    monkeypatch.setenv(datadir.ENV, str(folder))
    clear_loaded()
    yield folder
    clear_loaded()
