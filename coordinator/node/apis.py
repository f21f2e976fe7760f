"""The node's APIs, assembled from their declarations: each feature installs what it interprets.

Every API is one declaration (`api/declaration.py`). At start-up, before anything is opened:
1. each declaration is checked closed (`check_declared`): no authorization rule, or an API of the
   shard without a placement, stops start-up with one line (`DeclarationError`);
2. security turns the declared authorization rules into checks (`security.checks.authorization_checks`);
3. with several shards, the shards feature turns the declared placements into NOT_COORDINATOR
   checks over what this node owns (`shards.ownership.placement_checks`);
4. the runtime binds each API of the shard to its two checks (`runtime.apis.group_api.bind`).
In sidecar mode only the APIs not declared `SidecarRoute.FORWARDED` are registered (`served_by_sidecar`);
the rest go to the upstream cluster. No table keyed by API number exists besides the registry.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..api.declaration import ApiDeclaration, SidecarRoute, check_declared
from ..api.placement import Owns
from ..runtime.apis.group_api import bind
from ..security.checks import authorization_checks
from ..shards.ownership import Refusal, not_coordinator, placement_checks


def assemble(declarations: Sequence[ApiDeclaration], owns: Owns | None,
             refusal: Refusal | None = None) -> list[ApiDeclaration]:
    """The declared APIs, bound and ready to register. `owns`: the groups this node coordinates
    (several shards only; None answers every group here); `refusal`: the code for one it does not
    (NOT_COORDINATOR unless told). Raises `DeclarationError`."""
    for declaration in declarations:
        check_declared(declaration)
    authorized = authorization_checks(declarations)
    placed = placement_checks(declarations, owns, refusal or not_coordinator) if owns is not None else {}
    return [declaration if declaration.conversion is None
            else bind(declaration, authorized.get(declaration.api_key), placed.get(declaration.api_key))
            for declaration in declarations]


def served_by_sidecar(declarations: Iterable[ApiDeclaration], overrides: Iterable[ApiDeclaration]
                      ) -> list[ApiDeclaration]:
    """What sidecar mode registers: the declared APIs it serves, each replaced by the sidecar's own
    version of it where it has one (`overrides`: ApiVersions, FindCoordinator, ...)."""
    by_key = {declaration.api_key: declaration for declaration in declarations}
    by_key.update((declaration.api_key, declaration) for declaration in overrides)
    return [declaration for declaration in by_key.values() if declaration.sidecar is not SidecarRoute.FORWARDED]
