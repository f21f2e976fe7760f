"""Share groups' edge (KIP-932, issue 30): their APIs and where a ShareFetch's records come from.

The group side (membership, share-partition state, acquisition) is pure and lives in
``coordinator/core/share``; this package is what it needs from the log, and the APIs (served in
both modes: over the embedded data plane, or over the upstream the sidecar fronts):

- :mod:`.apis` - ShareGroupHeartbeat and ShareGroupDescribe (group APIs of the shard), and with
  them :mod:`.offsets_apis` (Describe/Alter/DeleteShareGroupOffsets, mode-independent) and
  :mod:`.partitions_api` (the private DescribeSharePartitions);
- :mod:`.fetch_apis` - ShareFetch and ShareAcknowledge: read off the shard, acquire on it; a
  closed connection's share sessions released;
- :mod:`.starts` - where a new share partition starts, in the data plane's log or the upstream's;
- :mod:`.ends` - where a partition ends, in the data plane or as the upstream last said (the offsets APIs' lag);
- :mod:`.wiring` - the node's one call per mode: the data path and its APIs;

- :mod:`.source` - the record source interface: a partition read from an offset, as whole batches
  with their offsets, the partition's log start / high watermark / last stable offset, and which
  batches belong to aborted transactions;
- :mod:`.embedded` - the source over embedded mode's data plane, in process;
- :mod:`.upstream` - the source over the upstream in sidecar mode (Fetch ``read_committed`` to the
  partition's leader);
- :mod:`.cache` - the bounded cache of fetched batches shared by the consumers of a partition;
- :mod:`.settings` - the package's settings;
- :mod:`.acquire` - the glue: a source's read plus a share partition's state -> the records a
  member acquires, the ``AcquiredRecords`` ranges and the batches to send.
"""
