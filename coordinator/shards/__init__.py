"""Shards over cores: groups placed on log partitions, partitions on shard processes
(`placement`), and the processes run by a supervisor."""
