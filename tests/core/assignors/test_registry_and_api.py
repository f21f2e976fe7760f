"""The registry, ``group.consumer.assignors`` parsing, the spec types and the package's purity."""

from __future__ import annotations

import ast
from pathlib import Path
from uuid import UUID

import pytest

from coordinator.core import assignors as package
from coordinator.core.assignors import (
    ASSIGNORS,
    CONSUMER_GROUP_ASSIGNORS_DEFAULT,
    GroupSpec,
    MemberSubscriptionSpec,
    PartitionAssignor,
    RangeAssignor,
    SubscribedTopicMetadata,
    SubscriptionType,
    TopicMetadata,
    UniformAssignor,
    consumer_group_assignors,
)
from tests.core.assignors.support import T1, T2, group, member


def test_builtin_assignors_by_name_in_kafka_default_order() -> None:
    assert list(ASSIGNORS) == ["uniform", "range"]
    assert isinstance(ASSIGNORS["uniform"], UniformAssignor)
    assert isinstance(ASSIGNORS["range"], RangeAssignor)
    assert all(a.name == n for n, a in ASSIGNORS.items())
    with pytest.raises(TypeError):
        ASSIGNORS["x"] = ASSIGNORS["range"]  # type: ignore[index]


def test_default_config_is_uniform_then_range() -> None:
    assert CONSUMER_GROUP_ASSIGNORS_DEFAULT == ("uniform", "range")
    configured = consumer_group_assignors()
    assert [a.name for a in configured] == ["uniform", "range"]


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("range", ["range"]),
        (" range , uniform ", ["range", "uniform"]),
        (["uniform"], ["uniform"]),
        ("org.apache.kafka.coordinator.group.assignor.RangeAssignor,uniform", ["range", "uniform"]),
    ],
)
def test_config_values_accepted(value: str | list[str], names: list[str]) -> None:
    assert [a.name for a in consumer_group_assignors(value)] == names


@pytest.mark.parametrize(
    "value",
    [
        "",
        "  ",
        [],
        "uniform,uniform",
        "uniform,org.apache.kafka.coordinator.group.assignor.UniformAssignor",
        "uniform,,range",
        "sticky",
        "com.example.MyAssignor",
    ],
)
def test_config_values_rejected(value: str | list[str]) -> None:
    with pytest.raises(ValueError):
        consumer_group_assignors(value)


def test_assignors_satisfy_the_protocol() -> None:
    def name_of(assignor: PartitionAssignor) -> str:
        return assignor.name

    assert name_of(UniformAssignor()) == "uniform"
    assert name_of(RangeAssignor()) == "range"


def test_subscription_type_is_derived_from_topic_ids() -> None:
    assert (
        group(A=member(T1, T2), B=member(T2, T1)).subscription_type is SubscriptionType.HOMOGENEOUS
    )
    assert group(A=member(T1), B=member(T1, T2)).subscription_type is SubscriptionType.HETEROGENEOUS
    assert group(A=member(), B=member()).subscription_type is SubscriptionType.HOMOGENEOUS
    assert group(A=member(), B=member(T1)).subscription_type is SubscriptionType.HETEROGENEOUS
    assert GroupSpec({}).subscription_type is SubscriptionType.HOMOGENEOUS
    assert group(b=member(), a=member(), c=member()).sorted_member_ids == ("a", "b", "c")


def test_member_spec_defaults_and_describer() -> None:
    spec = MemberSubscriptionSpec(frozenset({T1}))
    assert dict(spec.assigned_partitions) == {}
    assert spec.rack_id is None and spec.instance_id is None
    topics = SubscribedTopicMetadata(
        {T1: TopicMetadata("orders", 3, {0: frozenset({"r1", "r2"})}), T2: TopicMetadata("x", 0)}
    )
    assert topics.num_partitions(T1) == 3
    assert topics.num_partitions(T2) == 0
    assert topics.num_partitions(UUID(int=0)) is None
    assert topics.topic_name(T1) == "orders"
    assert topics.racks_for_partition(T1, 0) == {"r1", "r2"}
    assert topics.racks_for_partition(T1, 1) == frozenset()
    assert topics.racks_for_partition(T2, 0) == frozenset()


_ALLOWED_IMPORTS = {
    "__future__",
    "collections.abc",
    "dataclasses",
    "enum",
    "heapq",
    "itertools",
    "msgspec",  # frozen Structs: one MemberSubscriptionSpec per member per target computation
    "operator",
    "types",
    "typing",
    "uuid",
}


def test_package_is_pure() -> None:
    """No clocks, randomness, I/O or async: only these stdlib modules and the package itself."""
    root = Path(package.__file__).parent
    for path in sorted(root.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name in _ALLOWED_IMPORTS or name.startswith("coordinator.core.assignors"), (
                    f"{path.name} imports {name}"
                )
            if isinstance(node, ast.ImportFrom) and node.module == "uuid":
                assert [a.name for a in node.names] == ["UUID"], f"{path.name}: uuid4/uuid1?"
