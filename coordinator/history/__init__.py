"""The rebalance history: an append-only stream of the core's domain events beside the record log.

- `schema`: the one definition of the row format (fields, types, kinds, version); dependency-free.
- `rows`: the event → row table and the partition-ownership tracker.
- `assignments`: partition ownership read from the live core for the tracker.
- `segments`: the segment files in `<data-dir>/history/` (rotation, retention, reading).
- `writer`: the shard observer that stamps rows and writes them in batches off the event loop.
- `export`: `coordinator history export` (JSON lines, or Parquet via pyarrow imported lazily).
"""
