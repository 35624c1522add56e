"""Transactional offset commits (TxnOffsetCommit) waiting for their transaction's marker.

Kafka's semantics (GroupMetadataManager / OffsetMetadataManager): offsets a producer commits
inside a transaction are invisible until the COMMIT marker lands on the `__consumer_offsets`
partition, and dropped on ABORT. When a transaction commits, its offset for a partition is
materialized unless a plain commit of that partition was written after it (the newer commit
wins); a tombstone of the partition drops the pending offset. While any is pending, OffsetFetch
with require_stable answers UNSTABLE_OFFSET_COMMIT for that partition.
"""

from dataclasses import dataclass

from .records import OffsetValue

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class PendingOffset:
    value: OffsetValue
    # A plain commit of the same partition was written after this one: keep that on COMMIT.
    superseded: bool = False


class PendingTxnOffsets:
    """Pending transactional offsets of one shard: producer id -> group -> partition."""

    def __init__(self) -> None:
        self._by_producer: dict[int, dict[str, dict[TopicPartition, PendingOffset]]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_producer)

    def add(self, producer_id: int, group_id: str, tp: TopicPartition, value: OffsetValue) -> None:
        groups = self._by_producer.setdefault(producer_id, {})
        groups.setdefault(group_id, {})[tp] = PendingOffset(value)

    def on_plain_commit(self, group_id: str, tp: TopicPartition) -> None:
        """A non-transactional commit of `tp` came after every offset pending for it."""
        for groups in self._by_producer.values():
            pending = groups.get(group_id, {}).get(tp)
            if pending is not None:
                pending.superseded = True

    def drop_partition(self, group_id: str, tp: TopicPartition) -> None:
        """The partition's offset was deleted (a tombstone): pending ones go too."""
        for groups in self._by_producer.values():
            groups.get(group_id, {}).pop(tp, None)

    def drop_group(self, group_id: str) -> None:
        for groups in self._by_producer.values():
            groups.pop(group_id, None)

    def complete(
        self, producer_id: int, commit: bool
    ) -> list[tuple[str, TopicPartition, OffsetValue]]:
        """End `producer_id`'s transaction; on COMMIT, the offsets to make visible."""
        groups = self._by_producer.pop(producer_id, None)
        if not groups or not commit:
            return []
        return [
            (group_id, tp, p.value)
            for group_id, parts in groups.items()
            for tp, p in parts.items()
            if not p.superseded
        ]

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        return any(tp in groups.get(group_id, {}) for groups in self._by_producer.values())

    def has_group(self, group_id: str) -> bool:
        return any(groups.get(group_id) for groups in self._by_producer.values())

    def partitions(self, group_id: str) -> set[TopicPartition]:
        out: set[TopicPartition] = set()
        for groups in self._by_producer.values():
            out.update(groups.get(group_id, {}))
        return out

    def clear(self) -> None:
        self._by_producer.clear()
