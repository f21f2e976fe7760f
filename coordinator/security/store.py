"""SCRAM credentials and ACLs as state replayed from the coordinator's log: `SecurityStore`.

A shard service like offsets (`core/registry.py`), which the node installs into the core
(`CoordinatorShard(services=...)`, a `core.shard.ShardService`): pure, no I/O or clock. It handles
five core requests and owns two record types (`ScramCredential`, `Acl`; see `core/records.py`):

- `AlterScramCredentials`: Kafka's ScramControlManager. Per user: a user altered twice in one
  request is DUPLICATE_RESOURCE ("A user credential cannot be altered twice in the same request");
  an empty name UNACCEPTABLE_CREDENTIAL ("Username must not be empty"); an unknown mechanism
  UNSUPPORTED_SASL_MECHANISM ("Unknown SCRAM mechanism"); fewer than 4096 or more than 16384
  iterations UNACCEPTABLE_CREDENTIAL ("Too few iterations" / "Too many iterations"); deleting a
  credential that does not exist RESOURCE_NOT_FOUND ("Attempt to delete a user credential that
  does not exist"). The client sends salt and salted password; StoredKey and ServerKey are derived
  here, the salted password is not kept. Results: deletions, then upsertions, then refusals.
- `DescribeScramCredentials`: Kafka's ScramImage.describe (no users = every user with a credential;
  a user named twice DUPLICATE_RESOURCE, an unknown one RESOURCE_NOT_FOUND, each with the name).
- `CreateAcls`, `DeleteAcls`, `DescribeAcls`: Kafka's AclControlManager (`acls.validate_new`; an
  ACL that exists already is a success that writes nothing; more than 10,000 new ACLs in one
  request is POLICY_VIOLATION for all, nothing written; a filter with unknown parts is
  INVALID_REQUEST; every match of a delete filter is reported and deleted once).

Every change is a record, so a standby that replays the log has the same users and ACLs.

Two views: the core's and the edge's
-----------------------------------
`credentials` and `acls` are the core's view: every change handled so far, durable or not, so the
next request of the same batch (a DeleteAcls after a CreateAcls) sees it. What the edges use to
decide (the authorizer's `index` and `version`, SASL's `credential()`) is the published view: a
change reaches it only once the log entry carrying it is durable (`mark()` / `publish()`, called by
the runtime from the entry's durable point; `ShardRuntime._settle`). That is the one release rule
applied to effects rather than replies, and it is what Kafka's brokers do (an ACL or SCRAM change is
applied when its metadata record is committed): a request is never allowed (or denied) by a change
that a crash could still undo. A replayed record (loading, a standby tailing) is durable already
and is published at once.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

from ..core.effects import Effects
from ..core.errors import ErrorCode
from ..core.record_codec import Record
from ..core.registry import Registration
from . import scram
from .acls import AclBinding, AclIndex, validate_new
from .records import RECORD_TYPES, AclKey, AclValue, ScramCredentialKey, ScramCredentialValue
from .requests import (
    AlterScramCredentials,
    AlterScramCredentialsResponse,
    CreateAcls,
    CreateAclsResponse,
    DeleteAcls,
    DeleteAclsResponse,
    DeleteAclsResult,
    DescribeAcls,
    DescribeAclsResponse,
    DescribedUser,
    DescribeScramCredentials,
    DescribeScramCredentialsResponse,
    ScramDeletion,
    ScramUpsertion,
    UserResult,
)
from .scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential

if TYPE_CHECKING:
    from ..core.shard import CoordinatorShard

_TWICE = "A user credential cannot be altered twice in the same request"
MAX_RECORDS_PER_USER_OP = 10000
"""Kafka's QuorumController bound on the records one request may write (CreateAcls over it fails)."""


_Change = tuple[ScramCredentialKey | AclKey, Any]


