"""The order Java's HashMap and HashSet iterate in, for the tools whose output Kafka prints from
one (kafka-log-dirs.sh's JSON, kafka-delete-records.sh's results): scripts that compare output
see the same order. Iteration goes bucket by bucket (the spread hash masked by the table size,
which doubles past a 0.75 load), entries of one bucket in insertion order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def _int32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n >= 1 << 31 else n


def string_hash(s: str) -> int:
    """java.lang.String.hashCode over UTF-16 code units."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return _int32(h)


def topic_partition_hash(topic: str, partition: int) -> int:
    """org.apache.kafka.common.TopicPartition.hashCode."""
    return _int32(31 * (31 + partition) + string_hash(topic))


def _table_size(count: int) -> int:
    size = 16
    while count > size * 3 // 4:
        size *= 2
    return size


def hash_order(items: Iterable[T], key_hash: Callable[[T], int]) -> list[T]:
    """``items`` (in insertion order, distinct keys) as a default-sized HashMap holding them
    iterates."""
    entries = list(items)
    mask = _table_size(len(entries)) - 1

    def bucket(item: T) -> int:
        h = key_hash(item) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & mask

    return [e for _, e in sorted(enumerate(entries), key=lambda ie: (bucket(ie[1]), ie[0]))]
