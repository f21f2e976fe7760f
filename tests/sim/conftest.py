"""``slow`` simulations run only when asked for (``pytest -m slow``), as the marker promises."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow simulation: run with -m slow")
    for item in items:
        if HERE in Path(str(item.fspath)).parents and item.get_closest_marker("slow"):
            item.add_marker(skip)
