"""The one way a handler answers: a version-free description turned into the response of the
request's API and version."""

from __future__ import annotations

from functools import cache
from typing import Any

from protocol.build import build
from protocol.codec import encode_described
from protocol.schemas import response_schema

from .registry import RequestContext


@cache
def response_class(api_key: int, api_version: int) -> type[Any]:
    return response_schema(api_key, api_version)  # type: ignore[no-any-return]


def respond(ctx: RequestContext, description: dict[str, Any]) -> Any:
    """The response of the request's API and version, from a version-free description: framed bytes
    straight from the description where a fast encoder exists, else the kio entity built from it."""
    encoded = encode_described(ctx.api_key, ctx.api_version, ctx.correlation_id, description)
    if encoded is not None:
        return encoded
    return build(response_class(ctx.api_key, ctx.api_version), description)
