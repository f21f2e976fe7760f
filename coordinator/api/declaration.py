"""One API, one declaration: everything the node needs to know about an API, in one value.

An `ApiDeclaration` says:
- its key and the versions it really serves (ApiVersions, the codec's version check and the
  README's table are generated from the declarations);
- how it is served: a `handle(ctx, request)` (the bootstrap, data-plane and security APIs), or,
  for an API served by the group coordinator's shard, its `GroupConversion` (request -> core
  request, core response -> wire description, the whole request answered with one error code),
  which the runtime binds to the shard (`runtime/apis/group_api.bind`);
- where its group ids are (`placement`, `api/placement.py`), interpreted by the shards feature;
- its authorization rule (`authorization`, `api/authorization.py`), interpreted by security;
- whether sidecar mode serves it here or forwards it to the upstream cluster (`sidecar`).

Every table keyed by API number is derived from the declarations at start-up, so adding an API is
adding one declaration. Closed by default (`check_declared`, asked by the registry): an API without
an authorization rule, an API of the shard without a placement, or an API without a sidecar route
stops start-up with one line (`DeclarationError`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protocol.schemas import api_name

from .authorization import Rule
from .placement import Placement

if TYPE_CHECKING:
    from .registry import Handler, RequestContext

ToCore = Callable[["RequestContext", Any, int], Any]
ToWire = Callable[["RequestContext", Any, Any], dict[str, Any]]
OnError = Callable[["RequestContext", Any, int], dict[str, Any]]
Precheck = Callable[["RequestContext", Any], "int | None"]


class SidecarRoute(enum.Enum):
    """What sidecar mode (`upstream.bootstrap.servers`) does with an API."""

    FORWARDED = "forwarded"
    """Sent to the upstream cluster as it came (this node registers no handler for it)."""
    SERVED = "served"
    """Answered here."""
    SERVED_AFTER_IMPORT = "served after import"
    """Answered here once the upstream's committed offsets of the groups it names are imported
    (`sidecar/offsets.py`): the first request naming a group waits for them."""


class DeclarationError(ValueError):
    """An API declared without what the node needs to serve it safely: start-up stops with one line."""


@dataclass(frozen=True, slots=True)
class GroupConversion:
    """An API served by the group coordinator's shard: pure conversions the runtime binds.

    `shard` is the getter of the shard runtime (None until it exists); `precheck` returns an error
    code for a request the wire layer itself refuses; `known` trims what names topics or
    partitions the node's metadata does not know (a check of the authorization checks' shape)."""

    shard: Callable[[], Any]
    to_core: ToCore
    to_wire: ToWire
    on_error: OnError
    precheck: Precheck | None = None
    known: Callable[[RequestContext, Any, Any], Any] | None = None


def _unbound(ctx: RequestContext, request: Any) -> Any:
    raise RuntimeError(f"api {api_name(ctx.api_key)} served before it was bound to its shard")


@dataclass(frozen=True, slots=True)
class ApiDeclaration:
    api_key: int
    min_version: int
    max_version: int
    handle: Handler = _unbound
    refuse: Callable[[RequestContext, Any, int], Any] | None = None
    """The whole request answered with one error code, without the handler (group APIs: their
    `on_error`): for a wrapper that must refuse before the handler runs."""
    authorization: Rule | None = None
    placement: Placement | None = None
    sidecar: SidecarRoute | None = None
    conversion: GroupConversion | None = None
    """Set for an API served by the shard; `handle` is then built by binding it."""

    @property
    def name(self) -> str:
        return api_name(self.api_key)


def is_bound(declaration: ApiDeclaration) -> bool:
    """An API of the shard has been bound to its checks (`runtime/apis/group_api.bind`)."""
    return declaration.conversion is None or declaration.handle is not _unbound


def check_declared(declaration: ApiDeclaration) -> None:
    """Raises `DeclarationError` (one line) for a declaration the node must not serve."""
    what = f"api {declaration.name} (key {declaration.api_key})"
    if not 0 <= declaration.min_version <= declaration.max_version:
        raise DeclarationError(f"{what}: bad version range {declaration.min_version}..{declaration.max_version}")
    if declaration.authorization is None:
        raise DeclarationError(f"{what} declares no authorization rule (api/authorization.py): refusing to serve "
                               "it unchecked")
    if declaration.conversion is not None and declaration.placement is None:
        raise DeclarationError(f"{what} is served by the group coordinator but declares no placement "
                               "(api/placement.py): refusing to serve it on whichever shard receives it")
    if declaration.sidecar is None:
        raise DeclarationError(f"{what} declares no sidecar route (served here or forwarded)")
