"""Where the entity class of an (api key, version) comes from: kio, or `protocol.legacy` for the
versions Kafka 4 removed but old clients still send."""

from __future__ import annotations

from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema

from . import legacy


@cache
def request_schema(api_key: int, api_version: int) -> Any:
    legacy_cls = legacy.REQUESTS.get((api_key, api_version))
    return legacy_cls if legacy_cls is not None else load_request_schema(api_key, api_version)


@cache
def response_schema(api_key: int, api_version: int) -> Any:
    legacy_cls = legacy.RESPONSES.get((api_key, api_version))
    return legacy_cls if legacy_cls is not None else load_response_schema(api_key, api_version)
