"""The security APIs: SaslHandshake (17) v0–1, SaslAuthenticate (36) v0–2, DescribeAcls (29) v2–3,
CreateAcls (30) v2–3, DeleteAcls (31) v2–3, DescribeUserScramCredentials (50) v0,
AlterUserScramCredentials (51) v0.

- SaslHandshake and SaslAuthenticate are answered by a connection's authenticator while it is not
  authenticated (`sasl.py`); what reaches these handlers came on a listener without SASL or after
  authentication, and is ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers it ("SaslAuthenticate
  request received after successful authentication"). SaslHandshake v0 (bare SASL tokens after
  it, no SaslAuthenticate) is served as Kafka 4.0 serves it: older librdkafka needs it advertised.
- The ACL and SCRAM APIs go through the shard like the group APIs (`group_api`): changes are records
  in the log, answers wait until they are durable, COORDINATOR_LOAD_IN_PROGRESS while loading.
- Authorization as Kafka's: CreateAcls, DeleteAcls, AlterUserScramCredentials need ALTER on the
  CLUSTER, DescribeAcls and DescribeUserScramCredentials DESCRIBE on it; otherwise the whole request
  is CLUSTER_AUTHORIZATION_FAILED. Without an authorizer the ACL APIs are SECURITY_DISABLED ("No
  Authorizer is configured.") and the SCRAM APIs are open to everyone, as in Kafka.
- CreateAcls/DescribeAcls/DeleteAcls v0–1 are gone from Kafka 4 (KIP-896) and not served.
- Several shards: the security state is shard 0's. Shard k >= 1 is given a `Remote`: the reads
  are answered from its read-only copy of shard 0's (`shards/security_mirror.py`), the writes are
  authorized here as always, then handed to shard 0 (`shards/security_channel.py`) and answered
  once shard 0 made them durable and this shard's copy has them.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from protocol.errors import ErrorCode

from ..api.authorization import InHandler, Unchecked
from ..api.declaration import SidecarRoute
from ..api.placement import NoGroup
from ..api.registry import ApiHandler, RequestContext
from ..api.respond import respond
from ..core.effects import Effects, TimerTable
from ..runtime.apis.group_api import group_api
from . import requests as core
from .acls import AclBinding, AclFilter
from .authorizer import ALTER, DESCRIBE
from .store import SecurityStore

if TYPE_CHECKING:
    from ..runtime.shard import ShardRuntime

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51

_MESSAGES: dict[int, str] = {
    ErrorCode.SECURITY_DISABLED: "No Authorizer is configured.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
}

Shard = Callable[[], "ShardRuntime | None"]


class Remote(Protocol):
    """Shard 0's security state as shard k >= 1 serves it (several shards)."""

    def store(self) -> SecurityStore | None:
        """The local read-only copy; None until it has first read shard 0's log."""
        ...

    async def forward(self, principal: str, request: Any) -> Any:
        """Shard 0's core response to an authorized write, or an ErrorCode for the whole request."""
        ...


def security_handlers(shard: Shard, remote: Remote | None = None) -> list[ApiHandler]:
    return [
        sasl_handshake(), sasl_authenticate(),
        describe_acls(shard, remote), create_acls(shard, remote), delete_acls(shard, remote),
        describe_user_scram_credentials(shard, remote), alter_user_scram_credentials(shard, remote),
    ]


Read = Callable[[SecurityStore, Any, Effects], None]


def _served(shard: Shard, remote: Remote | None, read: Read | None, api_key: int, min_version: int,
            max_version: int, to_core: Any, to_wire: Any, on_error: Any,
            precheck: Callable[[RequestContext, Any], int | None]) -> ApiHandler:
    """The API through this process's shard, or (`remote` given) from the copy (`read`, a store
    method) or forwarded to shard 0 (`read` None: a write)."""
    declared: dict[str, Any] = {"authorization": InHandler("ALTER or DESCRIBE on the cluster, in its precheck"),
                                "placement": NoGroup(), "sidecar": SidecarRoute.SERVED}
    if remote is None:
        return group_api(shard, api_key, min_version, max_version, to_core, to_wire, on_error, precheck, **declared)

    async def forwarded(ctx: RequestContext, request: Any, core_request: Any) -> Any:
        answer = await remote.forward(ctx.principal, core_request)
        if isinstance(answer, int):
            return respond(ctx, on_error(ctx, request, answer))
        return respond(ctx, to_wire(ctx, request, answer))

    def handle(ctx: RequestContext, request: Any) -> Any | Coroutine[Any, Any, Any]:
        if (code := precheck(ctx, request)) is not None:
            return respond(ctx, on_error(ctx, request, code))
        store = remote.store()
        if store is None:
            return respond(ctx, on_error(ctx, request, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
        core_request = to_core(ctx, request, 0)
        if read is None:
            return forwarded(ctx, request, core_request)
        fx = Effects(0, TimerTable())
        read(store, core_request, fx)
        (reply,) = fx.replies
        return respond(ctx, to_wire(ctx, request, reply.response))

    return ApiHandler(api_key, min_version, max_version, handle, **declared)


_SASL = Unchecked("the SASL exchange authenticates; after it, it is ILLEGAL_SASL_STATE for everyone")


def sasl_handshake() -> ApiHandler:
    def handle(ctx: RequestContext, request: Any) -> Any:
        return respond(ctx, {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []})

    return ApiHandler(SASL_HANDSHAKE, 0, 1, handle, authorization=_SASL, placement=NoGroup(), sidecar=SidecarRoute.SERVED)


def sasl_authenticate() -> ApiHandler:
    def handle(ctx: RequestContext, request: Any) -> Any:
        return respond(ctx, {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "auth_bytes": b"",
                             "error_message": "SaslAuthenticate request received after successful authentication"})

    return ApiHandler(SASL_AUTHENTICATE, 0, 2, handle, authorization=_SASL, placement=NoGroup(),
                      sidecar=SidecarRoute.SERVED)


def _cluster(operation: int, needs_authorizer: bool) -> Callable[[RequestContext, Any], int | None]:
    def precheck(ctx: RequestContext, request: Any) -> int | None:
        authz = ctx.authz
        if authz is None:
            return ErrorCode.SECURITY_DISABLED if needs_authorizer else None
        return None if authz.cluster(ctx, operation) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    return precheck


def _binding(c: Any) -> AclBinding:
    return AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host, c.operation,
                      c.permission_type)


def _filter(f: Any) -> AclFilter:
    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                     f.host_filter, f.operation, f.permission_type)


