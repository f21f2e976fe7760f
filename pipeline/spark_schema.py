"""The Spark schema of history rows, derived from the one definition in `coordinator.history.schema`
(which imports nothing but the standard library, so importing it does not pull in the server)."""

from __future__ import annotations

from pyspark.sql import types as T

from coordinator.history.schema import FIELDS, TOPIC_PARTITIONS

_SIMPLE = {"int32": T.IntegerType(), "int64": T.LongType(), "float64": T.DoubleType(), "string": T.StringType()}
_TOPIC_PARTITIONS = T.ArrayType(T.StructType([
    T.StructField("topic", T.StringType()),
    T.StructField("partitions", T.ArrayType(T.IntegerType())),
]))


def history_schema() -> T.StructType:
    """Every field, nullable (a JSON row omits its null fields; Parquet declares the required ones
    non-null, which Spark reads into a nullable field just the same)."""
    return T.StructType([
        T.StructField(f.name, _TOPIC_PARTITIONS if f.type == TOPIC_PARTITIONS else _SIMPLE[f.type], True)
        for f in FIELDS
    ])
