"""KIP-932 share groups ("queues"), as Apache Kafka 4.3 implements them: the pure core.

Registered with the shard as the group type ``share`` (:mod:`.registration`, one line in
``shard.GROUP_TYPES``). What is here:

- :mod:`.config` - the settings one operation reads, and ``share.auto.offset.reset``;
- :mod:`.records` - share-partition records (ours, compaction-safe, modelled on Kafka's
  ShareSnapshot/ShareUpdate) and their codec;
- :mod:`.partition` - one share partition's state, its replay, and how a change becomes records
  and counted transitions (theory of operation there);
- :mod:`.runs` - a batch's offsets as runs of equal state, the form that state is held in;
- :mod:`.acquisition` - ShareFetch's acquisition of records under a lock;
- :mod:`.acknowledgement` - accept, release, reject, gap, renew; the batch checks;
- :mod:`.release` - lock expiry, a member's release, the log start moving;
- :mod:`.state` - a shard's share partitions, their replay dispatch, initialize/reset/delete;
- :mod:`.sessions` - share sessions (Kafka's ``ShareSessionCache``), memory only;
- :mod:`.assignor` - Kafka's simple assignor;
- :mod:`.membership` - ShareGroupHeartbeat: members, epochs, subscription, target assignment, and
  its records;
- :mod:`.describe` - ShareGroupDescribe and DescribeShareGroupOffsets descriptions;
- :mod:`.offsets` - AlterShareGroupOffsets and DeleteShareGroupOffsets;
- :mod:`.fetch` - ShareFetch / ShareAcknowledge on the shard over the edge's reads of the log;
- :mod:`.schema`, :mod:`.group`, :mod:`.requests`, :mod:`.registration` - the type's record
  declarations, its ``Group``, its requests and its registration.
"""
