"""`coordinator history export`: history rows of a time range to one JSON-lines or Parquet file.

Reads the segments of `<data-dir>/history/` (while the server runs too: an in-progress last line
is skipped), keeps rows with `since <= ts_ms < until`, and writes them in sequence order. With
several shards, every shard directory has its own history (its rows carry the shard's node id):
their rows are merged in time order.

- jsonl: one compact JSON object per row, null fields omitted (the segment format itself, so the
  pipeline reads exports and raw history directories alike).
- parquet: every field of `coordinator.history.schema.FIELDS` as a column with its declared type,
  written in row groups of `BATCH_ROWS`. pyarrow is imported only here, on demand: the server does
  not need it (`pip install .[pipeline]`).
- parquet-partitioned: the same columns as a Hive-partitioned dataset in the directory `output`,
  `day=YYYY-MM-DD/bucket=B/part-<first seq>-<n>.parquet` (see `schema.day_of`, `schema.group_bucket`).
  Incremental: exporting a day again replaces that day's bucket directories it writes, and leaves
  every other day alone, so a daily `--since D --until D+1` appends day D; exporting everything
  rebuilds the whole dataset.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

import msgspec

from .schema import DAY_MS, FIELDS, TOPIC_PARTITIONS, day_of, group_bucket
from .segments import read_rows

BATCH_ROWS = 100_000


def arrow_schema() -> Any:
    """The pyarrow schema of `FIELDS` (imports pyarrow)."""
    import pyarrow as pa

    simple = {"int32": pa.int32(), "int64": pa.int64(), "float64": pa.float64(), "string": pa.string()}
    topic_partitions = pa.list_(pa.struct([("topic", pa.string()), ("partitions", pa.list_(pa.int32()))]))
    return pa.schema([
        pa.field(f.name, topic_partitions if f.type == TOPIC_PARTITIONS else simple[f.type], nullable=not f.required)
        for f in FIELDS
    ])


def _batches(rows: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    iterator = iter(rows)
    while batch := list(islice(iterator, size)):
        yield batch


def write_jsonl(rows: Iterable[dict[str, Any]], output: Path) -> int:
    encoder = msgspec.json.Encoder()
    count = 0
    with open(output, "wb") as handle:
        for batch in _batches(rows, BATCH_ROWS):
            handle.write(encoder.encode_lines(batch))
            count += len(batch)
    return count


def write_parquet(rows: Iterable[dict[str, Any]], output: Path) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = arrow_schema()
    count = 0
    with pq.ParquetWriter(output, schema, compression="zstd") as writer:
        for batch in _batches(rows, BATCH_ROWS):
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            count += len(batch)
        if count == 0:
            writer.write_table(schema.empty_table())
    return count


def write_partitioned(rows: Iterable[dict[str, Any]], output: Path, *, basename: str | None = None,
                      replace: bool = True) -> int:
    """Rows as a `day=/bucket=` Parquet dataset under `output` (module docstring). `replace` deletes
    what a partition held before this call wrote into it; False adds files beside it (the synthetic
    generator's workers write disjoint buckets)."""
    import pyarrow as pa

    schema = arrow_schema()
    first_seq: list[int] = []

    def tables() -> Iterator[Any]:
        for batch in _batches(rows, BATCH_ROWS):
            if not first_seq:
                first_seq.append(int(batch[0].get("seq", 0)))
            yield pa.Table.from_pylist(batch, schema=schema)

    stream = tables()
    head = next(stream, None)  # the first batch names the files (its first seq)
    if head is None:
        return 0
    name = basename if basename is not None else f"part-{first_seq[0]:020d}"
    return write_partitioned_tables(_chain(head, stream), output, basename=name, replace=replace)


def write_partitioned_tables(tables: Iterable[Any], output: Path, *, basename: str, replace: bool = True) -> int:
    """pyarrow tables with the columns of `arrow_schema()` as a `day=/bucket=` dataset (what
    `write_partitioned` does with rows; a columnar producer such as `pipeline.synthetic` calls this
    directly). The partition keys are computed per table, vectorised, with `day_of` and
    `group_bucket` once per distinct day and group."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    schema = arrow_schema()
    keys = pa.schema([("day", pa.string()), ("bucket", pa.int32())])
    full = pa.schema([*schema, *keys])
    count = 0

    def batches() -> Iterator[Any]:
        nonlocal count
        for table in tables:
            count += table.num_rows
            yield from _with_partition_keys(table, full).to_batches()

    output.mkdir(parents=True, exist_ok=True)
    ds.write_dataset(
        batches(), output, schema=full, format="parquet",
        partitioning=ds.partitioning(keys, flavor="hive"),
        basename_template=f"{basename}-{{i}}.parquet",
        existing_data_behavior="delete_matching" if replace else "overwrite_or_ignore",
        file_options=ds.ParquetFileFormat().make_write_options(compression="zstd"),
        min_rows_per_group=min(BATCH_ROWS, 65_536), max_rows_per_group=1 << 20,
    )
    return count


def _with_partition_keys(table: Any, schema: Any) -> Any:
    """`table` (columns of `arrow_schema()`) plus its `day` and `bucket` columns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def mapped(column: Any, key: Callable[[Any], Any], kind: Any) -> Any:
        distinct = pc.unique(column)
        values = pa.array([key(v) for v in distinct.to_pylist()], kind)
        return pc.take(values, pc.index_in(column, value_set=distinct))

    ts = table["ts_ms"]
    # Whole days since the epoch, rounded down like `//` (integer division rounds towards zero).
    days = pc.divide(pc.subtract(ts, pc.if_else(pc.less(ts, 0), DAY_MS - 1, 0)), pa.scalar(DAY_MS, pa.int64()))
    day = mapped(days, lambda d: day_of(d * DAY_MS), pa.string())
    bucket = mapped(table["group_id"], group_bucket, pa.int32())
    return pa.Table.from_arrays([*table.select(schema.names[:-2]).columns, day, bucket], schema=schema)


def _chain(head: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield head
    yield from rest


FORMATS = {"jsonl": write_jsonl, "parquet": write_parquet, "parquet-partitioned": write_partitioned}


def export(history_dir: Path | Sequence[Path], output: Path, fmt: str, since_ms: int | None = None,
           until_ms: int | None = None) -> int:
    """Write the rows of `history_dir` (or of several, merged by time: one per shard) in
    [since, until) to `output`; returns the row count."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; known: {', '.join(FORMATS)}")
    if output.parent:
        output.parent.mkdir(parents=True, exist_ok=True)
    sources = [history_dir] if isinstance(history_dir, Path) else list(history_dir)
    if len(sources) == 1:
        rows: Iterable[dict[str, Any]] = read_rows(sources, since_ms, until_ms)
    else:  # each source is in time order (one writer each)
        rows = heapq.merge(*(read_rows([source], since_ms, until_ms) for source in sources),
                           key=lambda row: row.get("ts_ms", 0))
    return FORMATS[fmt](rows, output)
