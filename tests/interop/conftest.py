from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.server import ServerProcess


@pytest.fixture
def server(tmp_path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path / "data")
    process.start()
    try:
        yield process
    finally:
        process.stop()
