"""The authorizer every API asks (`authorizer.class.name` set): `Authorizer.allowed(ctx, op, type, name)`.

Kafka's StandardAuthorizer over the ACLs of the security store (`acls.AclIndex.authorize`):
`super.users` may do everything; otherwise the ACLs decide, and a resource no ACL names at all is
`allow.everyone.if.no.acl.found`. The principal is the connection's (`ctx.principal`), the host
its client address (`ctx.client_host`).

Decisions are cached per (principal, host, operation, resource) until the ACLs change (the store's
`version`), so a heartbeat with an authorizer costs one dict lookup. With no authorizer configured
`ctx.authz` is None and handlers skip every check: that is the hot path, one attribute test.

The ACLs are the store's published view (`SecurityStore.index`): an ACL created or deleted
decides requests only once the log entry carrying it is durable, as Kafka's brokers apply an ACL
when its metadata record is committed; a crash can never undo a change that already allowed or
denied a request (`tests/security/test_acl_durability.py`).
`describable_topics(ctx, image)` is the set of topics a principal may DESCRIBE, for the KIP-848
regex subscriptions (the core resolves a member's regex among them only); it is cached per
(principal, host) until the topics or the ACLs change.

Until the log is loaded the ACLs are unknown: connections hold every request until it is
(`ready`), as a Kafka broker does not serve before its authorizer has loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..api.authorization import (
    ALTER,
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    CREATE,
    DELETE,
    DESCRIBE,
    GROUP,
    IDEMPOTENT_WRITE,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    allowed,
)
from .settings import AuthorizerConfig

if TYPE_CHECKING:
    from ..api.registry import RequestContext
    from ..core.topics import TopicsImage
    from .store import SecurityStore

_CACHE_LIMIT = 100_000

__all__ = ["ALTER", "CLUSTER", "CLUSTER_ACTION", "CLUSTER_NAME", "CREATE", "DELETE", "DESCRIBE", "GROUP",
           "IDEMPOTENT_WRITE", "READ", "TOPIC", "TRANSACTIONAL_ID", "WRITE", "Authorizer", "allowed"]


class Authorizer:
    def __init__(self, config: AuthorizerConfig, store: Callable[[], SecurityStore | None]) -> None:
        self.super_users = frozenset(config.super_users)
        self.allow_if_no_acl = config.allow_everyone_if_no_acl_found
        self._store = store
        self._cache: dict[tuple[str, str, int, int, str], bool] = {}
        self._version = -1
        self._ready = False
        self._describable: dict[tuple[str, str], tuple[int, int, frozenset[str]]] = {}
        """(principal, host) -> (topics image version, ACL version, the topics it may describe)."""

    @property
    def ready(self) -> bool:
        """The ACLs are loaded (for good: this process serves until it stops)."""
        if not self._ready:
            self._ready = self._store() is not None
        return self._ready

    def allowed(self, ctx: RequestContext, operation: int, resource_type: int, name: str) -> bool:
        principal = ctx.principal
        if principal in self.super_users:
            return True
        store = self._store()
        if store is None:
            return False  # not loaded yet: nothing is known to be allowed
        if store.version != self._version:
            self._cache.clear()
            self._version = store.version
        key = (principal, ctx.client_host, operation, resource_type, name)
        decision = self._cache.get(key)
        if decision is None:
            decision = store.index.authorize(principal, ctx.client_host, operation, resource_type, name,
                                             self.allow_if_no_acl)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = decision
        return decision

    def describable_topics(self, ctx: RequestContext, image: TopicsImage) -> frozenset[str] | None:
        """The topics of `image` the principal may DESCRIBE; None for a super user (every topic)."""
        if ctx.principal in self.super_users:
            return None
        store = self._store()
        acl_version = -1 if store is None else store.version
        key = (ctx.principal, ctx.client_host)
        cached = self._describable.get(key)
        if cached is not None and cached[0] == image.version and cached[1] == acl_version:
            return cached[2]
        names = frozenset(t.name for t in image if self.allowed(ctx, DESCRIBE, TOPIC, t.name))
        if len(self._describable) >= _CACHE_LIMIT:
            self._describable.clear()
        self._describable[key] = (image.version, acl_version, names)
        return names

    def cluster(self, ctx: RequestContext, operation: int) -> bool:
        return self.allowed(ctx, operation, CLUSTER, CLUSTER_NAME)

