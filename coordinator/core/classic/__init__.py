"""Classic (pre-KIP-848) consumer groups: JoinGroup/SyncGroup/Heartbeat/LeaveGroup.

``state`` holds the state machine's theory of operation and its two tables, ``group`` the group and
member data, ``manager`` the request and timer handlers.
"""
