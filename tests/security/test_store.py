"""The security store as a shard service: every change is a record, and a replay of the log
equals the live state (through the core harness, which checks that after every step)."""

from __future__ import annotations

from coordinator.security import scram
from coordinator.security.acls import AclBinding, AclFilter
from coordinator.security.requests import (
    AlterScramCredentials,
    CreateAcls,
    DeleteAcls,
    DescribeAcls,
    ScramDeletion,
    ScramUpsertion,
)
from coordinator.security.store import SecurityStore, security_of
from tests.core.harness import Harness

READ_G = AclBinding(3, "g", 3, "User:alice", "*", 3, 3)


def _upsert(user: str, password: str) -> ScramUpsertion:
    salt = b"0123456789abcdef"
    return ScramUpsertion(user, 2, 4096, salt, scram.salted_password(scram.SCRAM_SHA_512, password, salt, 4096))


def test_credentials_and_acls_replay_to_the_live_state() -> None:
    h = Harness(services=lambda: (SecurityStore(),))
    ref = h.next_ref()
    h.send(AlterScramCredentials(ref, (), (_upsert("alice", "pw"), _upsert("bob", "pw"))))
    assert [r.error_code for r in h.reply(ref).results] == [0, 0]
    credential = security_of(h.shard).credentials["alice", 2]
    assert credential == scram.new_credential(scram.SCRAM_SHA_512, "pw", 4096, b"0123456789abcdef")
    ref = h.next_ref()
    h.send(AlterScramCredentials(ref, (ScramDeletion("bob", 2),), ()))
    assert ("bob", 2) not in security_of(h.shard).credentials
    ref = h.next_ref()
    h.send(CreateAcls(ref, (READ_G, READ_G._replace(resource_name="h"))))
    ref = h.next_ref()
    h.send(DeleteAcls(ref, (AclFilter(3, "h", 1, None, None, 1, 1),)))
    assert security_of(h.shard).acls == {READ_G}
    h.check()  # replaying every record gives the same store
    restarted = h.restart()
    assert restarted is not None and security_of(h.shard).acls == {READ_G}
    # A replayed record is durable: the edges' view has it at once.
    assert security_of(h.shard).credential("alice", 2) == credential
    assert security_of(h.shard).index.authorize("User:alice", "h1", 3, 3, "g", False)


def test_a_live_change_reaches_the_edges_view_only_when_published() -> None:
    """The core sees a change at once; SASL and the authorizer only after `publish(mark)`, which
    the runtime calls when the entry carrying the change is durable."""
    h = Harness(services=lambda: (SecurityStore(),))
    store = security_of(h.shard)
    assert store.mark() is None
    ref = h.next_ref()
    h.send(AlterScramCredentials(ref, (), (_upsert("alice", "pw"),)))
    first = store.mark()
    assert first is not None and ("alice", 2) in store.credentials and store.credential("alice", 2) is None
    ref = h.next_ref()
    h.send(CreateAcls(ref, (READ_G,)))
    second = store.mark()
    assert second is not None and second > first
    assert store.acls == {READ_G} and not store.index.authorize("User:alice", "h1", 3, 3, "g", False)
    store.publish(first)  # the first entry is durable, the second not yet
    assert store.credential("alice", 2) is not None
    assert not store.index.authorize("User:alice", "h1", 3, 3, "g", False)
    version = store.version
    store.publish(second)
    assert store.index.authorize("User:alice", "h1", 3, 3, "g", False) and store.version > version
    assert store.mark() is None
    store.publish(first)  # a late callback for an older entry changes nothing
    assert store.index.authorize("User:alice", "h1", 3, 3, "g", False)
    ref = h.next_ref()
    h.send(DeleteAcls(ref, (AclFilter(3, "g", 1, None, None, 1, 1),)))
    assert store.acls == set() and store.index.authorize("User:alice", "h1", 3, 3, "g", False)
    store.publish(store.mark() or 0)
    assert not store.index.authorize("User:alice", "h1", 3, 3, "g", False)


def test_more_than_ten_thousand_new_acls_in_one_request_write_nothing() -> None:
    h = Harness(services=lambda: (SecurityStore(),))
    ref = h.next_ref()
    many = tuple(READ_G._replace(resource_name=f"g{i}") for i in range(10_001))
    result = h.send(CreateAcls(ref, many))
    assert not result.records and {r for r in h.reply(ref).results} == {
        (44, "Unable to perform excessively large batch operation.")}
    ref = h.next_ref()
    h.send(DescribeAcls(ref, AclFilter(1, None, 1, None, None, 1, 1)))
    assert h.reply(ref).acls == ()
