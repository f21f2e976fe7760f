"""The coordinator's record log kept on the Kafka cluster the sidecar fronts (issue 27).

Coordinator log partition p is partition p of one compacted topic on the upstream cluster. This
package holds the pieces that talk to that cluster, each usable and tested on its own against a real
Apache Kafka:

- `batch`: record batches (magic 2) as written and read here;
- `cluster`: the log topic's leaders and the transaction coordinators, found and called;
- `topic`: the log topic created with its shape (compacted, replicated) or refused when it has
  another shape;
- `writer`: a partition's writer, a transactional producer whose `transactional.id` belongs to the
  partition, so a new owner's InitProducerId fences the old one; many entries share one transaction;
- `reader`: a partition read `read_committed`, aborted transactions left out;
- `membership`: ownership through the cluster's group protocol (the instance group);
- `sink`: the shard's `LogSink` over the writers (group commit: one transaction per partition per round);
- `owner`: the partitions this instance serves, their writers, loading them into a core;
- `tail`: every partition's compacted copy, kept read, so a takeover reads only the tail;
- `settings`: `coordinator.log.*`.

`node/server.py` wires them when `coordinator.log.storage=upstream` (docs/ARCHITECTURE.md, "The log
upstream").
"""
