"""Durable compacted record log: framed entries in segment files, group commit, compaction."""
