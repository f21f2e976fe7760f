"""asyncio edges: server lifecycle, connections, API dispatch, the shard task and the clock."""
