"""Shards over cores: groups placed on log partitions, partitions on shard processes
(`placement`), the NOT_COORDINATOR checks derived from the APIs' declared placements
(`ownership`), and the processes run by a supervisor."""
