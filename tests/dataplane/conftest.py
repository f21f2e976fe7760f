from __future__ import annotations

import pytest

from .harness import Harness


@pytest.fixture
def harness() -> Harness:
    return Harness()
