"""What a check asked before the shard answers: the one shape of authorization, placement and topic
existence checks, so the runtime applies all of them the same way (`runtime/apis/group_api.py`).

A check `(ctx, request, ...) -> Decision` answers:
- None: everything asked for may go on;
- an error code: the whole request is refused with it (through the API's `on_error`);
- `Filtered(request, merge)`: the core gets only what passed (a copy of the kio request), and
  `merge` adds the refused parts to the wire description the API built;
- `Answered(description)`: nothing is left to ask the core; this is the whole response.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from .registry import RequestContext

Merge = Callable[[dict[str, Any]], dict[str, Any]]


class Filtered(NamedTuple):
    request: Any
    merge: Merge


class Answered(NamedTuple):
    description: dict[str, Any]


Decision = int | Filtered | Answered | None
Check = Callable[["RequestContext", Any, Any], Decision]
"""An authorization or existence check: (ctx, request, the shard's topics image) -> Decision."""
PlacementCheck = Callable[["RequestContext", Any], Decision]
"""An ownership check: the same answers, asked before the shard is known."""
