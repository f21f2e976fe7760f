"""kio response classes by (api key, version), looked up once (kio imports a module per lookup)."""

from __future__ import annotations

from functools import cache

from kio.index import load_response_schema


@cache
def response_class(api_key: int, api_version: int) -> type:
    return load_response_schema(api_key, api_version)
