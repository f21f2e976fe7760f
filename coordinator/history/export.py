"""`coordinator history export`: history rows of a time range to one JSON-lines or Parquet file.

Reads the segments of `<data-dir>/history/` (while the server runs too: an in-progress last line
is skipped), keeps rows with `since <= ts_ms < until`, and writes them in sequence order.

- jsonl: one compact JSON object per row, null fields omitted (the segment format itself, so the
  pipeline reads exports and raw history directories alike).
- parquet: every field of `coordinator.history.schema.FIELDS` as a column with its declared type,
  written in row groups of `BATCH_ROWS`. pyarrow is imported only here, on demand: the server does
  not need it (`pip install .[pipeline]`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import msgspec

from .schema import FIELDS, TOPIC_PARTITIONS
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


FORMATS = {"jsonl": write_jsonl, "parquet": write_parquet}


def export(history_dir: Path, output: Path, fmt: str, since_ms: int | None = None,
           until_ms: int | None = None) -> int:
    """Write the rows of `history_dir` in [since, until) to `output`; returns the row count."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; known: {', '.join(FORMATS)}")
    if output.parent:
        output.parent.mkdir(parents=True, exist_ok=True)
    return FORMATS[fmt](read_rows([history_dir], since_ms, until_ms), output)
