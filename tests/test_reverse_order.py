"""The on-demand reverse order (docs/testing.md, "Every test passes alone"): with
GPUHOST_TEST_REVERSE=1 tests/conftest.py's collection hook reverses the selection, modules and
the tests within them; without it the order is pytest's."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

CONFTEST = Path(__file__).resolve().parent / "conftest.py"


def _hook(config: pytest.Config):  # type: ignore[no-untyped-def]
    """tests/conftest.py's collection hook, as pytest loaded it (never imported twice: its
    module code sets this run's data and state folders)."""
    for plugin in config.pluginmanager.get_plugins():
        if Path(getattr(plugin, "__file__", "") or "").resolve() == CONFTEST:
            return plugin.pytest_collection_modifyitems
    raise AssertionError(f"{CONFTEST} is not loaded as a plugin")


def _items(*names: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(nodeid=name, keywords={}) for name in names]


NAMES = ("tests/a/test_x.py::test_1", "tests/a/test_x.py::test_2", "tests/b/test_y.py::test_1")


@pytest.mark.parametrize(("value", "expected"), [("1", NAMES[::-1]), (None, NAMES), ("0", NAMES)])
def test_gpuhost_test_reverse_reverses_the_selection_only_on_demand(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, value: str | None,
    expected: tuple[str, ...],
) -> None:
    if value is None:
        monkeypatch.delenv("GPUHOST_TEST_REVERSE", raising=False)
    else:
        monkeypatch.setenv("GPUHOST_TEST_REVERSE", value)
    items = _items(*NAMES)
    _hook(request.config)(SimpleNamespace(), items)
    assert tuple(item.nodeid for item in items) == expected
