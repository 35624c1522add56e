"""Which share-partitions of a share group have state at the share coordinator: Kafka 4.1's
ShareGroupStatePartitionMetadata record (type 15 in `__consumer_offsets`, one per group).

Three sets: topics whose partitions' state is being initialized (AlterShareGroupOffsets between
its two writes), those with initialized state, and topics whose state is being deleted
(DeleteShareGroupOffsets, DeleteGroups between the mark and the share coordinator's answer). The
group coordinator reads it to describe a group's offsets when it has no members, and to know
what to delete at the share coordinator when the group goes. Values are replaced whole.

Unlike Kafka, a partition the group is assigned is recorded as initialized at once: our partition
leaders create a share-partition's state lazily (from `share.auto.offset.reset`) when they first
serve it, so there is nothing to initialize eagerly.
"""

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kio.static.primitive import i32, i64

from protocol.generated.share_group_state_partition_metadata_key.v0.data import (
    ShareGroupStatePartitionMetadataKey as Key,
)
from protocol.generated.share_group_state_partition_metadata_value.v0 import data as val

from ..record_framing import I16, RecordFormatError, decode_prefixed, encode_prefixed

STATE_PARTITIONS = 15

# topic id -> (name, partitions) as callers name what they add
Parts = Mapping[uuid.UUID, tuple[str, Iterable[int]]]


@dataclass(frozen=True, slots=True)
class TopicParts:
    name: str
    partitions: frozenset[int]
    create_timestamp: int = -1


@dataclass(slots=True)
class StatePartitions:
    initializing: dict[uuid.UUID, TopicParts] = field(default_factory=dict)
    initialized: dict[uuid.UUID, TopicParts] = field(default_factory=dict)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)

    def known(self) -> dict[uuid.UUID, TopicParts]:
        """Initialized and initializing partitions together, per topic."""
        out = dict(self.initialized)
        for t, tp in self.initializing.items():
            have = out.get(t)
            out[t] = tp if have is None else TopicParts(tp.name, have.partitions | tp.partitions)
        return out

    def copy(self) -> "StatePartitions":
        return StatePartitions(dict(self.initializing), dict(self.initialized), dict(self.deleting))


def _merge(into: dict[uuid.UUID, TopicParts], parts: Parts, now: int) -> None:
    for t, (name, ps) in parts.items():
        have = into.get(t)
        new = frozenset(ps)
        if have is None:
            into[t] = TopicParts(name, new, now)
        elif not new <= have.partitions:
            into[t] = TopicParts(name, have.partitions | new, now)


def _subtract(into: dict[uuid.UUID, TopicParts], parts: Parts) -> None:
    for t, (_, ps) in parts.items():
        have = into.get(t)
        if have is None:
            continue
        rest = have.partitions - frozenset(ps)
        if rest:
            into[t] = TopicParts(have.name, rest, have.create_timestamp)
        else:
            del into[t]


def add_initialized(sp: StatePartitions, parts: Parts, now: int) -> StatePartitions:
    """Partitions whose state exists (or is created lazily): initialized, no longer deleting."""
    out = sp.copy()
    _subtract(out.initializing, parts)
    _merge(out.initialized, parts, now)
    for t in parts:
        out.deleting.pop(t, None)
    return out


def add_initializing(sp: StatePartitions, parts: Parts, now: int) -> StatePartitions:
    out = sp.copy()
    _merge(out.initializing, parts, now)
    for t in parts:
        out.deleting.pop(t, None)
    return out


def drop_initializing(sp: StatePartitions, parts: Parts) -> StatePartitions:
    """Initialization failed: the partitions are in no set."""
    out = sp.copy()
    _subtract(out.initializing, parts)
    return out


def mark_deleting(sp: StatePartitions, topics: Mapping[uuid.UUID, str]) -> StatePartitions:
    """Whole topics out of the initialized and initializing sets, into the deleting one."""
    out = sp.copy()
    for t, name in topics.items():
        out.initialized.pop(t, None)
        out.initializing.pop(t, None)
        out.deleting[t] = name
    return out


def drop_deleting(sp: StatePartitions, topics: Iterable[uuid.UUID]) -> StatePartitions:
    out = sp.copy()
    for t in topics:
        out.deleting.pop(t, None)
    return out


# -- records -------------------------------------------------------------------------------------


def key(group: str) -> bytes:
    return encode_prefixed(STATE_PARTITIONS, Key(group_id=group))


def decode_group(key_bytes: bytes) -> str:
    return str(decode_prefixed(Key, key_bytes).group_id)


def _infos(parts: dict[uuid.UUID, TopicParts]) -> tuple[val.TopicPartitionsInfo, ...]:
    return tuple(
        val.TopicPartitionsInfo(
            topic_id=t,
            topic_name=tp.name,
            partitions=tuple(i32(p) for p in sorted(tp.partitions)),
            create_timestamp=i64(tp.create_timestamp),
        )
        for t, tp in sorted(parts.items())
    )


def value(sp: StatePartitions) -> bytes:
    return encode_prefixed(
        0,
        val.ShareGroupStatePartitionMetadataValue(
            initializing_topics=_infos(sp.initializing),
            initialized_topics=_infos(sp.initialized),
            deleting_topics=tuple(
                val.TopicInfo(topic_id=t, topic_name=name)
                for t, name in sorted(sp.deleting.items())
            ),
        ),
    )


def _parts(infos: tuple[val.TopicPartitionsInfo, ...]) -> dict[uuid.UUID, TopicParts]:
    return {
        i.topic_id: TopicParts(
            i.topic_name, frozenset(int(p) for p in i.partitions), int(i.create_timestamp)
        )
        for i in infos
        if i.topic_id is not None
    }


def decode_value(data: bytes) -> StatePartitions:
    if len(data) < 2 or I16.unpack_from(data)[0] != 0:
        raise RecordFormatError("ShareGroupStatePartitionMetadataValue: unknown version")
    v = decode_prefixed(val.ShareGroupStatePartitionMetadataValue, data)
    return StatePartitions(
        initializing=_parts(v.initializing_topics),
        initialized=_parts(v.initialized_topics),
        deleting={d.topic_id: d.topic_name for d in v.deleting_topics if d.topic_id is not None},
    )
