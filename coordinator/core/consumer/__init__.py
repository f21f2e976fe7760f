"""KIP-848 consumer groups (``group.protocol=consumer``), as Apache Kafka 4.x implements them.

- :mod:`.group` - the group data, the ``Group`` contract, and the replay rules: the ONLY code that
  changes consumer-group state is the replay of its records (theory of operation there);
- :mod:`.member` - a member's data, its reconciliation state, and its record-5 and record-8 values;
- :mod:`.assignment` - assignments (topic id -> partitions) and their KIP-1251 partition epochs;
- :mod:`.schema` - the record types it owns (3, 5, 6, 7, 8; 4 reserved): structs and declarations;
- :mod:`.records` - the record factories (types 3, 5, 6, 7, 8 and their tombstones);
- :mod:`.replay` - record dispatch to the group, and state transitions reported as events;
- :mod:`.reconciliation` - how a member moves from its current assignment towards its target
  (Kafka's ``CurrentAssignmentBuilder``): revoke before assign;
- :mod:`.heartbeat` - ConsumerGroupHeartbeat: membership, then reconciliation and the answer; the
  heartbeats of one runtime batch share one target assignment per group (theory of operation there);
- :mod:`.validation` - the request, member and epoch checks a heartbeat passes first;
- :mod:`.targets` - the target assignment (which assignor, its input, its records);
- :mod:`.membership` - leaving, fencing, session and rebalance timers, load and topic changes;
- :mod:`.describe` - ConsumerGroupDescribe;
- :mod:`.context` - what the parts share (groups, topic image, configuration, timer keys);
- :mod:`.registration` - the parts wired into the shard (``shard.GROUP_TYPES``).

The topic image they read (subscribed names to ids, regexes, the metadata hash) is the shard's:
:mod:`coordinator.core.topics`.
"""
