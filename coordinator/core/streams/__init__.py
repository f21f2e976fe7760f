"""Streams groups (KIP-1071): the pure core of a new group type, with warm-up tasks.

What this package owns, one module each: tasks and task sets (``tasks``), a member (``member``),
the records and their factories (``records``), the topology's validation and the internal topics
it needs (``topology``), Kafka's sticky task assignor (``assignor``), the warm-up step that turns
the assignor's target into the assignment members reconcile toward (``warmup``), and member
reconciliation (``reconciliation``, Kafka's ``CurrentAssignmentBuilder``), and a group as its
records rebuild it, with its state (``group``), and which offset commits and fetches of streams
members it accepts (``offsets``); the version-free heartbeat request and the checks Kafka makes
before a group sees it (``heartbeat_request``); the Interactive Queries endpoints' partitions
(``endpoints``); a new target and its records (``targets``); the heartbeat's statuses
(``status``); and one heartbeat start to end as a pure step (``heartbeat``): records, response,
timers, internal topics; StreamsGroupDescribe's description and the timeouts' expiry
(``describe``).

Wired: ``schema`` declares the records to the shard and ``registration`` registers the type
(``shard.GROUP_TYPES``): the group under the ``Group`` contract, its requests (``requests``), the
session and rebalance timers; ``runtime/apis/streams_groups.py`` serves its two APIs.
"""
