"""Coordinators built on a small sharded runtime (one shard per internal-topic partition)."""
