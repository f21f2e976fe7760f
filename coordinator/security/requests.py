"""The security service's core requests and responses (version-free, as `core/requests.py`'s).

Kept apart from `store.py` so `core/requests.py` can name them in its `Request` union without an
import cycle; they depend on nothing but the ACL model.
"""

from __future__ import annotations

from typing import NamedTuple

import msgspec

from protocol.errors import ErrorCode

from .acls import AclBinding, AclFilter


class ScramDeletion(NamedTuple):
    user: str
    mechanism: int


class ScramUpsertion(NamedTuple):
    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


class UserResult(NamedTuple):
    user: str
    error_code: int
    error_message: str | None


class AlterScramCredentials(msgspec.Struct, frozen=True, gc=False):
    ref: int
    deletions: tuple[ScramDeletion, ...]
    upsertions: tuple[ScramUpsertion, ...]


class AlterScramCredentialsResponse(NamedTuple):
    results: tuple[UserResult, ...]
    error_code: int = ErrorCode.NONE


class DescribeScramCredentials(msgspec.Struct, frozen=True, gc=False):
    ref: int
    users: tuple[str, ...] | None


class DescribedUser(NamedTuple):
    user: str
    error_code: int
    error_message: str | None
    credentials: tuple[tuple[int, int], ...]  # (mechanism, iterations)


class DescribeScramCredentialsResponse(NamedTuple):
    error_code: int
    results: tuple[DescribedUser, ...] = ()


class CreateAcls(msgspec.Struct, frozen=True, gc=False):
    ref: int
    creations: tuple[AclBinding, ...]


class CreateAclsResponse(NamedTuple):
    results: tuple[tuple[int, str | None], ...]
    error_code: int = ErrorCode.NONE


class DeleteAcls(msgspec.Struct, frozen=True, gc=False):
    ref: int
    filters: tuple[AclFilter, ...]


class DeleteAclsResult(NamedTuple):
    error_code: int
    error_message: str | None
    deleted: tuple[AclBinding, ...]


class DeleteAclsResponse(NamedTuple):
    results: tuple[DeleteAclsResult, ...]
    error_code: int = ErrorCode.NONE


class DescribeAcls(msgspec.Struct, frozen=True, gc=False):
    ref: int
    filter: AclFilter


class DescribeAclsResponse(NamedTuple):
    error_code: int
    error_message: str | None
    acls: tuple[AclBinding, ...] = ()
