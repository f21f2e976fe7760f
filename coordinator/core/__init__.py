"""The pure core of the group coordinator.

Everything under ``coordinator.core`` is deterministic, synchronous Python: no asyncio, sockets, clocks,
random numbers or id generation. Time (``now_ms``) and fresh ids (``JoinGroup.new_member_id``) come in as
arguments; effects go out as data (:class:`~coordinator.core.result.Result`: records to append, replies to
release, timers to arm, domain events). ``tests/core/test_purity.py`` enforces the import rules.

Entry point for the runtime: :class:`coordinator.core.shard.CoordinatorShard`.
"""
