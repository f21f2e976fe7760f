"""Hostile requests found by the fuzzer that reached the core."""

from __future__ import annotations

import pytest

from tests.core.harness import Harness


def test_a_member_naming_a_protocol_twice_does_not_wedge_the_rebalance() -> None:
    h = Harness()
    ref, _ = h.join_new("g", protocols=(("range", b""), ("range", b"x")))
    h.finish_initial_delay("g")  # completing the join used to raise "supports none of []"
    assert h.reply(ref).error_code == 0 and h.reply(ref).protocol_name == "range"
    assert h.state("g") == "CompletingRebalance"


@pytest.mark.asyncio
async def test_a_core_bug_fails_its_request_and_the_shard_keeps_serving(tmp_path) -> None:
    """The shard logged a core failure with a keyword structlog reserves, which raised in the shard
    task and stopped it: every group API then waited forever. One bad event fails one request."""
    from coordinator.core.requests import TimerFired
    from coordinator.node.server import CoordinatorServer
    from protocol.build import build
    from protocol.schemas import request_schema
    from tests.runtime.conftest import make_config
    from tests.support.wire import WireClient

    server = CoordinatorServer(make_config(tmp_path))
    await server.start()
    try:
        shard = server.shard
        assert shard is not None

        def broken(key: object, fx: object) -> None:
            raise RuntimeError("a core bug")

        key = ("classic-heartbeat", "g", "m")
        with pytest.MonkeyPatch.context() as patch:
            patch.setitem(shard.core._timer_handlers, "classic-heartbeat", broken)
            shard.core.timers.deadlines[key] = 5
            shard.post(TimerFired(key, 5))  # handled by the shard task, where failures are logged
            client = await WireClient.connect(server.port)
            listed = await client.request(build(request_schema(16, 5), {"states_filter": [], "types_filter": []}),
                                          timeout=5)
            assert listed.error_code == 0 and shard._task is not None and not shard._task.done()
            await client.close()
    finally:
        await server.stop()
