"""Where the entity class of an (api key, version) comes from: kio, `protocol.legacy` for the
versions Kafka 4 removed but old clients still send, `protocol.newer` for the versions newer than
kio's, or `protocol.private` for this project's own APIs; and the names of the APIs."""

from __future__ import annotations

from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map

from . import legacy, newer, private

_NAME_EXCEPTIONS = {"api_versions": "ApiVersions", "offset_for_leader_epoch": "OffsetForLeaderEpoch"}


@cache
def request_schema(api_key: int, api_version: int) -> Any:
    key = (api_key, api_version)
    legacy_cls = legacy.REQUESTS.get(key) or newer.REQUESTS.get(key) or private.REQUESTS.get(key)
    return legacy_cls if legacy_cls is not None else load_request_schema(api_key, api_version)


@cache
def response_schema(api_key: int, api_version: int) -> Any:
    key = (api_key, api_version)
    legacy_cls = legacy.RESPONSES.get(key) or newer.RESPONSES.get(key) or private.RESPONSES.get(key)
    return legacy_cls if legacy_cls is not None else load_response_schema(api_key, api_version)


def api_snake_name(api_key: int) -> str | None:
    """The API's name in snake case (join_group), or None for a key neither Kafka nor
    `protocol.private` defines."""
    return api_key_map.get(api_key) or private.SNAKE_NAMES.get(api_key)


def api_name(api_key: int) -> str:
    """Kafka's API name in CamelCase (JoinGroup), as Kafka's docs and metrics spell it."""
    # Private names first and uncached: a plug-in may declare one after a lookup (`private.declare`).
    return private.NAMES.get(api_key) or _kafka_name(api_key)


@cache
def _kafka_name(api_key: int) -> str:
    snake = api_key_map.get(api_key)
    if snake is None:
        return f"Unknown{api_key}"
    return _NAME_EXCEPTIONS.get(snake) or "".join(part.capitalize() for part in snake.split("_"))
