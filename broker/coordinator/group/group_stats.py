"""What the group coordinator's metrics count and show (`broker.metrics.group_metrics`).

Counters are read off the records a shard appends to `__consumer_offsets` (wrapping its log),
so the group code needs no hooks and a log replayed on load counts nothing: an offset commit
record with a value is one offset committed; a consumer or share group metadata record with a
value is a new group epoch, i.e. a rebalance, as Kafka counts them. Records of transactional
offset commits are not counted (Kafka counts OffsetCommit only).
"""

from collections.abc import Iterable
from typing import Any

from broker.coordinator.group import consumer_records as crec
from broker.coordinator.group import records as rec
from broker.coordinator.group import share_records as srec
from broker.coordinator.record_framing import I16
from broker.coordinator.runtime import Record, RecordLog
from broker.metrics.group_metrics import GroupCounters, GroupSnapshot

_OFFSETS = frozenset({rec.LEGACY_OFFSET_COMMIT, rec.OFFSET_COMMIT})


class CountingLog:
    """A shard's log whose appends are counted; everything else goes to the log as is."""

    def __init__(self, log: RecordLog, counters: GroupCounters) -> None:
        self._log = log
        self._counters = counters

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)  # replay, transactional appends, markers...

    async def append(self, records: list[Record]) -> None:
        await self._log.append(records)
        count(records, self._counters)


def count(records: Iterable[Record], c: GroupCounters) -> None:
    for key, value in records:
        if value is None or len(key) < 2:
            continue
        (t,) = I16.unpack_from(key)
        if t in _OFFSETS:
            c.offset_commits += 1
        elif t == crec.GROUP_METADATA:
            c.consumer_rebalances += 1
        elif t == srec.GROUP_METADATA:
            c.share_rebalances += 1


def snapshot(listed: Iterable[Any], counters: GroupCounters) -> GroupSnapshot:
    """From the shards' ListedGroup rows (group type, state) and the counters, copied."""
    return GroupSnapshot(
        groups=tuple((g.group_type, g.state) for g in listed),
        counters=GroupCounters(
            counters.consumer_rebalances, counters.share_rebalances, counters.offset_commits
        ),
    )
