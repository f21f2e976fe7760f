"""KIP-848 consumer groups (``group.protocol=consumer``), as Apache Kafka 4.x implements them.

- :mod:`.group` - the group and member data, and the replay of the consumer-group records: the ONLY
  code that changes consumer-group state (theory of operation there);
- :mod:`.reconciliation` - how a member moves from its current assignment towards its target
  (Kafka's ``CurrentAssignmentBuilder``): revoke before assign;
- :mod:`.manager` - ConsumerGroupHeartbeat, ConsumerGroupDescribe, timers and topic metadata changes:
  validation, then records (Kafka's ``GroupMetadataManager`` consumer half);
- :mod:`.topics` - the pure topic metadata snapshot, RE2 regex resolution and the metadata hash.
"""
