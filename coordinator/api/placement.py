"""Where an API's group ids are, and the interface that says which groups this node coordinates.

An API served by a group coordinator shard declares its placement (`ApiDeclaration.placement`); one
that declares none stops start-up (a group API answered on whichever shard receives it would be
open by default). The placement is data; the shards feature interprets it (`shards/ownership.py`)
into the NOT_COORDINATOR check asked before the shard sees the request:

- `NoGroup()`: the request names no group (the bootstrap APIs, the security APIs);
- `OneGroup(field)`: one group id in `field`: another node's group is refused whole;
- `GroupList(field, answer_field, refused_entry)`: a list of group ids in `field`; another node's
  groups are answered `refused_entry(group_id, NOT_COORDINATOR)` in `answer_field`, the rest served;
- `GroupEntries(...)`: the same for a list of entries that each carry a `group_id`;
- `GroupResources(answer_field, refused_entry)`: the config resources of DescribeConfigs and
  IncrementalAlterConfigs, whose GROUP ones (type 32) name a group each: another node's are answered
  `refused_entry(group_id, NOT_COORDINATOR)` in `answer_field`, the rest served;
- `ByVersion(from_version, before, after)`: one placement below a version, another from it on;
- `LocalGroups()`: the request lists this node's groups (ListGroups): the core holds only those.

`GroupOwnership` is what a node knows of placement: whether it coordinates a group, and which
shard does. `shards.placement.ShardLayout` answers it from the configuration (today); the cluster
log's dynamic ownership answers it from what the instance owns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

Owns = Callable[[str], bool]
"""Whether this node coordinates a group id."""


class GroupOwnership(Protocol):
    """Which shard coordinates a group; `shards` is how many there are (1: nothing is hashed)."""

    @property
    def shards(self) -> int: ...

    def shard_of_group(self, group_id: str) -> int: ...


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a request's group ids are: data, interpreted by the shards feature."""

    def group_ids(self, request: Any, version: int) -> list[str]:
        """The distinct group ids the request names (a single empty id is none)."""
        return []


@dataclass(frozen=True, slots=True)
class NoGroup(Placement):
    pass


@dataclass(frozen=True, slots=True)
class LocalGroups(Placement):
    pass


@dataclass(frozen=True, slots=True)
class OneGroup(Placement):
    field: str = "group_id"

    def group_ids(self, request: Any, version: int) -> list[str]:
        group_id = getattr(request, self.field, None)
        return [group_id] if group_id else []


@dataclass(frozen=True, slots=True)
class GroupList(Placement):
    field: str
    answer_field: str
    refused_entry: Callable[[str, int], dict[str, Any]]

    def group_ids(self, request: Any, version: int) -> list[str]:
        return list(dict.fromkeys(getattr(request, self.field)))


@dataclass(frozen=True, slots=True)
class GroupEntries(Placement):
    field: str
    answer_field: str
    refused_entry: Callable[[str, int], dict[str, Any]]

    def group_ids(self, request: Any, version: int) -> list[str]:
        return list(dict.fromkeys(e.group_id for e in getattr(request, self.field)))


GROUP_RESOURCE = 32
"""A config resource naming a group (Kafka's ``ConfigResource.Type.GROUP``)."""


@dataclass(frozen=True, slots=True)
class GroupResources(Placement):
    answer_field: str
    refused_entry: Callable[[str, int], dict[str, Any]]

    def group_ids(self, request: Any, version: int) -> list[str]:
        return list(dict.fromkeys(r.resource_name for r in request.resources
                                  if r.resource_type == GROUP_RESOURCE and r.resource_name))


@dataclass(frozen=True, slots=True)
class ByVersion(Placement):
    from_version: int
    before: Placement
    after: Placement

    def group_ids(self, request: Any, version: int) -> list[str]:
        return (self.before if version < self.from_version else self.after).group_ids(request, version)