class SecurityStore:
    def __init__(self) -> None:
        self.credentials: dict[tuple[str, int], ScramCredential] = {}
        """The core's view: every credential change handled, durable or not."""
        self.acls: set[AclBinding] = set()
        """The core's view: every ACL change handled, durable or not."""
        self._index = AclIndex()
        self._index_version = 0
        self.version = 0
        """Bumped on every published ACL change (the authorizer's decision cache is keyed by it)."""
        self._published_credentials: dict[tuple[str, int], ScramCredential] = {}
        self._published_acls: set[AclBinding] = set()
        self._unpublished: collections.deque[_Change] = collections.deque()
        self._changes = 0
        """Changes replayed so far (live or not); `mark()` hands it out, `publish()` catches up to it."""
        self._published = 0

    @property
    def registration(self) -> Registration:
        return Registration(
            name="security",
            record_types=RECORD_TYPES,
            requests={
                AlterScramCredentials: self.alter_credentials,
                DescribeScramCredentials: self.describe_credentials,
                CreateAcls: self.create_acls,
                DeleteAcls: self.delete_acls,
                DescribeAcls: self.describe_acls,
            },
            error_responses={
                AlterScramCredentials: lambda req, code: AlterScramCredentialsResponse(
                    tuple(UserResult(u.user, code, None) for u in (*req.deletions, *req.upsertions)), code),
                DescribeScramCredentials: lambda req, code: DescribeScramCredentialsResponse(code),
                CreateAcls: lambda req, code: CreateAclsResponse(tuple((code, None) for _ in req.creations), code),
                DeleteAcls: lambda req, code: DeleteAclsResponse(
                    tuple(DeleteAclsResult(code, None, ()) for _ in req.filters), code),
                DescribeAcls: lambda req, code: DescribeAclsResponse(code, None),
            },
            replayers={ScramCredentialKey: self._replay_credential, AclKey: self._replay_acl},
        )

    # ---- reads -----------------------------------------------------------------------------------

    def credential(self, user: str, mechanism: int) -> ScramCredential | None:
        """The user's published (durable) credential: what SASL authenticates against."""
        return self._published_credentials.get((user, mechanism))

    @property
    def index(self) -> AclIndex:
        """The published ACLs (durable changes only): what the authorizer decides with. Rebuilt
        on first use after a change, so loading many ACL records builds it once."""
        if self._index_version != self.version:
            self._index = AclIndex(self._published_acls)
            self._index_version = self.version
        return self._index

    # ---- publication (the runtime calls these; see the module docstring) ------------------------

    def mark(self) -> int | None:
        """The position of the last change handled if some change is not published yet, else None.
        Called after an entry is appended: `publish(mark)` once that entry is durable."""
        return self._changes if self._published != self._changes else None

    def publish(self, upto: int) -> None:
        """Publish every change up to `upto` (the log is ordered: a durable entry covers every
        earlier one). Calls for an older mark do nothing."""
        acls_changed = False
        while self._published < upto and self._unpublished:
            key, value = self._unpublished.popleft()
            self._published += 1
            if isinstance(key, AclKey):
                acl = _binding(key)
                if value is None:
                    self._published_acls.discard(acl)
                else:
                    self._published_acls.add(acl)
                acls_changed = True
            elif value is None:
                self._published_credentials.pop((key.user, key.mechanism), None)
            else:
                self._published_credentials[(key.user, key.mechanism)] = _credential(value)
        if acls_changed:
            self.version += 1

    def _changed(self, key: ScramCredentialKey | AclKey, value: Any, live: bool) -> None:
        self._unpublished.append((key, value))
        self._changes += 1
        if not live:  # read from the log: durable already
            self.publish(self._changes)

    def durable_view(self) -> dict[str, Any]:
        return {"credentials": dict(sorted(self.credentials.items())), "acls": sorted(self.acls)}

    # ---- SCRAM credentials ---------------------------------------------------------------------

    def alter_credentials(self, req: AlterScramCredentials, fx: Effects) -> None:
        deletions: dict[str, ScramDeletion] = {}
        upsertions: dict[str, ScramUpsertion] = {}
        refused: dict[str, tuple[int, str]] = {}
        for deletion in req.deletions:
            if deletion.user in refused:
                continue
            if deletions.pop(deletion.user, None) is not None:
                refused[deletion.user] = (ErrorCode.DUPLICATE_RESOURCE, _TWICE)
                continue
            problem = _check_user(deletion.user, deletion.mechanism)
            if problem is None and (deletion.user, deletion.mechanism) not in self.credentials:
                problem = (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
            if problem is None:
                deletions[deletion.user] = deletion
            else:
                refused[deletion.user] = problem
        for upsertion in req.upsertions:
            if upsertion.user in refused:
                continue
            if deletions.pop(upsertion.user, None) is not None or upsertions.pop(upsertion.user, None) is not None:
                refused[upsertion.user] = (ErrorCode.DUPLICATE_RESOURCE, _TWICE)
                continue
            problem = _check_user(upsertion.user, upsertion.mechanism)
            if problem is None and upsertion.iterations < MIN_ITERATIONS:
                problem = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            elif problem is None and upsertion.iterations > MAX_ITERATIONS:
                problem = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
            if problem is None:
                upsertions[upsertion.user] = upsertion
            else:
                refused[upsertion.user] = problem
        results = []
        for deletion in deletions.values():
            fx.record(Record(ScramCredentialKey(deletion.user, deletion.mechanism), None))
            results.append(UserResult(deletion.user, ErrorCode.NONE, None))
        for upsertion in upsertions.values():
            mechanism = scram.BY_TYPE[upsertion.mechanism]
            credential = scram.credential_from_salted(mechanism, upsertion.salted_password, upsertion.salt,
                                                      upsertion.iterations)
            fx.record(Record(ScramCredentialKey(upsertion.user, upsertion.mechanism), ScramCredentialValue(
                credential.salt, credential.stored_key, credential.server_key, credential.iterations)))
            results.append(UserResult(upsertion.user, ErrorCode.NONE, None))
        results += [UserResult(user, code, message) for user, (code, message) in refused.items()]
        fx.reply(req.ref, AlterScramCredentialsResponse(tuple(results)))

    def describe_credentials(self, req: DescribeScramCredentials, fx: Effects) -> None:
        named: dict[str, bool] = {}  # user -> named twice
        if not req.users:
            named = {user: False for user, _ in sorted(self.credentials)}
        else:
            for user in req.users:
                named[user] = user in named
        results = []
        for user, twice in named.items():
            if twice:
                results.append(DescribedUser(user, ErrorCode.DUPLICATE_RESOURCE,
                                             "Cannot describe SCRAM credentials for the same user twice in a "
                                             f"single request: {user}", ()))
                continue
            found = tuple((mechanism, self.credentials[(user, mechanism)].iterations)
                          for mechanism in sorted(scram.BY_TYPE) if (user, mechanism) in self.credentials)
            if found:
                results.append(DescribedUser(user, ErrorCode.NONE, None, found))
            else:
                results.append(DescribedUser(user, ErrorCode.RESOURCE_NOT_FOUND,
                                             f"Attempt to describe a user credential that does not exist: {user}", ()))
        fx.reply(req.ref, DescribeScramCredentialsResponse(ErrorCode.NONE, tuple(results)))

    def _replay_credential(self, key: ScramCredentialKey, value: ScramCredentialValue | None, live: bool) -> None:
        if value is None:
            self.credentials.pop((key.user, key.mechanism), None)
        else:
            self.credentials[(key.user, key.mechanism)] = _credential(value)
        self._changed(key, value, live)

    # ---- ACLs ---------------------------------------------------------------------------------------

    def create_acls(self, req: CreateAcls, fx: Effects) -> None:
        results: list[tuple[int, str | None]] = []
        added: dict[AclBinding, None] = {}
        for acl in req.creations:
            problem = validate_new(acl)
            if problem is not None:
                results.append(problem)
                continue
            if acl not in self.acls:
                added[acl] = None
            results.append((ErrorCode.NONE, None))
        if len(added) > MAX_RECORDS_PER_USER_OP:  # Kafka's controller: the whole request fails
            refused = (ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
            fx.reply(req.ref, CreateAclsResponse(tuple(refused for _ in req.creations)))
            return
        for acl in added:
            fx.record(Record(AclKey(*acl), AclValue()))
        fx.reply(req.ref, CreateAclsResponse(tuple(results)))

    def delete_acls(self, req: DeleteAcls, fx: Effects) -> None:
        results = []
        deleted: set[AclBinding] = set()
        for acl_filter in req.filters:
            problem = acl_filter.unknown()
            if problem is not None:
                results.append(DeleteAclsResult(ErrorCode.INVALID_REQUEST, problem, ()))
                continue
            matched = tuple(sorted(acl for acl in self.acls if acl_filter.matches(acl)))
            for acl in matched:
                if acl not in deleted:
                    deleted.add(acl)
                    fx.record(Record(AclKey(*acl), None))
            results.append(DeleteAclsResult(ErrorCode.NONE, None, matched))
        fx.reply(req.ref, DeleteAclsResponse(tuple(results)))

    def describe_acls(self, req: DescribeAcls, fx: Effects) -> None:
        problem = req.filter.unknown()
        if problem is not None:
            fx.reply(req.ref, DescribeAclsResponse(ErrorCode.INVALID_REQUEST, problem))
            return
        fx.reply(req.ref, DescribeAclsResponse(ErrorCode.NONE, None,
                                               tuple(sorted(a for a in self.acls if req.filter.matches(a)))))

    def _replay_acl(self, key: AclKey, value: AclValue | None, live: bool) -> None:
        acl = _binding(key)
        if value is None:
            self.acls.discard(acl)
        else:
            self.acls.add(acl)
        self._changed(key, value, live)


def _binding(key: AclKey) -> AclBinding:
    return AclBinding(key.resource_type, key.resource_name, key.pattern_type, key.principal, key.host,
                      key.operation, key.permission_type)


def _credential(value: ScramCredentialValue) -> ScramCredential:
    return ScramCredential(value.salt, value.stored_key, value.server_key, value.iterations)


def _check_user(user: str, mechanism: int) -> tuple[int, str] | None:
    if not user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in scram.BY_TYPE:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def security_of(core: CoordinatorShard) -> SecurityStore:
    """The SCRAM credentials and ACLs the node installed into `core` (`CoordinatorShard(services=...)`)."""
    for service in core.services:
        if isinstance(service, SecurityStore):
            return service
    raise LookupError("this core was built without the security store")