def describe_acls(shard: Shard, remote: Remote | None = None) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.DescribeAcls:
        return core.DescribeAcls(ref, _filter(r))

    def to_wire(ctx: RequestContext, r: Any, resp: core.DescribeAclsResponse) -> dict[str, Any]:
        resources: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
        for acl in resp.acls:
            resources.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
                {"principal": acl.principal, "host": acl.host, "operation": acl.operation,
                 "permission_type": acl.permission_type})
        return {"throttle_time": 0, "error_code": resp.error_code, "error_message": resp.error_message,
                "resources": [{"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
                              for (t, n, p), acls in resources.items()]}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"error_code": code, "error_message": _MESSAGES.get(code), "resources": []}

    return _served(shard, remote, SecurityStore.describe_acls, DESCRIBE_ACLS, 2, 3, to_core, to_wire, on_error,
                   _cluster(DESCRIBE, True))


def create_acls(shard: Shard, remote: Remote | None = None) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.CreateAcls:
        return core.CreateAcls(ref, tuple(_binding(c) for c in r.creations))

    def to_wire(ctx: RequestContext, r: Any, resp: core.CreateAclsResponse) -> dict[str, Any]:
        return {"throttle_time": 0, "results": [{"error_code": code, "error_message": message}
                                                for code, message in resp.results]}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"results": [{"error_code": code, "error_message": _MESSAGES.get(code)} for _ in r.creations]}

    return _served(shard, remote, None, CREATE_ACLS, 2, 3, to_core, to_wire, on_error, _cluster(ALTER, True))


def delete_acls(shard: Shard, remote: Remote | None = None) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.DeleteAcls:
        return core.DeleteAcls(ref, tuple(_filter(f) for f in r.filters))

    def to_wire(ctx: RequestContext, r: Any, resp: core.DeleteAclsResponse) -> dict[str, Any]:
        return {"throttle_time": 0, "filter_results": [
            {"error_code": result.error_code, "error_message": result.error_message, "matching_acls": [
                {"error_code": 0, "error_message": None, "resource_type": a.resource_type,
                 "resource_name": a.resource_name, "pattern_type": a.pattern_type, "principal": a.principal,
                 "host": a.host, "operation": a.operation, "permission_type": a.permission_type}
                for a in result.deleted]}
            for result in resp.results]}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"filter_results": [{"error_code": code, "error_message": _MESSAGES.get(code), "matching_acls": []}
                                   for _ in r.filters]}

    return _served(shard, remote, None, DELETE_ACLS, 2, 3, to_core, to_wire, on_error, _cluster(ALTER, True))


def describe_user_scram_credentials(shard: Shard, remote: Remote | None = None) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.DescribeScramCredentials:
        return core.DescribeScramCredentials(ref, None if r.users is None else tuple(u.name for u in r.users))

    def to_wire(ctx: RequestContext, r: Any, resp: core.DescribeScramCredentialsResponse) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": resp.error_code, "error_message": None, "results": [
            {"user": u.user, "error_code": u.error_code, "error_message": u.error_message,
             "credential_infos": [{"mechanism": m, "iterations": i} for m, i in u.credentials]}
            for u in resp.results]}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"error_code": code, "error_message": _MESSAGES.get(code), "results": []}

    return _served(shard, remote, SecurityStore.describe_credentials, DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0,
                   to_core, to_wire, on_error, _cluster(DESCRIBE, False))


def alter_user_scram_credentials(shard: Shard, remote: Remote | None = None) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.AlterScramCredentials:
        return core.AlterScramCredentials(
            ref, tuple(core.ScramDeletion(d.name, d.mechanism) for d in r.deletions),
            tuple(core.ScramUpsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
                  for u in r.upsertions))

    def to_wire(ctx: RequestContext, r: Any, resp: core.AlterScramCredentialsResponse) -> dict[str, Any]:
        return {"throttle_time": 0, "results": [{"user": u.user, "error_code": u.error_code,
                                                 "error_message": u.error_message} for u in resp.results]}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        users = dict.fromkeys(x.name for x in (*r.deletions, *r.upsertions))
        return {"results": [{"user": u, "error_code": code, "error_message": _MESSAGES.get(code)} for u in users]}

    return _served(shard, remote, None, ALTER_USER_SCRAM_CREDENTIALS, 0, 0, to_core, to_wire, on_error,
                   _cluster(ALTER, False))
