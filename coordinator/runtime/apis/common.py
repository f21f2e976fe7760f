"""Helpers shared by the API modules."""

from __future__ import annotations

from functools import cache
from typing import Any

from protocol.build import build
from protocol.schemas import response_schema

from ..registry import RequestContext


@cache
def response_class(api_key: int, api_version: int) -> type[Any]:
    return response_schema(api_key, api_version)  # type: ignore[no-any-return]


def respond(ctx: RequestContext, description: dict[str, Any]) -> Any:
    """Build the response of the request's API and version from a version-free description."""
    return build(response_class(ctx.api_key, ctx.api_version), description)
