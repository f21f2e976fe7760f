"""ApiVersions (key 18), versions 0–4 (flexible from 3; the response header is always v0).

- The advertised table is the server's API registry, less this project's private APIs
  (`protocol/private.py`): they are served, never advertised, so no Kafka client sees them.
- v3+: ClientSoftwareName and ClientSoftwareVersion must match Kafka's pattern (alphanumeric at both
  ends, alphanumerics, '.', '-' inside), else ErrorCode.INVALID_REQUEST with no API list.
- A version above 4 is answered as v0 with ErrorCode.UNSUPPORTED_VERSION and a single entry for key 18 with
  our range (KIP-511); clients retry with a version they share.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from protocol.codec import API_VERSIONS_KEY, DecodedRequest
from protocol.errors import ErrorCode
from protocol.private import NAMES as PRIVATE_APIS

from ...api.authorization import Unchecked
from ...api.declaration import SidecarRoute
from ...api.placement import NoGroup
from ...api.registry import ApiHandler, RequestContext
from ...api.respond import respond, response_class

MIN_VERSION, MAX_VERSION = 0, 4
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def api_versions(table: Callable[[], Mapping[int, tuple[int, int]]]) -> ApiHandler:
    """`table` is what is served: the server's API registry (all of it but the private APIs is
    advertised)."""
    cache: dict[int, Any] = {}

    def handle(ctx: RequestContext, request: Any) -> Any:
        if isinstance(request, DecodedRequest):  # too-new version: answer in v0 format
            return _build_v0({
                "error_code": ErrorCode.UNSUPPORTED_VERSION,
                "api_keys": [{"api_key": API_VERSIONS_KEY, "min_version": MIN_VERSION, "max_version": MAX_VERSION}],
            })
        if ctx.api_version >= 3 and not (
            _SOFTWARE.fullmatch(request.client_software_name)
            and _SOFTWARE.fullmatch(request.client_software_version)
        ):
            return respond(ctx, {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": []})
        response = cache.get(ctx.api_version)
        if response is None:
            response = respond(ctx, {
                "error_code": 0,
                "api_keys": [
                    {"api_key": key, "min_version": low, "max_version": high}
                    for key, (low, high) in table().items() if key not in PRIVATE_APIS
                ],
            })
            cache[ctx.api_version] = response
        return response

    return ApiHandler(API_VERSIONS_KEY, MIN_VERSION, MAX_VERSION, handle,
                      authorization=Unchecked("Kafka answers ApiVersions to anyone, before authentication"),
                      placement=NoGroup(), sidecar=SidecarRoute.SERVED)


def _build_v0(description: dict[str, Any]) -> Any:
    from protocol.build import build

    return build(response_class(API_VERSIONS_KEY, 0), description)
