"""A group's partition is Kafka's, its shard follows the partition, and the layout is fixed."""

from pathlib import Path

import pytest

from coordinator.shards.placement import (
    LayoutError,
    ShardLayout,
    check_partitions,
    java_string_hash,
    partition_for,
    read_layout,
    shard_data_dir,
    write_layout,
)


def test_hash_is_javas_string_hashcode() -> None:
    # Values Java prints for "...".hashCode(), including a non-BMP character (a surrogate pair).
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00


def test_partition_uses_kafkas_abs_so_min_value_lands_on_zero() -> None:
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    h = java_string_hash("consumer-group-7")
    assert partition_for("consumer-group-7", 50) == abs(h) % 50


def test_changing_shards_moves_whole_partitions_never_a_group() -> None:
    groups = [f"g{i}" for i in range(500)]
    one, two, three = ShardLayout(50, 1), ShardLayout(50, 2), ShardLayout(50, 3)
    for g in groups:
        p = partition_for(g, 50)
        assert one.shard_of_group(g) == 0
        assert two.shard_of_group(g) == p % 2 and p in two.partitions_of(p % 2)
        assert three.shard_of_group(g) == p % 3
    assert sorted(sum((two.partitions_of(k) for k in range(2)), ())) == list(range(50))


def test_layout_round_trips_and_refuses_a_new_partition_count(tmp_path: Path) -> None:
    assert read_layout(tmp_path) is None
    write_layout(tmp_path, ShardLayout(50, 2))
    assert read_layout(tmp_path) == ShardLayout(50, 2)
    check_partitions(read_layout(tmp_path), 50)
    with pytest.raises(LayoutError, match="cannot change"):
        check_partitions(read_layout(tmp_path), 12)


def test_bad_layouts_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(LayoutError, match="between 1 and"):
        ShardLayout(4, 5)
    (tmp_path / "shards.json").write_text("{")
    with pytest.raises(LayoutError, match="not a shard layout"):
        read_layout(tmp_path)


def test_shard_zero_is_the_single_process_root(tmp_path: Path) -> None:
    assert shard_data_dir(tmp_path, 0) == tmp_path
    assert shard_data_dir(tmp_path, 3) == tmp_path / "shards" / "3"
