"""A node can host a group type defined outside ``coordinator/`` (here one that exists only in
tests/): its requests reach the node's shard, its records go to the log on disk and come back
after a restart, and ListGroups over a real socket lists its groups with their own type. Serving
its own API over the socket is the API declaration's part (issue 26, point 6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.core.errors import ErrorCode
from coordinator.node.server import CoordinatorServer
from coordinator.runtime.group_metrics import ShardCollector
from tests.core.toy.group_type import ToyJoin, ToyJoinResponse, register
from tests.runtime.conftest import make_config
from tests.support.wire import call
from tests.support.wire import request as req


async def list_groups(server: CoordinatorServer) -> dict[str, tuple[str, str, str]]:
    response = await call(server.port, req(16, 5, states_filter=[], types_filter=[]))
    assert response.error_code == ErrorCode.NONE
    return {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in response.groups}


@pytest.mark.asyncio
async def test_a_node_given_a_group_type_serves_persists_and_lists_it(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    server = CoordinatorServer(config, group_types=(register,))
    await server.start()
    try:
        shard = server.shard
        assert shard is not None and "toy" in shard.core.types
        answer = await shard.submit(ToyJoin(shard.new_ref(), "t1", "a"))
        assert answer == ToyJoinResponse(ErrorCode.NONE, 1, ("a",))
        assert (await list_groups(server))["t1"] == ("toy", "Stable", "toy")
        # Its gauge is scraped beside the built-in types' (the collector names no type).
        families = {f.name: f for f in ShardCollector(lambda: server.shard).collect()}
        assert [(s.labels, s.value) for s in families["coordinator_toy_members"].samples] == [({"group": "t1"}, 1)]
        assert "coordinator_consumer_members" in families
    finally:
        await server.stop()

    again = CoordinatorServer(config, group_types=(register,))  # loads the log from disk
    await again.start()
    try:
        assert (await list_groups(again))["t1"] == ("toy", "Stable", "toy")
        assert again.shard is not None
        answer = await again.shard.submit(ToyJoin(again.shard.new_ref(), "t1", "b"))
        assert answer == ToyJoinResponse(ErrorCode.NONE, 2, ("a", "b"))
    finally:
        await again.stop()


@pytest.mark.asyncio
async def test_a_node_not_given_the_type_skips_its_records_and_serves_the_rest(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    server = CoordinatorServer(config, group_types=(register,))
    await server.start()
    try:
        assert server.shard is not None
        await server.shard.submit(ToyJoin(server.shard.new_ref(), "t1", "a"))
    finally:
        await server.stop()

    plain = CoordinatorServer(config)  # the same log, read by a node without the type
    await plain.start()
    try:
        assert "t1" not in await list_groups(plain)
    finally:
        await plain.stop()
