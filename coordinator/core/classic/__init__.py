"""Classic (pre-KIP-848) consumer groups: JoinGroup/SyncGroup/Heartbeat/LeaveGroup.

``state`` holds the state machine's theory of operation and its two tables, ``group`` the group and
member data (and the ``Group`` contract), ``schema`` its record type (GroupMetadata, type 2) and its
declaration, ``records`` the record factories, ``rebalance`` the join
barrier and assignment propagation every handler builds on, ``join`` and ``members`` the request
and timer handlers, ``manager`` load, unload, replay and the type's registration with the shard.
"""
