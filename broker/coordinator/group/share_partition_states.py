"""Per share group of one `__consumer_offsets` shard: which share-partitions have state at the
share coordinator (record 15, `share_state_partitions`), kept by `ShareGroups`.

Each change replaces the group's whole record (a new value only when the sets changed), in
memory before the append, as the rest of the shard: the runtime rebuilds the shard from the log
if the append fails.
"""

import uuid
from collections.abc import Callable, Mapping

from broker.coordinator.group import share_state_partitions as ssp
from broker.coordinator.group.consumer_group import TopicsView
from broker.coordinator.runtime import Record

Change = Callable[[ssp.StatePartitions, int], ssp.StatePartitions]
Topology = tuple[tuple[str, uuid.UUID, int], ...]


class SharePartitionStates:
    def __init__(self, now_ms: Callable[[], int], topics: Callable[[], TopicsView]) -> None:
        self.now_ms = now_ms  # stamps what a change adds
        self.topics = topics
        self.parts: dict[str, ssp.StatePartitions] = {}

    def _change(self, group_id: str, change: Change) -> list[Record]:
        """The group's sets changed by `change` (given the time, to stamp what it adds): its
        record if they differ."""
        old = self.parts.get(group_id, ssp.StatePartitions())
        new = change(old, self.now_ms())
        if new == old:
            return []
        self.parts[group_id] = new
        return [(ssp.key(group_id), ssp.value(new))]

    def assigned(self, group_id: str, topology: Topology) -> list[Record]:
        """Every partition of the topics the group is assigned: initialized (our leaders
        create a share-partition's state when they first serve it)."""
        parts = {t: (name, range(count)) for name, t, count in topology}
        return self._change(group_id, lambda sp, now: ssp.add_initialized(sp, parts, now))

    def mark(
        self, group_id: str, initializing: ssp.Parts, deleting: Mapping[uuid.UUID, str]
    ) -> list[Record]:
        """Partitions about to be initialized, topics about to be deleted (offset changes);
        a name left empty by the caller is filled in from the topics."""
        names = {t: name for name, (t, _) in self.topics().items()}

        def change(sp: ssp.StatePartitions, now: int) -> ssp.StatePartitions:
            named = {t: (name or names.get(t, ""), ps) for t, (name, ps) in initializing.items()}
            sp = ssp.add_initializing(sp, named, now)
            return ssp.mark_deleting(
                sp, {t: name or names.get(t, "") for t, name in deleting.items()}
            )

        return self._change(group_id, change)

    def done(
        self,
        group_id: str,
        initialized: ssp.Parts,
        failed: ssp.Parts,
        deleted: list[uuid.UUID],
    ) -> list[Record]:
        """The share coordinator answered: initialized partitions recorded, failed ones
        forgotten, deleted topics out of the deleting set."""

        def change(sp: ssp.StatePartitions, now: int) -> ssp.StatePartitions:
            sp = ssp.drop_initializing(sp, failed)
            return ssp.drop_deleting(ssp.add_initialized(sp, initialized, now), deleted)

        return self._change(group_id, change)

    def prepare_delete(self, group_id: str) -> tuple[list[tuple[uuid.UUID, int]], list[Record]]:
        """DeleteGroups: the known share-partitions (and every partition of topics left
        deleting by an earlier attempt) to delete, all topics now marked deleting."""
        sp = self.parts.get(group_id, ssp.StatePartitions())
        counts = dict(self.topics().values())
        keys = {(t, p) for t, tp in sp.known().items() for p in tp.partitions}
        for t in sp.deleting:
            keys |= {(t, p) for p in range(counts.get(t, 0))}
        doomed = {t: tp.name for t, tp in sp.known().items()}
        records = self._change(group_id, lambda old, _: ssp.mark_deleting(old, doomed))
        return sorted(keys), records

    def initialized(self, group_id: str) -> dict[uuid.UUID, ssp.TopicParts]:
        sp = self.parts.get(group_id)
        return dict(sp.initialized) if sp is not None else {}

    def tombstones(self, group_id: str) -> list[Record]:
        return [(ssp.key(group_id), None)] if group_id in self.parts else []

    def replay(self, group_id: str, value: bytes | None) -> None:
        if value is None:
            self.parts.pop(group_id, None)
        else:
            self.parts[group_id] = ssp.decode_value(value)
