"""`coordinator history export`: history rows of a time range to one JSON-lines or Parquet file.

Reads the segments of `<data-dir>/history/` (while the server runs too: an in-progress last line
is skipped), keeps rows with `since <= ts_ms < until`, and writes them in sequence order.

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

from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import msgspec

from .schema import FIELDS, TOPIC_PARTITIONS, day_of, group_bucket
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
    import pyarrow.dataset as ds

    schema = arrow_schema()
    keys = pa.schema([("day", pa.string()), ("bucket", pa.int32())])
    full = pa.schema([*schema, *keys])
    count = 0
    days: dict[int, str] = {}
    buckets: dict[str, int] = {}
    first_seq: list[int] = []

    def batches() -> Iterator[Any]:
        nonlocal count
        for batch in _batches(rows, BATCH_ROWS):
            if not first_seq:
                first_seq.append(int(batch[0].get("seq", 0)))
            day = []
            bucket = []
            for row in batch:
                d = row["ts_ms"] // 86_400_000
                day.append(days.get(d) or days.setdefault(d, day_of(row["ts_ms"])))
                gid = row["group_id"]
                b = buckets.get(gid)
                bucket.append(b if b is not None else buckets.setdefault(gid, group_bucket(gid)))
            table = pa.Table.from_pylist(batch, schema=schema)
            table = table.append_column(full.field("day"), pa.array(day, pa.string()))
            table = table.append_column(full.field("bucket"), pa.array(bucket, pa.int32()))
            count += len(batch)
            yield from table.to_batches()

    stream = batches()
    head = next(stream, None)  # the first batch names the files (its first seq)
    if head is None:
        return 0
    name = basename if basename is not None else f"part-{first_seq[0]:020d}"
    output.mkdir(parents=True, exist_ok=True)
    ds.write_dataset(
        _chain(head, stream), output, schema=full, format="parquet",
        partitioning=ds.partitioning(keys, flavor="hive"),
        basename_template=f"{name}-{{i}}.parquet",
        existing_data_behavior="delete_matching" if replace else "overwrite_or_ignore",
        file_options=ds.ParquetFileFormat().make_write_options(compression="zstd"),
        min_rows_per_group=min(BATCH_ROWS, 65_536), max_rows_per_group=1 << 20,
    )
    return count


def _chain(head: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield head
    yield from rest


FORMATS = {"jsonl": write_jsonl, "parquet": write_parquet, "parquet-partitioned": write_partitioned}


def export(history_dir: Path, output: Path, fmt: str, since_ms: int | None = None,
           until_ms: int | None = None) -> int:
    """Write the rows of `history_dir` in [since, until) to `output`; returns the row count."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; known: {', '.join(FORMATS)}")
    if output.parent:
        output.parent.mkdir(parents=True, exist_ok=True)
    return FORMATS[fmt](read_rows([history_dir], since_ms, until_ms), output)
